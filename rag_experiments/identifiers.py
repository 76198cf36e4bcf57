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
