"""Metadata filters as a parameterized WHERE fragment. Values never enter the SQL text."""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql

from ..cache_key import cache_key


@dataclass(frozen=True)
class Filters:
    """Restrict candidates: ``doc_types`` (any of), ``source_uri_prefix`` (starts with)."""

    doc_types: tuple[str, ...] = ()
    source_uri_prefix: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "doc_types", tuple(self.doc_types))  # OmegaConf builds lists

    def is_empty(self) -> bool:
        return not self.doc_types and not self.source_uri_prefix

    def key(self) -> str:
        """Equal for filters that select the same rows (type order and repeats do not matter; an
        empty prefix is no prefix), different otherwise: a doc type holding a comma is one type."""
        return cache_key("filters", doc_types=sorted(set(self.doc_types)), prefix=self.source_uri_prefix or None)

    def where(self) -> tuple[sql.Composable, dict]:
        """``AND ...`` clauses plus their bind parameters (named, prefixed ``f_``)."""
        parts: list[sql.Composable] = []
        params: dict = {}
        if self.doc_types:
            parts.append(sql.SQL(" AND {} = ANY(%(f_doc_types)s)").format(sql.Identifier("doc_type")))
            params["f_doc_types"] = list(self.doc_types)
        if self.source_uri_prefix:
            # starts_with() instead of LIKE: no wildcard escaping, a '%' in the prefix is data.
            parts.append(sql.SQL(" AND starts_with({}, %(f_prefix)s)").format(sql.Identifier("source_uri")))
            params["f_prefix"] = self.source_uri_prefix
        return sql.Composed(parts), params
