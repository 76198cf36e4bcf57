"""What both providers of :mod:`rag_experiments.llm` share: token usage, the token estimate, the
fatal-error type and the error-text helpers. A module of its own so the ``openai`` provider
(:mod:`.openai_provider`) imports it instead of the package that imports the provider (the runtime
cycle ``llm -> llm_openai -> llm`` of issue 49, item 7)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import UserError

CHARS_PER_TOKEN = 3.5  # input-token estimate when no tokenizer is at hand (English prose + code)


@dataclass(frozen=True)
class Usage:
    """Token usage of one or more requests (``requests`` counts billed responses)."""

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens,
                     self.requests + other.requests)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict | None) -> "Usage":
        if not obj:
            return cls()
        return cls(int(obj.get("input_tokens", 0)), int(obj.get("output_tokens", 0)), int(obj.get("requests", 0)))

    @classmethod
    def from_sdk(cls, usage: Any) -> "Usage":
        """From an SDK ``Usage``: cache reads/writes are counted as input tokens (upper bound)."""
        inp = (usage.input_tokens or 0) + (getattr(usage, "cache_creation_input_tokens", None) or 0) \
            + (getattr(usage, "cache_read_input_tokens", None) or 0)
        return cls(int(inp), int(usage.output_tokens or 0), 1)


def estimate_tokens(text: str) -> int:
    """Input tokens of ``text`` estimated as ``ceil(chars / 3.5)`` (no tokenizer needed)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class LLMFatalError(UserError):
    """An API error that will recur for every request (bad key, no permission, unknown model)."""


def request_url_of(exc: BaseException) -> str:
    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    if url is None:
        return "the configured base URL"
    return f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port else "")


def short_error(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text[:limit] + ("..." if len(text) > limit else "")
