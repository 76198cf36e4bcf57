"""Chunking parameters, validated before any work starts."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Protocol

from ..errors import ConfigError

STRATEGIES = ("heading", "fixed", "paragraph")


class TokenCounter(Protocol):
    """What chunking needs from the embedding model's tokenizer."""

    def count_tokens(self, text: str) -> int: ...

    def token_spans(self, text: str) -> list[tuple[int, int]]: ...


@dataclass(frozen=True)
class ChunkingParams:
    """``name``: heading | fixed | paragraph. ``max_tokens`` counts the embedding model's tokens.

    ``overlap`` (tokens) applies to ``fixed``. ``breadcrumbs`` prepends ``Page > Section`` to
    the indexed/embedded text (never to the span text, which stays ``document[start:end]``).
    """

    name: str = "heading"
    max_tokens: int = 200
    overlap: int = 0
    breadcrumbs: bool = True

    def __post_init__(self) -> None:
        if self.name not in STRATEGIES:
            raise ConfigError(f"chunking.name: unknown strategy {self.name!r}; choose one of {', '.join(STRATEGIES)}")
        if self.max_tokens <= 0:
            raise ConfigError(f"chunking.max_tokens: must be > 0, got {self.max_tokens}")
        if self.overlap < 0:
            raise ConfigError(f"chunking.overlap: must be >= 0, got {self.overlap}")
        if self.overlap >= self.max_tokens:
            raise ConfigError(
                f"chunking.overlap: must be < chunking.max_tokens ({self.max_tokens}), got {self.overlap}"
            )

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]
