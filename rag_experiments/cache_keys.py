"""The one way to build a cache key: sha256 of canonical JSON (sorted keys, no whitespace).

String joins (``f"{a}|{b}"``) are ambiguous (``"a|b" + "c"`` equals ``"a" + "b|c"``) and silently
change when a part's formatting does; canonical JSON names every part and types it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(parts: dict[str, Any]) -> str:
    return json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def cache_key(parts: dict[str, Any]) -> str:
    """Hex sha256 of the canonical JSON of ``parts`` (a dict of JSON-serialisable values)."""
    return hashlib.sha256(canonical_json(parts).encode("utf-8")).hexdigest()
