"""fusion.method=isr (rag_experiments/retrieval/fusion_methods/isr.py): hand-worked values, and
agreement with ranx's own ``isr`` on the same runs (scores to 1e-12, ranking with ties by chunk id)."""

from __future__ import annotations

import random

import pytest

from rag_experiments.errors import ConfigError
from rag_experiments.retrieval.fusion import FusionParams, fuse
from rag_experiments.tracking.retriever_summary import fusion_text
from rag_experiments.types import Hit


def _legs(vector: list[str], keyword: list[str]) -> dict[str, list[Hit]]:
    return {leg: [Hit(c, "d", "u", "t", 0, 1, 1.0 / i, i, {leg: i}) for i, c in enumerate(ids, 1)]
            for leg, ids in (("vector", vector), ("keyword", keyword))}


def test_isr_by_hand():
    # a: vector 1 -> 1 * 1/1 = 1 ; b: vector 2, keyword 1 -> 2 * (1/4 + 1) = 2.5 ; c: keyword 2 -> 1/4
    fused = fuse(_legs(["a", "b"], ["b", "c"]), FusionParams(method="isr"))
    assert [(h.chunk_id, h.score, h.rank) for h in fused] == [("b", 2.5, 1), ("a", 1.0, 2), ("c", 0.25, 3)]
    assert fused[0].leg_ranks == {"vector": 2, "keyword": 1}
    # weights scale each leg's term; depth cuts each leg's list
    weighted = fuse(_legs(["a", "b"], ["b", "c"]), FusionParams(method="isr", keyword_weight=0.0))
    assert [(h.chunk_id, h.score) for h in weighted] == [("a", 1.0), ("b", 0.5), ("c", 0.0)]
    assert [h.chunk_id for h in fuse(_legs(["a", "b"], ["b", "c"]), FusionParams(method="isr", depth=1))] == ["a", "b"]


def test_isr_agrees_with_ranx():
    import ranx  # a test dependency: missing means the cross-check fails, never skips

    rng = random.Random(46)
    ours, runs = {}, {"vector": {}, "keyword": {}}
    for q in range(30):
        docs = [f"c{i:03d}" for i in range(40)]
        legs = _legs(rng.sample(docs, 20), rng.sample(docs, 15))
        for leg, hits in legs.items():
            runs[leg][f"q{q}"] = {h.chunk_id: float(100 - h.rank) for h in hits}
        ours[f"q{q}"] = fuse(legs, FusionParams(method="isr", depth=50))
    theirs = ranx.fuse([ranx.Run(runs["vector"]), ranx.Run(runs["keyword"])], method="isr").to_dict()
    for q, hits in ours.items():
        assert {h.chunk_id: h.score for h in hits} == pytest.approx(theirs[q], rel=1e-12)
        assert [h.chunk_id for h in hits] == sorted(theirs[q], key=lambda c: (-round(theirs[q][c], 12), c))


def test_isr_is_registered_named_and_python_only():
    assert fusion_text({"fusion": {"method": "isr", "vector_weight": 2.0}}) == "isr weights=2/1"
    with pytest.raises(ConfigError, match="fusion.engine=sql"):
        FusionParams(method="isr", engine="sql")
