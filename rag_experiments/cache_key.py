"""The one way to turn parameters into a cache key: sha256 of their canonical JSON.

A key built by joining strings (``",".join(doc_types)``) lets two different inputs share a key
(``['a,b']`` and ``['a', 'b']`` both give ``a,b``), and a cache then serves one run's results
to another: plausible metrics, exit 0, wrong. JSON keeps every string quoted and every list
bracketed, so the encoding is injective; sorted keys and fixed separators make equal inputs
encode to the same bytes. Every cache key and derived id (candidate lists, filters, keyword
parameters, strategy ids, in-process memos) goes through :func:`cache_key`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any


def _plain(value: Any) -> Any:
    """JSON-able form: dataclasses as dicts, tuples as lists, sets as sorted lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"cache key: dict keys must be strings, got {sorted(map(repr, value))}")
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    raise TypeError(f"cache key: cannot encode {type(value).__name__} {value!r}")


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept; NaN refused (it is not equal to itself)."""
    return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest(value: Any) -> str:
    """Hex sha256 of the canonical JSON of ``value``. Embedding-space keys use it bare, because
    migration 0003 re-keys cached vectors with the same bytes computed in SQL."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def file_identity(path: Path) -> tuple:
    """What says a file is unchanged since it was last read, for in-process memos: device, inode,
    size and modification time (ns). Raises OSError as ``stat`` does."""
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def cache_key(kind: str, **parts: Any) -> str:
    """Hex sha256 of ``{"kind": kind, **parts}`` in canonical JSON. ``kind`` keeps keys of
    different caches apart even when their parts happen to coincide."""
    return digest({"kind": kind, **parts})
