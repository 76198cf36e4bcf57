"""rag-exp bench, section noise (issue 45): the HNSW index built again between runs of the same config,
every pair of builds compared case by case, the floor recorded where promote and the gate read it."""

from __future__ import annotations

from rag_experiments.config import settings_from_cfg

from .test_config import _compose
from .test_pipeline import _mini_overrides


def test_noise_section_rebuilds_the_index_and_records_the_floor(project, mini_golden, pg_url, capsys):
    from rag_experiments.bench import Table, bench_noise
    from rag_experiments.chunk_index import hnsw_index_name
    from rag_experiments.db.connect import connect
    from rag_experiments.tracking.noise_floor import floor_for, read_floors

    settings = settings_from_cfg(_compose(_mini_overrides(mini_golden, "retrieval.hnsw.m=2",
                                                          "retrieval.hnsw.ef_construction=4")))
    table = Table()
    bench_noise(pg_url, settings, table, builds=3, variant="vector")
    rows = [r for r in table.rows if r[0] == "noise"]
    assert [r[1].split(":")[0] for r in rows[:3]] == [f"vector, HNSW build {i} of 3" for i in (1, 2, 3)]
    assert rows[3][1].startswith("queries whose ranked list (as scored) changed between two builds (most over 3 pairs)")
    assert rows[4][1].startswith("cases whose metrics moved between two builds (most over 3 pairs)")
    (floor,) = read_floors()
    assert floor.variant == "vector" and floor.builds == 3 and floor.n_cases == 10
    assert floor.hnsw == {"m": 2, "ef_construction": 4, "ef_search": None}
    assert {"recall_at_5", "mrr_at_10", "ndcg_at_10"} <= set(floor.metrics)
    assert all(len(m.deltas) == 3 and m.floor == max(abs(d) for d in m.deltas) for m in floor.metrics.values())
    assert any(k.startswith("recall_at_5.") for k in floor.metrics)  # per query kind too
    with connect(pg_url) as conn:  # the index is there after the last rebuild (the database is shared: the
        # floor names the bench's strategy; any other test's strategy may come first in the table)
        assert conn.execute("SELECT to_regclass(%s)", (hnsw_index_name(floor.strategy, settings.retrieval.hnsw),)).fetchone()[0]

    class Run:  # what promote and the gate look up: an HNSW run of that strategy and variant
        id = "r" * 32
        tags = {"retrieval.vector.search": "hnsw", "strategy": floor.strategy, "variant": "vector"}
        params = {"retrieval.hnsw.m": "2", "retrieval.hnsw.ef_construction": "4"}

    found, note = floor_for([Run()])
    assert found == floor and note is None
