"""Exact scan vs HNSW per corpus size: where ``retrieval.vector.search=auto`` switches (issue 45, item 1).

    .venv/bin/python tools/vector_crossover.py [1000,3000,10000,30000,100000]

Random unit vectors of 384 dimensions (the bundled model's) in a throwaway embedded PostgreSQL; per size,
the HNSW build time (m 16, ef_construction 64) and p50 / p95 per query at depth 50 (60 queries, the
second of two passes), exact (index scans off) and HNSW (sequential scans off).
"""
import statistics
import tempfile
import time

import numpy as np
import psycopg
from pathlib import Path
from pgvector.psycopg import register_vector
from rag_experiments.db.connect import resolve_database_url
import sys
SIZES = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "1000,3000,10000,30000,100000").split(",")]
folder = Path(tempfile.mkdtemp(prefix="xo-", dir="/tmp")); folder.chmod(0o755)
url = resolve_database_url(None, folder / "pgdata")
conn = psycopg.connect(url, autocommit=True)
conn.execute("CREATE EXTENSION IF NOT EXISTS vector"); register_vector(conn)
rng = np.random.default_rng(0)
dim = 384
def unit(n):
    x = rng.standard_normal((n, dim)).astype(np.float32); return x / np.linalg.norm(x, axis=1, keepdims=True)
qs = unit(60)
for n in SIZES:
    conn.execute("DROP TABLE IF EXISTS t"); conn.execute(f"CREATE TABLE t (id int primary key, e vector({dim}))")
    X = unit(n)
    with conn.cursor().copy("COPY t (id, e) FROM STDIN WITH (FORMAT BINARY)") as cp:
        cp.set_types(["int4", "vector"])
        for i in range(n): cp.write_row((i, X[i]))
    t0 = time.time(); conn.execute("SET maintenance_work_mem='1GB'"); conn.execute("CREATE INDEX ON t USING hnsw (e vector_cosine_ops)"); build = time.time() - t0
    conn.execute("ANALYZE t")
    res = {}
    for mode in ("exact", "hnsw"):
        ts = []
        for rep in range(2):
            for q in qs:
                with conn.transaction():
                    conn.execute("SET LOCAL hnsw.ef_search = 50")
                    if mode == "exact": conn.execute("SET LOCAL enable_indexscan = off")
                    else: conn.execute("SET LOCAL enable_seqscan = off")
                    t0 = time.perf_counter()
                    conn.execute("SELECT id FROM t ORDER BY e <=> %s LIMIT 50", (q,), prepare=False).fetchall()
                    if rep: ts.append((time.perf_counter() - t0) * 1000)
        res[mode] = (statistics.median(ts), sorted(ts)[int(0.95 * len(ts))])
    print(f"n={n:>6} build={build:6.1f}s exact p50/p95={res['exact'][0]:.2f}/{res['exact'][1]:.2f} ms  hnsw p50/p95={res['hnsw'][0]:.2f}/{res['hnsw'][1]:.2f} ms", flush=True)
conn.close()
from rag_experiments.db.embedded import EmbeddedPostgres  # noqa: E402 - the throwaway server goes with its folder
import shutil  # noqa: E402

EmbeddedPostgres(folder / "pgdata").stop()
shutil.rmtree(folder, ignore_errors=True)
