from __future__ import annotations

from dataclasses import replace

import pytest

from rag_experiments.errors import ConfigError
from rag_experiments.retrieval.fusion import FusionParams, fuse, rrf
from rag_experiments.retrieval.legs import KeywordParams
from rag_experiments.retrieval.retriever import Retriever, RetrievalParams
from rag_experiments.types import Hit


def _h(cid: str) -> Hit:
    return Hit(cid, "d", "u", "t", 0, 1, 0.0, 0)


def test_rrf_hand_worked_with_ties():
    # vector: a, b, c ; keyword: c, d ; k = 1, unit weights
    # a: 1/2 = .5 ; b: 1/3 ; c: 1/4 + 1/2 = .75 ; d: 1/3  -> b and d tie: chunk id breaks it
    fused = rrf({"vector": [_h("a"), _h("b"), _h("c")], "keyword": [_h("c"), _h("d")]}, FusionParams(rrf_k=1, depth=10))
    assert [(f.chunk_id, round(f.score, 6)) for f in fused] == [
        ("c", 0.75), ("a", 0.5), ("b", 0.333333), ("d", 0.333333)]
    assert fused[0].leg_ranks == {"vector": 3, "keyword": 1}


def test_rrf_weights_and_depth():
    legs = {"vector": [_h("a"), _h("b")], "keyword": [_h("b"), _h("a")]}
    fused = rrf(legs, FusionParams(rrf_k=60, vector_weight=2.0, keyword_weight=1.0, depth=10))
    assert fused[0].chunk_id == "a"  # vector leg weighs double
    shallow = rrf({"vector": [_h("a"), _h("b"), _h("c")]}, FusionParams(depth=2))
    assert [f.chunk_id for f in shallow] == ["a", "b"]


def test_rrf_agrees_with_ranx():
    import ranx  # a test dependency: missing means the cross-check fails, never skips
    legs = {"vector": [_h(c) for c in "abcdef"], "keyword": [_h(c) for c in "fbzay"]}
    ours = rrf(legs, FusionParams(rrf_k=60, depth=10))
    runs = [ranx.Run({"q": {h.chunk_id: float(len(hs) - i) for i, h in enumerate(hs)}}, name=n)
            for n, hs in legs.items()]
    theirs = ranx.fuse(runs, method="rrf", params={"k": 60})
    theirs_scores = theirs.to_dict()["q"]
    for f in ours:
        assert f.score == pytest.approx(theirs_scores[f.chunk_id], rel=1e-12)


@pytest.mark.parametrize("kwargs, key", [({"rrf_k": 0}, "fusion.rrf_k"), ({"vector_weight": -1}, "fusion.vector_weight"),
                                         ({"depth": 0}, "fusion.depth")])
def test_bad_fusion_values(kwargs, key):
    with pytest.raises(ConfigError, match=key):
        FusionParams(**kwargs)


QUERIES = ["work_mem", "What does SQLSTATE 23505 mean?", "build an index without blocking writes",
           "memory", "jsonb_path_query", "create a database", "ranking functions", "deadlock", "temporary files",
           "index"]


@pytest.mark.parametrize("weights", [(1.0, 1.0), (2.0, 0.5), (1.0, 0.0)])
def test_sql_and_python_rrf_return_the_same_ranking(conn, mini_strategy, embedder, weights):
    """Same data, same parameters: identical chunk order and bit-identical scores, ties included."""
    fusion = FusionParams(rrf_k=3, vector_weight=weights[0], keyword_weight=weights[1], depth=15)
    py = Retriever(conn, mini_strategy, embedder, RetrievalParams(variant="hybrid", fusion=fusion, use_cache=False))
    sq = Retriever(conn, mini_strategy, embedder, RetrievalParams(variant="hybrid", fusion=replace(fusion, engine="sql")))
    n_ties = 0
    for q in QUERIES:
        a = py.search(q, 30).hits
        b = sq.search(q, 30).hits
        assert [(h.chunk_id, h.score) for h in a] == [(h.chunk_id, h.score) for h in b], q
        assert [h.leg_ranks for h in a] == [h.leg_ranks for h in b]
        n_ties += sum(1 for x, y in zip(a, a[1:]) if x.score == y.score)
    if weights[0] == weights[1]:
        assert n_ties > 0  # the comparison covered tied scores


def test_fusion_only_change_runs_no_sql(conn, mini_strategy, embedder):
    base = Retriever(conn, mini_strategy, embedder, RetrievalParams(variant="hybrid"))
    base.search_many(QUERIES, 20)
    point = Retriever(conn, mini_strategy, embedder,
                      RetrievalParams(variant="hybrid", fusion=FusionParams(rrf_k=10, keyword_weight=0.5)))
    point.search_many(QUERIES, 20)
    assert point.stats.leg_lists_computed == 0 and point.stats.leg_lists_cached == 2 * len(QUERIES)
    assert point.stats.query_embeddings_computed == 0


def test_cache_keys_change_with_depth_filters_and_leg_params(conn, mini_strategy, embedder):
    from rag_experiments.retrieval.filters import Filters

    Retriever(conn, mini_strategy, embedder, RetrievalParams(variant="keyword")).search_many(QUERIES[:3])
    for params in (RetrievalParams(variant="keyword", fusion=FusionParams(depth=21)),
                   RetrievalParams(variant="keyword", filters=Filters(doc_types=("config",))),
                   RetrievalParams(variant="keyword", keyword=KeywordParams(rank="ts_rank_cd"))):
        r = Retriever(conn, mini_strategy, embedder, params)
        r.search_many(QUERIES[:3])
        assert r.stats.leg_lists_computed == 3 and r.stats.leg_lists_cached == 0


def test_the_registry_is_the_one_list_of_methods():
    """Validation, dispatch and the run-name text read rag_experiments/retrieval/fusion_methods/."""
    from rag_experiments.retrieval.fusion_methods import registry
    from rag_experiments.tracking.retriever_summary import fusion_text

    methods = registry()
    assert list(methods)[:4] == ["rrf", "convex", "combsum", "combmnz"] and "isr" in methods
    with pytest.raises(ConfigError, match="fusion.method: must be one of " + ", ".join(methods)):
        FusionParams(method="nope")
    legs = {"vector": [Hit("a", "d", "u", "t", 0, 1, 0.9, 1), Hit("b", "d", "u", "t", 0, 1, 0.8, 2),
                       Hit("d", "d", "u", "t", 0, 1, 0.1, 3)],
            "keyword": [Hit("b", "d", "u", "t", 0, 1, 5.0, 1), Hit("c", "d", "u", "t", 0, 1, 1.0, 2)]}
    for name, m in methods.items():
        p = FusionParams(method=name)
        assert fuse(legs, p)[0].chunk_id == "b", name  # in both legs: first by every method
        assert fusion_text({"fusion": {"method": name, "rrf_k": 60, "alpha": 0.5, "norm": "minmax"}}).startswith(
            "rrf_k=60" if name == "rrf" else name)
        assert m.summary and (m.sql == (name == "rrf"))
