"""RM3 pseudo-relevance feedback for the BM25 keyword leg, as Anserini defines it
(``Rm3Reranker``; Abdul-Jaleel et al. 2004, "UMass at TREC 2004"; Lavrenko & Croft 2001).

1. **First pass.** The BM25 leg's own top ``fb_docs`` chunks for the query, with their scores.
2. **Relevance model (RM1).** Each feedback chunk is a vector of its lexemes: the same lexemes the
   BM25 leg scores (``to_tsvector(<corpus.language>, ...)`` of the chunk's indexed text). tf is the number
   of positions, as in ``bm25_postings``. Like Anserini, a lexeme is kept only if it has 2 to 20
   characters of ``[a-z0-9]`` (any letter or digit when the strategy's language is not english:
   ``größ``, ``données``) and occurs in at most 10% of the strategy's chunks (df / N <= 0.1).
   ``RM1(t) = sum_d score(d) * tf(t, d) / |d|`` over the feedback chunks, where ``|d|`` is the L1
   norm of the kept lexemes. The ``fb_terms`` heaviest terms are kept (ties: the lexeme, ascending)
   and scaled to unit L1 norm.
3. **RM3.** The query's own lexemes, with their counts, scaled to unit L1 norm, interpolated:
   ``w(t) = original_query_weight * P(t | q) + (1 - original_query_weight) * RM1(t)``.
4. **Second pass.** BM25 with ``w(t)`` in place of each lexeme's query count ``qtf(t)``. The
   exact-identifier boost and the tsquery mode stay those of the original query.

Defaults 10 / 10 / 0.5 are Anserini's (``-rm3 -rm3.fbDocs 10 -rm3.fbTerms 10
-rm3.originalQueryWeight 0.5``). The expansion is a pure function (:func:`rm3_weights`); the SQL
around it only reads the feedback chunks' lexemes and the df of each one.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

TERM = re.compile(r"^[a-z0-9]{2,20}$")
UNICODE_TERM = re.compile(r"^[^\W_]{2,20}$")  # other languages: letters with diacritics, other scripts
MAX_DF_RATIO = 0.1


def _l1(vec: Mapping[str, float]) -> dict[str, float]:
    total = sum(vec.values())
    return {t: w / total for t, w in vec.items()} if total > 0 else dict(vec)


def rm3_weights(query_terms: Mapping[str, float], feedback: Sequence[tuple[float, Mapping[str, int]]],
                df: Mapping[str, int], n_chunks: int, fb_terms: int = 10,
                original_query_weight: float = 0.5, language: str = "english") -> dict[str, float]:
    """The expanded query, lexeme -> weight. ``query_terms``: the query's lexemes and counts;
    ``feedback``: (first-pass score, {lexeme: tf}) of each feedback chunk; ``df``/``n_chunks``:
    the strategy's document frequencies and chunk count (the 10% filter); ``language``: the
    strategy's corpus.language (which characters a kept term may have)."""
    term = TERM if language == "english" else UNICODE_TERM

    def allowed(t: str) -> bool:
        return bool(term.match(t)) and (n_chunks <= 0 or df.get(t, 0) / n_chunks <= MAX_DF_RATIO)

    rm: dict[str, float] = {}
    for score, vec in feedback:
        kept = {t: tf for t, tf in vec.items() if allowed(t)}
        norm = sum(kept.values())
        if norm <= 0:
            continue
        for t, tf in kept.items():
            rm[t] = rm.get(t, 0.0) + score * tf / norm
    top = sorted(rm.items(), key=lambda kv: (-kv[1], kv[0]))[:fb_terms]
    rm = _l1(dict(top))
    q = _l1({t: float(c) for t, c in query_terms.items()})
    lam = original_query_weight
    return {t: lam * q.get(t, 0.0) + (1 - lam) * rm.get(t, 0.0) for t in sorted(set(q) | set(rm))}


def feedback_vectors(conn, strategy_id: str, chunk_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """chunk id -> {lexeme: tf} from the chunks' tsvector (the lexemes BM25 scores)."""
    rows = conn.execute(
        "SELECT c.chunk_id, u.lexeme, coalesce(cardinality(u.positions), 1) FROM chunks c, unnest(c.tsv) u"
        " WHERE c.strategy_id = %s AND c.chunk_id = ANY(%s)", (strategy_id, list(chunk_ids))).fetchall()
    out: dict[str, dict[str, int]] = {}
    for cid, lexeme, tf in rows:
        out.setdefault(cid, {})[lexeme] = int(tf)
    return out


def query_lexemes(conn, query: str, strategy_id: str) -> dict[str, int]:
    """The query's lexemes and counts under the strategy's text search configuration."""
    rows = conn.execute("SELECT lexeme, coalesce(cardinality(positions), 1) FROM unnest(to_tsvector("
                        "(SELECT language FROM strategies WHERE strategy_id = %s), %s))",
                        (strategy_id, query)).fetchall()
    return {lex: int(n) for lex, n in rows}


def document_frequencies(conn, strategy_id: str, lexemes: Sequence[str]) -> tuple[dict[str, int], int]:
    df = dict(conn.execute("SELECT lexeme, df FROM bm25_df WHERE strategy_id = %s AND lexeme = ANY(%s)",
                           (strategy_id, list(lexemes))).fetchall())
    row = conn.execute("SELECT n_chunks FROM bm25_stats WHERE strategy_id = %s", (strategy_id,)).fetchone()
    return {k: int(v) for k, v in df.items()}, int(row[0]) if row else 0
