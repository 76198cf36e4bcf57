"""query.rewrite merges its expansions' lists with the configured fusion.method (fusion.fuse_lists):
with rrf exactly what rrf_lists gave (float for float, leg ranks and order included), with another
method that method's formula."""

from __future__ import annotations

import random

import pytest

from rag_experiments.retrieval.fusion import FusionParams, fuse_lists, rrf_lists
from rag_experiments.retrieval.fusion_methods import leg_order
from rag_experiments.types import Hit


def _hit(cid: str, score: float = 0.0, legs: dict | None = None) -> Hit:
    return Hit(chunk_id=cid, doc_id="d", source_uri="d", doc_type="t", start=0, end=1, score=score, rank=0,
               leg_ranks=dict(legs or {}))


def _lists(rng: random.Random, n_lists: int) -> list[list[Hit]]:
    pool = [f"c{i:03d}" for i in range(60)]
    out = []
    for _ in range(n_lists):
        ids = rng.sample(pool, rng.randint(1, 40))
        out.append([_hit(c, rng.random(), {"vector": rng.randint(1, 50), "fused": r})
                    for r, c in enumerate(ids, 1)])
    return out


def test_rrf_over_the_expansions_is_rrf_lists_float_for_float():
    rng = random.Random(46)
    for trial in range(200):
        lists = _lists(rng, rng.randint(1, 11))  # up to the question + query.n=10 rewrites: q10 sums last
        params = FusionParams(rrf_k=rng.choice([1, 10, 60]), depth=rng.choice([5, 20, 50]))
        want = rrf_lists(lists, params.rrf_k, params.depth)
        got = fuse_lists(lists, params)
        assert [(h.chunk_id, h.score, h.rank) for h in got] == [(h.chunk_id, h.score, h.rank) for h in want], trial
        assert [list(h.leg_ranks.items()) for h in got] == [list(h.leg_ranks.items()) for h in want], trial


def test_another_method_merges_the_expansions_by_its_own_formula():
    lists = [[_hit("a"), _hit("b")], [_hit("b"), _hit("c")]]
    # isr: n_lists(chunk) * sum of 1 / rank^2: a = 1, b = 2 * (1/4 + 1) = 2.5, c = 1/4
    got = fuse_lists(lists, FusionParams(method="isr"))
    assert [(h.chunk_id, h.score) for h in got] == [("b", 2.5), ("a", 1.0), ("c", 0.25)]
    assert got[0].leg_ranks == {"q0": 2, "q1": 1}
    # combsum with minmax over each list (scores 3, 1 -> 1, 0; 2, 2 -> 0, 0): a = 1, b = 0 + 0, c = 0
    scored = [[_hit("a", 3.0), _hit("b", 1.0)], [_hit("b", 2.0), _hit("c", 2.0)]]
    got = fuse_lists(scored, FusionParams(method="combsum", norm="minmax"))
    assert [(h.chunk_id, h.score) for h in got] == [("a", 1.0), ("b", 0.0), ("c", 0.0)]
    # tmm: an expansion list counts from 0 (a: 3/3, b: 1/3 + 2/2, c: 2/2)
    got = fuse_lists(scored, FusionParams(method="combsum", norm="tmm"))
    assert [h.chunk_id for h in got] == ["b", "a", "c"]
    assert [h.score for h in got] == pytest.approx([4 / 3, 1.0, 1.0])


def test_numbered_legs_are_summed_in_number_order():
    assert leg_order({f"q{i}": [] for i in (10, 2, 0, 1)}) == ["q0", "q1", "q2", "q10"]
    assert leg_order({"keyword": [], "vector": [], "bm25s": []}) == ["vector", "keyword", "bm25s"]
