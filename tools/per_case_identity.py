"""Behaviour-preservation check for refactors: the four variants' per-case metrics, before and after.

    python tools/per_case_identity.py snapshot OUT.json   # runs experiment=compare_variants (no caches) into a
                                                           # scratch MLflow store and saves every per-case value
    python tools/per_case_identity.py compare A.json B.json [--tol 1e-12]

``compare`` prints the number of values compared and the largest absolute difference, and exits 1
if any value differs by more than the tolerance or a (variant, case, metric) is missing on one side.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# wall-clock columns differ between any two runs: they are timings, not results
TIMING_COLUMNS = {"latency_ms"}


def snapshot(out: Path) -> None:
    from mlflow.tracking import MlflowClient

    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{tmp}/mlflow.db"
        env = {**os.environ, "MLFLOW_TRACKING_URI": uri}
        subprocess.run([sys.executable, str(ROOT / "run.py"), "experiment=compare_variants", "progress=false",
                        "tracking.plots=false", "retrieval.use_cache=false",
                        f"hydra.sweep.dir={tmp}/multirun"],
                       cwd=ROOT, env=env, check=True)
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name("rag-experiments")
        # MLflow's `!=` never matches a run without the tag: filter the parent out here
        runs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("sweep") != "parent"]
        values: dict[str, float] = {}
        for run in runs:
            variant = run.data.params.get("retrieval.variant") or run.info.run_name
            path = client.download_artifacts(run.info.run_id, "per_case.json", tmp)
            table = json.loads(Path(path).read_text())
            columns, rows = table["columns"], table["data"]
            case_col = columns.index("case_id")
            for row in rows:
                for name, value in zip(columns, row):
                    if name not in TIMING_COLUMNS and isinstance(value, (int, float)) and not isinstance(value, bool):
                        values[f"{variant}|{row[case_col]}|{name}"] = float(value)
    if len(runs) != 4 or not values:
        sys.exit(f"error: expected the 4 variants' runs with per-case tables, found {len(runs)} runs, {len(values)} values")
    out.write_text(json.dumps(values, sort_keys=True, indent=0))
    print(f"{len(values)} per-case values from {len(runs)} runs -> {out}")


def compare(a: Path, b: Path, tol: float) -> int:
    va, vb = ({k: v for k, v in json.loads(p.read_text()).items() if k.rsplit("|", 1)[-1] not in TIMING_COLUMNS}
              for p in (a, b))
    if not va or not vb:
        print(f"error: {a if not va else b} holds no values: nothing to compare")
        return 1
    missing = sorted(set(va) ^ set(vb))
    worst, worst_key = 0.0, None
    for key in set(va) & set(vb):
        x, y = va[key], vb[key]
        d = 0.0 if (math.isnan(x) and math.isnan(y)) else abs(x - y)
        if d > worst or math.isnan(d):
            worst, worst_key = d, key
    print(f"{len(set(va) & set(vb))} values compared; largest |difference| {worst:.3g}"
          + (f" at {worst_key}" if worst_key else "") + f"; {len(missing)} only on one side")
    for key in missing[:10]:
        print(f"  only in {'A' if key in va else 'B'}: {key}")
    return 0 if not missing and worst <= tol else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("snapshot")
    s.add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument("--tol", type=float, default=1e-12)
    args = ap.parse_args()
    if args.cmd == "snapshot":
        snapshot(args.out)
        return 0
    return compare(args.a, args.b, args.tol)


if __name__ == "__main__":
    sys.exit(main())
