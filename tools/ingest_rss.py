"""Peak RSS and wall time of an ingest alone, on the scale benchmark's synthetic corpora.

    python tools/ingest_rss.py 10000,100000 LABEL    # one line per size: LABEL, size, the child's numbers

The same child process `rag-exp bench --scale` measures ingest in (``bench_scale._child('ingest')``:
its own VmHWM, the cheap hash embedder, no HNSW build, as ``--keyword-only``), on the same corpora
(fixed seed), without the benchmark's other rows: a before/after of the ingest's memory in minutes
instead of the whole benchmark's 19. Runs in a throwaway embedded server (or ``DATABASE_URL``'s).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import psycopg

from rag_experiments import bench_scale as B


def main(argv: list[str]) -> None:
    sizes = [int(x) for x in argv[0].split(",")]
    label = argv[1] if len(argv) > 1 else "ingest"
    pool, _ = B.sentence_pool(None)
    server = B.start_server()
    work = Path(tempfile.mkdtemp(prefix="rag-ingest-rss-"))
    try:
        for n in sizes:
            corpus = B.build_corpus(work / f"c{n}", n, pool, cases=(100,), progress=False)
            name = f"rss_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(server.admin, autocommit=True) as c:
                c.execute(f'CREATE DATABASE "{name}"')
            try:
                out = B._child("ingest", B._with_db(server.admin, name), corpus, 100,
                               f"sqlite:///{work}/mlflow.db", keyword_only=True)
            finally:
                with psycopg.connect(server.admin, autocommit=True) as c:
                    c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            shown = {k: round(v, 1) if isinstance(v, float) else v for k, v in out.items() if k != "strategy"}
            print(label, n, shown, flush=True)
            shutil.rmtree(work / f"c{n}", ignore_errors=True)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
