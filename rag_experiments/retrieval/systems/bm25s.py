"""``retrieval=bm25s``: a second keyword engine over the same chunks, the `bm25s` library's BM25.

The ``keyword`` variant ranks by BM25 inside PostgreSQL (the english text-search parser: stemmed
lexemes, identifiers split at ``_``, plus exact-identifier matching). This one indexes the same
chunks of the same strategy (their ``indexed_text``, breadcrumbs included) in memory with `bm25s`
(Lucene's BM25, ``retrieval.keyword.k1`` / ``b``, float64) and its own tokenizer: lower-cased
words of two or more word characters (``work_mem`` stays whole), English stop words removed when
``corpus.language`` is english, no stemming. Queries are tokenized the same way; a chunk that
shares no term with the query is not returned; ties rank by chunk id, as everywhere.

The index is built once per process for a (strategy, content digest, filters, k1, b, language)
and kept (the last few); building it for the demo's chunks takes well under a second.
``bm25s`` is a test dependency (``pip install bm25s`` elsewhere): without it the run stops with
one line saying so.
"""

from __future__ import annotations

import importlib
import logging
import time
from typing import Any, Callable, Sequence

import numpy as np

from ...cache_key import cache_key
from ...errors import ConfigError
from ...types import Hit, RankedList
from ..legs import KeywordParams
from ..protocol import ChunkTexts
from . import BuildInputs, Getter, SystemType

LEG = "bm25s"  # the leg_ranks key of its hits
_INDEXES: dict[str, "_Index"] = {}
_MAX_INDEXES = 4


def _library() -> Any:
    try:
        lib = importlib.import_module("bm25s")
        logging.getLogger("bm25s").setLevel(logging.WARNING)  # its "Building index" DEBUG line in every run's log
        return lib
    except ImportError:
        raise ConfigError("retrieval=bm25s: the bm25s package is not installed",
                          hint="pip install bm25s (it is in the [test] extra), or use retrieval=keyword") from None


class _Index:
    """The chunks' rows and their bm25s index (documents in chunk id order)."""

    def __init__(self, rows: list[tuple], language: str, k1: float, b: float) -> None:
        lib = _library()
        self.rows = rows  # (chunk_id, doc_id, source_uri, doc_type, start, end, indexed_text)
        self.stopwords = "en" if language == "english" else None
        self.model = lib.BM25(method="lucene", k1=k1, b=b, dtype="float64")
        self.model.index(self.tokenize([r[6] for r in rows]), show_progress=False)
        self.vocab = self.model.vocab_dict

    def tokenize(self, texts: list[str]) -> list[list[str]]:
        return _library().tokenize(texts, stopwords=self.stopwords, return_ids=False, show_progress=False)

    def search(self, query: str, depth: int) -> list[Hit]:
        terms = [t for t in self.tokenize([query])[0] if t in self.vocab]  # a term in no chunk scores nothing
        if not terms or not self.rows:
            return []
        scores = self.model.get_scores(terms)
        # best first, ties by position = chunk id (rows are in chunk id order); only chunks sharing a term
        order = np.argsort(-scores, kind="stable")[:depth]
        hits = []
        for i in order:
            if scores[i] <= 0:
                break
            r = self.rows[i]
            rank = len(hits) + 1
            hits.append(Hit(r[0], r[1], r[2], r[3], r[4], r[5], float(scores[i]), rank, {LEG: rank}))
        return hits


class Bm25sSearch:
    """The :class:`~rag_experiments.retrieval.protocol.SearchSystem` of ``retrieval=bm25s``."""

    variant = "bm25s"

    def __init__(self, conn: Any, strategy: Any, params: KeywordParams, filters: Any, language: str,
                 depth: int) -> None:
        self.conn = conn
        self.strategy = strategy
        self.depth = depth
        key = cache_key("bm25s-index", sid=strategy.strategy_id, digest=strategy.content_digest,
                        filters=filters.key(), k1=params.k1, b=params.b, language=language)
        index = _INDEXES.get(key)
        if index is None:
            where, bind = filters.where()
            from psycopg import sql

            stmt = sql.SQL("SELECT chunk_id, doc_id, source_uri, doc_type, start_char, end_char, indexed_text"
                           " FROM chunks WHERE strategy_id = %(sid)s{} ORDER BY chunk_id").format(where)
            rows = conn.execute(stmt, {**bind, "sid": strategy.strategy_id}).fetchall()
            index = _Index(rows, language, params.k1, params.b)
            if len(_INDEXES) >= _MAX_INDEXES:
                _INDEXES.clear()
            _INDEXES[key] = index
        self.index = index

    def search_many(self, queries: Sequence[str], limit: int = 20,
                    on_query: Callable[[int], object] | None = None) -> list[RankedList]:
        out = []
        for q in queries:
            t0 = time.perf_counter()
            hits = self.index.search(q, min(limit, self.depth) if limit else self.depth)
            out.append(RankedList(q, tuple(hits), (time.perf_counter() - t0) * 1000))
            if on_query is not None:
                on_query(1)
        return out

    def search(self, query: str, limit: int = 20) -> RankedList:
        return self.search_many([query], limit)[0]

    def capability(self, kind: type) -> object | None:
        return self if kind is ChunkTexts else None

    def chunk_texts(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        rows = self.conn.execute("SELECT chunk_id, text FROM chunks WHERE strategy_id = %s AND chunk_id = ANY(%s)",
                                 (self.strategy.strategy_id, list(set(chunk_ids)))).fetchall()
        return dict(rows)


def _build(inputs: BuildInputs) -> Bm25sSearch:
    s = inputs.settings
    _library()  # a missing package: one line before any search
    return Bm25sSearch(inputs.conn, inputs.strategy, s.retrieval.keyword, s.retrieval.filters, s.corpus.language,
                       s.fusion.depth)


def _describe(get: Getter, chunking: str, embedding: str) -> str:
    return f"bm25s k1={get('retrieval.keyword.k1', '?')} b={get('retrieval.keyword.b', '?')}, {chunking}"


SYSTEM = SystemType(
    name="bm25s", kind="index", params=KeywordParams, build=_build, describe=_describe,
    summary="BM25 of the bm25s library over the same chunks, in memory, its own tokenizer (retrieval.keyword.k1, b)",
    sentence=lambda get: "`bm25s`: keyword search (BM25 of the bm25s library, in memory, over the same chunks)",
    filters=True, position=20,
)
