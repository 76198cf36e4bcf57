"""Seconds to open a new sqlite MLflow store with ``rag_experiments.tracking.server.open_store``:
MLflow's schema migrations against a copy of ``$RAG_EXP_MLFLOW_STORE_TEMPLATE`` (what the test suite
sets in tests/conftest.py). Each opening is a fresh process that imports MLflow first (imports are
not what is measured); the template is made once beforehand.

    .venv/bin/python tools/store_template_cost.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

OPEN = """
import sys, time
import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
from rag_experiments.tracking import server
t = time.perf_counter()
server.open_store(sys.argv[1])
print(time.perf_counter() - t)
"""


def seconds(folder: str, template: str) -> float:
    env = dict(os.environ, RAG_EXP_MLFLOW_STORE_TEMPLATE=template)
    store = f"sqlite:///{tempfile.mkdtemp(dir=folder)}/mlflow.db"
    out = subprocess.run([sys.executable, "-c", OPEN, store], env=env, check=True, capture_output=True, text=True)
    return float(out.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        template = os.path.join(folder, "template.db")
        seconds(folder, template)  # makes the template
        for _ in range(args.repeat):
            migrated, copied = seconds(folder, ""), seconds(folder, template)
            print(f"new store: migrations {migrated:.2f} s, template copy {copied:.2f} s "
                  f"(load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
