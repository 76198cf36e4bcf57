"""Retrievers a team might write, as ``retrieval.external.target`` values for the tests.

``oracle`` knows the mini golden set's evidence (read from the golden file named by
$RAG_EXP_TEST_GOLDEN) and returns it at a chosen rank, as offsets or as text, altered or not:
what the metrics must then be is known by hand. ``overlap`` is a small real system of its own
(paragraph chunks, term-overlap ranking). ``CALLS`` counts calls, to prove the cache.
"""

from __future__ import annotations

import os
import re

from rag_experiments.corpus.loader import load_corpus
from rag_experiments.golden.resolve import load_golden

MINI = os.path.join(os.path.dirname(__file__), "..", "fixtures", "mini_corpus")
CALLS = {"n": 0}


def _evidence(query: str):
    golden = load_golden(os.environ["RAG_EXP_TEST_GOLDEN"])
    case = next(c for c in golden.scorable if c.query == query)
    span = case.relevant[0].span
    doc = next(d for d in load_corpus(MINI, "mini") if d.doc_id == span.doc_id)
    return doc, span


def _filler(n: int) -> list[dict]:
    doc = next(d for d in load_corpus(MINI, "mini") if "tutorial" not in d.doc_id and "errcodes" in d.doc_id)
    return [{"source_uri": doc.source_uri, "start": 0, "end": 10 + i} for i in range(n)]


def oracle(query: str, k: int, rank: int = 1, mode: str = "offsets") -> list[dict]:
    CALLS["n"] += 1
    doc, span = _evidence(query)
    text = doc.text[span.start:span.end]
    if mode == "offsets":
        hit = {"source_uri": doc.source_uri, "start": span.start, "end": span.end}
    elif mode == "text":
        hit = {"doc_id": doc.doc_id, "text": text, "score": 1.0}
    elif mode == "reflowed":  # whitespace and markup changed, a breadcrumb in front
        hit = {"source_uri": doc.source_uri, "text": "Docs > Page\n" + re.sub(r"\s+", "  ", text.replace("`", ""))}
    else:
        raise ValueError(mode)
    out = _filler(rank - 1) + [hit] + _filler(k)[rank - 1:]
    return out[:k]


def overlap(query: str, k: int, min_len: int = 0) -> list[dict]:
    CALLS["n"] += 1
    q = set(re.findall(r"\w+", query.lower()))
    paras = [(d.source_uri, p) for d in load_corpus(MINI, "mini") for p in re.split(r"\n\s*\n", d.text)
             if len(p.strip()) >= max(min_len, 1)]
    ranked = sorted(range(len(paras)), key=lambda i: -len(q & set(re.findall(r"\w+", paras[i][1].lower()))))
    return [{"source_uri": paras[i][0], "text": paras[i][1]} for i in ranked[:k]]


class Searcher:
    """A class target: constructed once per process with retrieval.external.init."""

    built = 0

    def __init__(self, min_len: int = 0) -> None:
        Searcher.built += 1
        self.min_len = min_len

    def search(self, query: str, k: int) -> list[dict]:
        return overlap(query, k, self.min_len)


def twice(query: str, k: int) -> list[dict]:
    """A fusion system that returns its best chunk twice."""
    first = oracle(query, k)[0]
    return ([first, dict(first)] + _filler(k))[:k]


def elsewhere(query: str, k: int) -> list[dict]:
    """Passages from documents the corpus does not have."""
    return [{"source_uri": f"other/{i}.html", "text": "nothing here"} for i in range(k)]


def broken(query: str, k: int) -> list[dict]:
    raise RuntimeError("index shard 3 is offline")


def too_many(query: str, k: int) -> list[dict]:
    return _filler(k + 1)


def not_a_list(query: str, k: int):
    return 42


def nan_score(query: str, k: int) -> list[dict]:
    return [{**_filler(1)[0], "score": float("nan")}]


def outside(query: str, k: int) -> list[dict]:
    return [{**_filler(1)[0], "start": 0, "end": 10_000_000}]


def no_document(query: str, k: int) -> list[dict]:
    return [{"text": "shared memory"}]


def wrong_signature(query: str) -> list[dict]:
    return []


def near_miss(query: str, k: int) -> list[dict]:
    """A paragraph of another document first (a near-miss to judge), then one that cannot be
    placed, then the evidence."""
    doc = next(d for d in load_corpus(MINI, "mini") if "createindex" in d.doc_id)
    para = next(p for p in re.split(r"\n\s*\n", doc.text) if len(p) > 200)
    evidence = oracle(query, 1, mode="text")[0]
    return [{"source_uri": doc.source_uri, "text": para},
            {"source_uri": "elsewhere/x.html", "text": "not in the corpus"}, evidence][:k]


COLLECTOR_STATES: list[bool] = []


def collector_watch(query: str, k: int) -> list[dict]:
    """The oracle at rank 1, noting whether Python's cyclic collector was on during the call."""
    import gc

    COLLECTOR_STATES.append(gc.isenabled())
    return oracle(query, k)


class Toy:
    """A class target whose init changes its answers: ``good=True`` returns each case's evidence
    first, ``good=False`` only fillers (issue 49, B1: init must be part of the cache key)."""

    def __init__(self, good: bool = False) -> None:
        self.good = good

    def search(self, query: str, k: int) -> list[dict]:
        CALLS["n"] += 1
        return oracle(query, k) if self.good else _filler(k)


def elsewhere_counted(query: str, k: int) -> list[dict]:
    """``elsewhere``, counting its calls (the unplaced stop must not wait for every query)."""
    CALLS["n"] += 1
    return elsewhere(query, k)


def not_in_text(query: str, k: int) -> list[dict]:
    """Passages that name a corpus document but whose text is nowhere in it."""
    CALLS["n"] += 1
    doc = _filler(1)[0]["source_uri"]
    return [{"source_uri": doc, "text": f"zq{i} xv{i} nothing of this is in any document {i}"} for i in range(k)]


def inf_score(query: str, k: int) -> list[dict]:
    return [{**_filler(1)[0], "score": float("inf")}]


def nul_text(query: str, k: int) -> list[dict]:
    return [{"source_uri": _filler(1)[0]["source_uri"], "text": "SQLSTATE\x00 codes"}]


def surrogate_text(query: str, k: int) -> list[dict]:
    return [{"source_uri": _filler(1)[0]["source_uri"], "text": "SQLSTATE \udcff codes"}]
