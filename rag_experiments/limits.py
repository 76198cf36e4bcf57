"""Limits on text that enters the tool: checked where it comes in, with one clear line.

A query is a user's question, not a document: PostgreSQL's full-text search turns every word
into a tsquery node, and past a few thousand nodes ``replace(plainto_tsquery(...))::tsquery``
fails with ``stack depth limit exceeded`` (measured: 11,000 ``work_mem`` in a 100 KB query;
500 words, even all split identifiers, run in well under a second). So a query is capped in
characters and in words (runs of letters/digits: an upper bound on the lexemes the default
parser makes, since it also splits at ``_``). The longest query of the demo set has 136
characters and 25 words: the caps leave ample room for long benchmark queries.

PostgreSQL ``text`` cannot hold a NUL character (``psycopg.DataError``), so no text we store
(documents, queries, quotes) may contain one.
"""

from __future__ import annotations

import re

from .errors import UserError

MAX_QUERY_CHARS = 4000
MAX_QUERY_WORDS = 500
_WORD = re.compile(r"[^\W_]+")
_SURROGATE = re.compile("[\ud800-\udfff]")


class InputLimitError(UserError):
    """A text that PostgreSQL cannot store, or a query too large to search."""


def query_problem(query: str) -> str | None:
    """Why ``query`` cannot be searched, or None. Every entry point applies it (``rag-exp search``,
    ``triage``, ``golden add``, a run's golden cases, the served model, the Python API)."""
    if "\x00" in query:
        return f"contains a NUL character (at {query.index(chr(0))}); PostgreSQL text cannot hold it"
    problem = surrogate_problem(query)
    if problem:
        return f"{problem}; give the query as UTF-8 text"
    if len(query) > MAX_QUERY_CHARS:
        return f"has {len(query):,} characters; the limit is {MAX_QUERY_CHARS:,}"
    words = len(_WORD.findall(query))
    if words > MAX_QUERY_WORDS:
        return f"has {words:,} words; the limit is {MAX_QUERY_WORDS:,} (each becomes a full-text search term)"
    return None


def surrogate_problem(text: str) -> str | None:
    """Why ``text`` is not text (a lone surrogate, which UTF-8 cannot encode: a hash, PostgreSQL,
    a log line or MLflow would fail on it), or None. An invalid UTF-8 byte on a command line
    arrives as one (Python decodes argv with ``surrogateescape``); so does a JSON ``\\udcff``."""
    bad = _SURROGATE.search(text)
    if bad is None:
        return None
    cp, at = ord(bad.group()), bad.start()
    # surrogateescape maps the bytes 0x80..0xff to U+DC80..U+DCFF: name the byte it was
    byte = f" (the byte 0x{cp - 0xDC00:02x}, not UTF-8, read from a command line or file?)" if cp >= 0xDC80 else ""
    return f"holds U+{cp:04X} at char {at}, a lone surrogate, not a character{byte}"


def check_query(query: str, where: str) -> str:
    """``query`` unchanged, or an :class:`InputLimitError` naming ``where`` (file:line, option)."""
    problem = query_problem(query)
    if problem:
        hint = ("set a UTF-8 locale (e.g. LANG=C.UTF-8) or convert the text, e.g. iconv -f latin1 -t utf-8"
                if surrogate_problem(query) else "a query is a question; put long passages in the corpus instead")
        raise InputLimitError(f"{where}: the query {problem}", hint=hint)
    return query


def check_text(text: str, where: str) -> str:
    """``text`` unchanged, or an :class:`InputLimitError` if it holds a NUL character."""
    pos = text.find("\x00")
    if pos >= 0:
        line = text.count("\n", 0, pos) + 1
        raise InputLimitError(f"{where}:{line}: contains a NUL character (byte 0) at char {pos}; "
                              "PostgreSQL text cannot hold it",
                              hint="remove it, e.g. tr -d '\\000' < FILE > FILE.clean")
    return text
