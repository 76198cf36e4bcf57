"""``retrieval.vector.search`` (issue 45, item 1): exact scans give the same lists on any database, so the
same config on the same data gives the same per-case metrics; ``auto`` is exact up to a measured size."""

from __future__ import annotations

import numpy as np
import pytest

from rag_experiments.config import settings_from_cfg
from rag_experiments.errors import ConfigError
from rag_experiments.experiment import run_experiment
from rag_experiments.retrieval.legs import EXACT_MAX_CHUNKS, VectorSearchParams, vector_search

from ..test_config import _compose
from ..test_pipeline import _mini_overrides


def test_auto_is_exact_up_to_the_measured_size_and_says_why():
    auto = VectorSearchParams()
    assert auto.exact_for(EXACT_MAX_CHUNKS) and not auto.exact_for(EXACT_MAX_CHUNKS + 1)
    assert auto.describe(3020) == "exact (auto: 3,020 chunks <= 10,000)"
    assert auto.describe(20000) == "hnsw (auto: 20,000 chunks > 10,000)"
    assert VectorSearchParams("hnsw").describe(10) == "hnsw" and VectorSearchParams("exact").exact_for(10 ** 9)


def test_a_bad_mode_is_one_line_naming_the_key():
    with pytest.raises(ConfigError, match=r"retrieval\.vector\.search: must be one of auto, exact, hnsw, got 'ann'"):
        settings_from_cfg(_compose(["retrieval.vector.search=ann"]))


def _fresh_database(pg_server):
    import uuid

    import psycopg

    from tests.conftest import _with_db

    admin, _ = pg_server
    name = f"ragtest_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return admin, name, _with_db(admin, name)


def test_exact_search_gives_identical_per_case_metrics_on_two_fresh_databases(pg_server, mini_golden, monkeypatch,
                                                                            tmp_path):
    """The same config, the same data, two databases built from nothing: the same lists and metrics,
    and the exact leg's list is the brute-force cosine ranking (ties by chunk id)."""
    import psycopg

    from rag_experiments.db.connect import connect

    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))
    tables, made = [], []
    try:
        for _ in range(2):
            admin, name, url = _fresh_database(pg_server)
            made.append((admin, name))
            monkeypatch.setenv("DATABASE_URL", url)
            # a sparse graph, so an HNSW search would be approximate; the exact leg must not care
            settings = settings_from_cfg(_compose(_mini_overrides(mini_golden, "retrieval=vector",
                                                                  "retrieval.vector.search=exact",
                                                                  "retrieval.hnsw.m=2",
                                                                  "retrieval.hnsw.ef_construction=4",
                                                                  "retrieval.use_cache=false")))
            result = run_experiment(settings)
            tables.append(result.eval.per_case.drop(columns=["latency_ms"], errors="ignore"))
            with connect(url) as conn:
                sid = result.strategy.strategy_id
                rows = conn.execute("SELECT chunk_id, embedding::text FROM chunks WHERE strategy_id = %s",
                                    (sid,)).fetchall()
                ids = [r[0] for r in rows]
                mat = np.array([np.array(r[1].strip("[]").split(","), dtype=np.float32) for r in rows])
                q = mat[0] / np.linalg.norm(mat[0])
                sims = (mat / np.linalg.norm(mat, axis=1, keepdims=True)) @ q
                want = [ids[i] for i in sorted(range(len(ids)), key=lambda i: (-round(float(sims[i]), 5), ids[i]))][:20]
                got = [h.chunk_id for h in vector_search(conn, sid, mat[0], 20, result.strategy.dim, exact=True)]
                assert got[:1] == want[:1] and set(got) == set(want)
        a, b = tables
        assert len(a) == 10 and a.equals(b), (a, b)
    finally:
        for admin, name in made:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
