"""Score-based fusion (convex, CombSUM, CombMNZ; min-max, z-score, max, theoretical min-max):
hand-worked values, and agreement with ranx.fuse on the same runs (scores to 1e-9, same ranking
with ties by chunk id)."""

from __future__ import annotations

import random

import pytest

from rag_experiments.retrieval.score_fusion import normalise, score_fuse
from rag_experiments.types import Hit


def hit(cid: str, score: float, rank: int, leg: str) -> Hit:
    return Hit(cid, "d", "d", "t", 0, 10, score, rank, {leg: rank})


def legs_of(vector: dict[str, float], keyword: dict[str, float]) -> dict[str, list[Hit]]:
    def ranked(scores, leg):
        order = sorted(scores, key=lambda c: (-scores[c], c))
        return [hit(c, scores[c], i, leg) for i, c in enumerate(order, 1)]

    return {"vector": ranked(vector, "vector"), "keyword": ranked(keyword, "keyword")}


def test_normalisations_by_hand():
    assert normalise([0.2, 0.6, 1.0], "minmax", "vector") == pytest.approx([0.0, 0.5, 1.0])
    assert normalise([2.0, 4.0], "max", "keyword") == pytest.approx([0.5, 1.0])
    assert normalise([1.0, 3.0], "zscore", "keyword") == pytest.approx([-1.0, 1.0])  # mean 2, population std 1
    # theoretical min-max: cosine similarity's bound is -1, BM25's 0
    assert normalise([0.0, 0.5], "tmm", "vector") == pytest.approx([(0 + 1) / 1.5, 1.0])
    assert normalise([3.0, 6.0], "tmm", "keyword") == pytest.approx([0.5, 1.0])
    assert normalise([0.7, 0.7], "minmax", "vector") == [0.0, 0.0]  # equal scores: 0 / 1e-9 floor, as ranx


def test_convex_combsum_combmnz_by_hand():
    legs = legs_of({"a": 0.9, "b": 0.5, "c": 0.1}, {"b": 8.0, "d": 4.0, "c": 0.0})
    # min-max: vector a 1, b 0.5, c 0; keyword b 1, d 0.5, c 0
    convex = score_fuse(legs, "convex", "minmax", 50, {"vector": 0.3, "keyword": 0.7})
    assert [(h.chunk_id, round(h.score, 9)) for h in convex] == [("b", 0.85), ("d", 0.35), ("a", 0.3), ("c", 0.0)]
    assert convex[0].leg_ranks == {"vector": 2, "keyword": 1} and convex[0].rank == 1
    combsum = score_fuse(legs, "combsum", "minmax", 50, {"vector": 1.0, "keyword": 1.0})
    assert [(h.chunk_id, h.score) for h in combsum] == [("b", 1.5), ("a", 1.0), ("d", 0.5), ("c", 0.0)]
    combmnz = score_fuse(legs, "combmnz", "minmax", 50, {"vector": 1.0, "keyword": 1.0})
    assert [(h.chunk_id, h.score) for h in combmnz] == [("b", 3.0), ("a", 1.0), ("d", 0.5), ("c", 0.0)]


@pytest.mark.parametrize("method, norm", [("convex", "minmax"), ("convex", "zscore"), ("convex", "max"),
                                          ("combsum", "minmax"), ("combsum", "zscore"), ("combmnz", "minmax"),
                                          ("combmnz", "max")])
def test_agrees_with_ranx_fuse(method, norm):
    import ranx

    rng = random.Random(hash((method, norm)) % 1000)
    qrels, ours, run_v, run_k = {}, {}, {}, {}
    for q in range(30):
        docs = [f"c{i:03d}" for i in range(40)]
        vector = {d: rng.uniform(-0.2, 0.9) for d in rng.sample(docs, 20)}
        keyword = {d: rng.choice([0.0, rng.uniform(0, 12)]) for d in rng.sample(docs, 20)}
        run_v[f"q{q}"], run_k[f"q{q}"] = vector, keyword
        qrels[f"q{q}"] = {docs[0]: 1}
        alpha = 0.35
        weights = {"vector": alpha, "keyword": 1 - alpha} if method == "convex" else {"vector": 1.0, "keyword": 1.0}
        ours[f"q{q}"] = score_fuse(legs_of(vector, keyword), method, norm, 50, weights)
    ranx_method = {"convex": "wsum", "combsum": "sum", "combmnz": "mnz"}[method]
    params = {"weights": [0.35, 0.65]} if method == "convex" else None
    fused = ranx.fuse(runs=[ranx.Run(run_v), ranx.Run(run_k)], norm={"minmax": "min-max", "zscore": "zmuv",
                                                                    "max": "max"}[norm],
                      method=ranx_method, params=params)
    theirs = fused.to_dict()
    for q, hits in ours.items():
        assert {h.chunk_id: h.score for h in hits} == pytest.approx(theirs[q], abs=1e-9)
        expected = sorted(theirs[q], key=lambda c: (-round(theirs[q][c], 9), c))
        assert [h.chunk_id for h in hits] == expected


QUERIES = ["work_mem", "What does SQLSTATE 23505 mean?", "build an index without blocking writes", "deadlock"]


def test_the_retriever_fuses_by_score_on_real_legs_and_a_point_runs_no_sql(conn, mini_strategy, embedder):
    """alpha=1: the vector leg's order (min-max is monotonic), everything else at 0; alpha=0: the
    keyword leg's order. A fusion-only point reads the cached legs: no leg SQL."""
    from rag_experiments.retrieval.fusion import FusionParams
    from rag_experiments.retrieval.retriever import Retriever, RetrievalParams

    def hybrid(**kw):
        return Retriever(conn, mini_strategy, embedder,
                         RetrievalParams(variant="hybrid", fusion=FusionParams(depth=15, **kw)))

    warm = hybrid()
    warm.search_many(QUERIES, 30)
    for alpha, leg in ((1.0, "vector"), (0.0, "keyword")):
        r = hybrid(method="convex", alpha=alpha, norm="minmax")
        for q in QUERIES:
            fused = r.search(q, 30).hits
            own = r._legs_for([q], [leg])[(leg, q)][0]
            # min-max sends the leg's lowest score to 0, where it ties with the other leg's chunks
            above = [h.chunk_id for h in own if h.score > min(x.score for x in own)]
            assert [h.chunk_id for h in fused if h.score > 0] == above, (alpha, q)
        assert r.stats.leg_lists_computed == 0 and r.stats.leg_lists_cached > 0


def test_the_sql_engine_refuses_score_fusion():
    from rag_experiments.errors import ConfigError
    from rag_experiments.retrieval.fusion import FusionParams

    with pytest.raises(ConfigError, match="the SQL twin implements RRF only, not fusion.method=convex"):
        FusionParams(method="convex", engine="sql")
    with pytest.raises(ConfigError, match="fusion.alpha: must be within 0..1"):
        FusionParams(method="convex", alpha=1.5)
    with pytest.raises(ConfigError, match="fusion.norm: must be one of"):
        FusionParams(norm="l2")
