"""Filter values that select nothing are an error before any work (issue 33).

``retrieval.filters.doc_types=['errcodes,indexes']`` (one doc type holding a comma, which no
document has) made every leg return nothing: recall@5 0.000, exit 0. A filter that cannot match
any document of the corpus is a typo, never an experiment: the error names the value and the
values the corpus has. Checked against the corpus documents as loaded (no database needed).
"""

from __future__ import annotations

from typing import Iterable

from ..errors import ConfigError
from .filters import Filters


def check_filters(filters: Filters, docs: Iterable, corpus: str) -> None:
    """ConfigError naming the first filter value that no document of ``docs`` has."""
    if filters.is_empty():
        return
    docs = list(docs)
    known = sorted({d.doc_type for d in docs})
    for value in dict.fromkeys(filters.doc_types):
        if value not in known:
            hint = (" (one value holding a comma: write the list as retrieval.filters.doc_types=[a,b])"
                    if "," in value else "")
            raise ConfigError(f"retrieval.filters.doc_types: {value!r} is not a doc type of corpus {corpus}{hint}; "
                              f"known doc types: {', '.join(known)}")
    prefix = filters.source_uri_prefix
    if prefix and not any(d.source_uri.startswith(prefix) for d in docs):
        sample = ", ".join(sorted(d.source_uri for d in docs)[:5])
        raise ConfigError(f"retrieval.filters.source_uri_prefix: no document of corpus {corpus} has a source_uri "
                          f"starting with {prefix!r} (e.g. {sample})")
