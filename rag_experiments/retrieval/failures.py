"""Search a whole golden set when a few queries cannot be searched, without lying about it.

One query can fail for reasons of its own: too large (see :mod:`rag_experiments.limits`), a
tsquery PostgreSQL finds too complex (``StatementTooComplex``), a character it cannot store,
one malformed API answer. Such a query is *failed*: it gets no ranked list, so evaluation
excludes its case and the run reports the count (MLflow metric ``retrieval.failed_queries``,
``retrieval_failures.json``, a stderr summary). It is never scored as a miss (a zero would be
a silently wrong number).

Some failures are not about one query and end the run with one line instead: the database
connection lost (server killed), the Anthropic API unreachable or refusing the key, and too
many failed queries (:data:`MAX_FAILED_SHARE`; all of them, always): past that, the metric
describes a different set of cases than the one asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import psycopg

from .. import llm
from ..errors import DatabaseError, UserError
from ..limits import query_problem
from ..types import RankedList

MAX_FAILED_SHARE = 0.1  # more failed queries than this (and more than one) fail the run


@dataclass
class SearchOutcome:
    """Ranked lists in query order (None where the query failed) and why each failed."""

    ranked: list[RankedList | None] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)  # query index -> one-line reason


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def fatal_error(exc: BaseException, conn: psycopg.Connection | None) -> UserError | None:
    """A one-line error if ``exc`` will recur for every query, else None (a per-query failure)."""
    if isinstance(exc, UserError):
        return exc
    if isinstance(exc, psycopg.Error):
        if conn is None or conn.broken or conn.closed:
            return DatabaseError(f"the database connection was lost during retrieval ({_first_line(exc)})",
                                 hint="is the server still running? `rag-exp db status`; then rerun")
        return None

    # either provider's SDK (anthropic, openai): fatal ones (bad key, unknown model, server
    # unreachable) end the run in one line, the others belong to the query that raised them
    if llm.is_api_error(exc):
        return llm.fatal_api_error(exc)
    return None


def is_query_failure(exc: BaseException) -> bool:
    """Errors that belong to one query: database errors on a live connection, API errors."""
    if isinstance(exc, psycopg.Error):
        return True

    return llm.is_api_error(exc)


def search_degrading(search: Callable[[Sequence[str]], list[RankedList]], queries: Sequence[str],
                     conn: psycopg.Connection | None, batch: int = 50) -> SearchOutcome:
    """``search`` over ``queries`` in batches; a failing batch is retried query by query so
    that only the failing queries are lost. Fatal errors (see :func:`fatal_error`) propagate as
    one-line :class:`UserError`; programming errors propagate unchanged."""
    out = SearchOutcome(ranked=[None] * len(queries))
    for i, q in enumerate(queries):
        problem = query_problem(q)  # refused before any SQL: it could only fail slowly or crash
        if problem:
            out.failed[i] = f"the query {problem}"
    todo = [i for i in range(len(queries)) if i not in out.failed]

    def attempt(idx: list[int]) -> None:
        try:
            found = search([queries[i] for i in idx])
        except Exception as exc:  # noqa: BLE001 - sorted into fatal / per query / bug below
            fatal = fatal_error(exc, conn)
            if fatal is not None:
                raise fatal from exc
            if not is_query_failure(exc):
                raise
            if len(idx) == 1:
                out.failed[idx[0]] = _first_line(exc)
                return
            for i in idx:
                attempt([i])
            return
        for i, r in zip(idx, found):
            out.ranked[i] = r

    for lo in range(0, len(todo), batch):
        attempt(todo[lo : lo + batch])
        check_failed_share(out.failed, len(queries), done=False)
    check_failed_share(out.failed, len(queries), done=True)
    return out


def check_failed_share(failed: dict[int, str], total: int, done: bool) -> None:
    """Stop with one line once the failed queries are too many for the metrics to mean much."""
    if not failed:
        return
    limit = max(1, int(MAX_FAILED_SHARE * total))
    if len(failed) > limit or (done and len(failed) == total):
        first = min(failed)
        raise UserError(f"{len(failed)} of {total} queries could not be searched (at most {limit} may fail); "
                        f"the first, query #{first + 1}: {failed[first]}",
                        hint="retire a bad case with `rag-exp golden retire CASE_ID --reason ...`")
