"""Exact identifiers that PostgreSQL's text-search parser breaks.

The default parser splits ``work_mem`` into ``work`` + ``mem`` and ``ts_rank_cd`` into
``ts`` + ``rank`` + ``cd`` in every configuration, and ``english`` stems what is left, so a
question that names an identifier matches every chunk that mentions "work" or "memory".
We extract identifiers ourselves, store them whole (lower-cased) in ``chunks.identifiers``
and let the keyword leg match them as whole tokens. The same function runs on chunks at
ingest and on queries at search time, so both sides agree by construction.

Recognised shapes (each a regex below):
* snake_case and dotted names: ``work_mem``, ``jsonb_path_query``,
  ``pg_stat_statements.track_utility``, ``default_statistics_target``
* SQLSTATE-like codes: five characters starting with a digit: ``23505``, ``40P01``, ``0A000``
* config/file names with an extension: ``pg_hba.conf``, ``postgresql.conf``
* command-line options: ``--jobs``, ``--no-owner``

:func:`extract_identifiers` gives those keys (lower-cased: the index column and the keyword
leg's query side, which compare them as they are). :func:`find_identifiers` gives the
identifiers *as written*, and two shapes more, for what a person reads or writes by hand
(``golden add --kind exact`` records the identifier its question names): names in capitals such
as ``HISTSIZE``, ``REPORTTIME``, ``PATH``, ``ORIG_HEAD`` or ``SQLSTATE`` (4 characters or more,
so ``SQL`` or ``WAL`` are acronyms, not names), and dotted settings with a camelCase part such as
``push.autoSetupRemote``. Those two shapes are not index keys: the demo's questions name SQL
keywords and acronyms in capitals (``SELECT FOR UPDATE``, ``JSON``, ``SSL``, 40-odd of them), and
boosting the chunks that share them would change the keyword leg's rankings (and every stored
strategy's ``chunks.identifiers``) for what is a word, not a name, in those questions.

The shapes are ASCII for ``english`` (the default; what every strategy before ``corpus.language``
was built with, so their identifiers stay as they were). For any other language a letter is
any Unicode letter, so ``größe_max`` or ``fichier_données.conf`` are identifiers too. Ingest and
queries pass the strategy's language, so both sides still agree.
"""

from __future__ import annotations

import re

_PATTERNS = [
    r"(?<![\w.-])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?:\.[A-Za-z_][A-Za-z0-9_]*)*",
    r"(?<![\w.])[0-9][0-9A-Z]{4}(?![\w])",
    r"(?<![\w.-])[A-Za-z][\w-]*\.(?:conf|sql|json|control)(?!\w)",
    r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*",
]
_IDENT_RE = re.compile("|".join(f"(?:{p})" for p in _PATTERNS))
# The same shapes with Unicode letters (``[^\W\d_]``) and digits (``\d``) in place of ASCII ones.
_UNICODE_PATTERNS = [
    r"(?<![\w.-])[^\W\d_][^\W_]*(?:_[^\W_]+)+(?:\.[^\W\d][\w]*)*",
    r"(?<![\w.])[0-9][0-9A-Z]{4}(?![\w])",
    r"(?<![\w.-])[^\W\d_][\w-]*\.(?:conf|sql|json|control)(?!\w)",
    r"(?<![\w-])--[^\W\d_A-Z][^\W_A-Z]*(?:-[^\W_A-Z]+)*",
]
_UNICODE_IDENT_RE = re.compile("|".join(f"(?:{p})" for p in _UNICODE_PATTERNS))


def extract_identifiers(text: str, language: str = "english") -> list[str]:
    """Distinct identifiers in ``text``, lower-cased, in order of first appearance (``language``:
    the strategy's text search configuration; ASCII shapes for ``english``, Unicode otherwise)."""
    pattern = _IDENT_RE if language == "english" else _UNICODE_IDENT_RE
    seen: dict[str, None] = {}
    for match in pattern.finditer(text):
        token = match.group(0).rstrip(".").lower()
        if token and token not in seen:
            seen[token] = None
    return list(seen)


# names in capitals (environment variables, shell parameters, git refs, SQL keywords) and dotted
# settings with a camelCase part (git's push.autoSetupRemote): shapes a person names, not index keys.
# Letters of any script (GRÖSSE_MAX, größe.maxWert): Python's re has no upper/lower-case classes, so
# the candidates are matched by shape and their case checked in _is_caps / _is_camel_dotted (on
# ASCII text exactly the old [A-Z] / [a-z] patterns' matches).
_CAPS = r"(?<![\w.-])[^\W\d_][^\W_]*(?:_[^\W_]+)*(?![\w-])"
_CAMEL_DOTTED = r"(?<![\w.-])[^\W\d_][^\W_]*(?:\.[^\W\d_][^\W_]*)+(?![\w-])"
_CAPS_RE, _CAMEL_DOTTED_RE = re.compile(_CAPS), re.compile(_CAMEL_DOTTED)
MIN_CAPS = 4  # a name in capitals has at least this many characters (SQL, WAL, XML are acronyms)


def _is_caps(token: str) -> bool:
    return "." not in token and token[0].isupper() and token.isupper() and len(token) >= MIN_CAPS


def _is_camel_dotted(token: str) -> bool:
    *head, last = token.split(".")
    return (bool(head) and all(p[0].islower() and p == p.lower() for p in head) and last[0].islower()
            and any(c.isupper() for c in last[1:]))


def find_identifiers(text: str, language: str = "english") -> list[str]:
    """The identifiers of ``text`` as written (case kept), distinct ignoring case, in order of
    first appearance: the shapes of :func:`extract_identifiers` first, then names in capitals of
    :data:`MIN_CAPS` characters or more (``HISTSIZE``) and dotted camelCase settings
    (``push.autoSetupRemote``). For a person's question (``golden add --kind exact``), never for
    the index (see the module docstring)."""
    # a question in any language may name a non-ASCII identifier (größe_max); the Unicode shapes
    # find exactly the ASCII ones' matches on ASCII text (tests/test_identifiers_as_written.py)
    del language  # kept for callers; the index's shapes (extract_identifiers) depend on it, these do not
    seen: dict[str, str] = {}
    found = [m.group(0).rstrip(".") for m in _UNICODE_IDENT_RE.finditer(text)]
    written = [(m.start(), t) for m in _CAPS_RE.finditer(text) if _is_caps(t := m.group(0))]
    written += [(m.start(), t) for m in _CAMEL_DOTTED_RE.finditer(text) if _is_camel_dotted(t := m.group(0))]
    found += [t for _, t in sorted(written)]
    for token in found:
        if token and token.lower() not in seen:
            seen[token.lower()] = token
    return list(seen.values())


def written_in(identifier: str, text: str) -> bool:
    """Whether ``text`` holds ``identifier`` as a whole token (not inside a longer name), in the
    same case when the identifier is in capitals (``PATH`` is a name, "path" a word), else in
    any case."""
    flags = 0 if identifier.isupper() else re.IGNORECASE
    return re.search(r"(?<![\w-])" + re.escape(identifier) + r"(?![\w-])", text, flags) is not None
