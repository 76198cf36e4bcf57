"""retrieval=bm25s (rag_experiments/retrieval/systems/bm25s.py): a second keyword engine over the same
chunks, added as one registered system. Its lists are checked against Lucene's BM25 computed here
by hand from the chunks' text (design notes: idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
tf / (tf + k1 (1 - b + b dl / avgdl))), its filters, its missing-package line, and a run."""

from __future__ import annotations

import math
import re
import sys
from collections import Counter

import pytest

from rag_experiments.config import RetrievalConfig, Settings
from rag_experiments.errors import ConfigError
from rag_experiments.retrieval.filters import Filters
from rag_experiments.retrieval.legs import KeywordParams
from rag_experiments.retrieval.protocol import AnnIndex, ChunkTexts, capability
from rag_experiments.retrieval.systems import BuildInputs, build_system


def _settings(**retrieval) -> Settings:
    return Settings(retrieval=RetrievalConfig(variant="bm25s", **retrieval))


def _tokens(text: str) -> list[str]:
    from bm25s.stopwords import STOPWORDS_EN  # the word list only; the tokenizing is done here

    return [t for t in re.findall(r"(?u)\b\w\w+\b", text.lower()) if t not in set(STOPWORDS_EN)]


def _lucene(conn, sid: str, query: str, k1: float, b: float, depth: int) -> list[tuple[str, float]]:
    rows = conn.execute("SELECT chunk_id, indexed_text FROM chunks WHERE strategy_id = %s", (sid,)).fetchall()
    docs = {cid: Counter(_tokens(text)) for cid, text in rows}
    n = len(docs)
    avgdl = sum(sum(c.values()) for c in docs.values()) / n
    df = Counter(t for c in docs.values() for t in c)
    scores = {}
    for cid, tf in docs.items():
        dl = sum(tf.values())
        s = sum(math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * tf[t] / (tf[t] + k1 * (1 - b + b * dl / avgdl))
                for t in _tokens(query) if tf[t])
        if s > 0:
            scores[cid] = s
    return sorted(scores.items(), key=lambda kv: (-round(kv[1], 9), kv[0]))[:depth]


def test_bm25s_ranks_the_chunks_as_lucene_bm25_does(conn, mini_strategy):
    from mini_golden_spec import MINI_CASES

    settings = _settings(keyword=KeywordParams(k1=1.2, b=0.75))
    system = build_system(BuildInputs(settings, conn, strategy=mini_strategy))
    assert system.variant == "bm25s"
    for _, _, query, _, _ in MINI_CASES:
        got = system.search(query, 20).hits
        want = _lucene(conn, mini_strategy.strategy_id, query, 1.2, 0.75, settings.fusion.depth)[:20]
        assert [h.chunk_id for h in got] == [cid for cid, _ in want], query
        assert [h.score for h in got] == pytest.approx([s for _, s in want], rel=1e-9)
        assert [h.rank for h in got] == list(range(1, len(got) + 1)) and all(h.leg_ranks == {"bm25s": h.rank}
                                                                             for h in got)
    texts = capability(system, ChunkTexts).chunk_texts([got[0].chunk_id])
    span = conn.execute("SELECT text FROM chunks WHERE strategy_id = %s AND chunk_id = %s",
                        (mini_strategy.strategy_id, got[0].chunk_id)).fetchone()[0]
    assert texts == {got[0].chunk_id: span}
    assert capability(system, AnnIndex) is None  # no index of approximate search to measure


def test_bm25s_applies_the_filters(conn, mini_strategy):
    doc_type = conn.execute("SELECT min(doc_type) FROM chunks WHERE strategy_id = %s",
                            (mini_strategy.strategy_id,)).fetchone()[0]
    settings = _settings(filters=Filters(doc_types=(doc_type,)))
    system = build_system(BuildInputs(settings, conn, strategy=mini_strategy))
    hits = system.search("memory used by a sort and a query operation", 20).hits
    assert hits and {h.doc_type for h in hits} == {doc_type}


def test_without_the_bm25s_package_the_run_stops_with_one_line(conn, mini_strategy, monkeypatch):
    monkeypatch.setitem(sys.modules, "bm25s", None)  # import bm25s raises ImportError
    with pytest.raises(ConfigError) as exc:
        build_system(BuildInputs(_settings(), conn, strategy=mini_strategy))
    assert exc.value.message == "retrieval=bm25s: the bm25s package is not installed"


def test_a_bm25s_run_is_scored_like_any_variant(project, mini_golden):
    from rag_experiments.config import settings_from_cfg
    from rag_experiments.experiment import run_experiment

    from ..test_config import _compose
    from ..test_pipeline import _mini_overrides

    result = run_experiment(settings_from_cfg(_compose(_mini_overrides(mini_golden, "retrieval=bm25s"))))
    assert result.settings.retrieval.variant == "bm25s" and result.eval.metrics["n_cases"] == 10
    assert 0 < result.eval.metrics["recall_at_20"] <= 1
    assert "ann_recall_at_depth" not in result.eval.metrics and result.cache == {}
    assert all(h.leg_ranks.keys() == {"bm25s"} for r in result.results.values() for h in r.hits)
