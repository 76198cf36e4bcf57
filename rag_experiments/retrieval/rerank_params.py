"""The ``rerank`` config group's values (:class:`RerankParams`) and the reranker names.

Apart from :mod:`.rerank`, which builds the rerankers from them, so :mod:`.api_rerank` (which
:mod:`.rerank` loads) reads them without importing :mod:`.rerank` back: the last import circle
of the package (issue 58 item 5).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ConfigError
from ..llm import LLMParams

RERANKERS = ("maxsim", "cross-encoder", "llm", "voyage", "cohere")


@dataclass(frozen=True)
class RerankParams:
    name: str = "maxsim"
    model: str = ""  # cross-encoder name/path, LLM model id, or voyage / cohere model ("" = default)
    cutoff: int = 20
    base_url: str | None = None  # voyage / cohere: another endpoint (e.g. a test stub)
    price: float | None = None  # override the list price (voyage: USD/M tokens; cohere: USD/1,000 searches)
    max_retries: int = 4
    # the top-level ``llm`` node (provider, base_url, price), set by Settings: not a rerank.* key
    llm: LLMParams = field(default_factory=LLMParams, metadata={"omegaconf_ignore": True})

    def __post_init__(self) -> None:
        if self.name not in RERANKERS:
            raise ConfigError(f"rerank.name: unknown reranker {self.name!r}; use one of {', '.join(RERANKERS)}")
        if self.name == "llm" and not self.model and self.llm.provider != "anthropic":
            raise ConfigError(f"rerank.model: rerank=llm with llm.provider={self.llm.provider} needs a model name",
                              hint="the name your server serves, e.g. rerank.model=Qwen/Qwen2.5-7B-Instruct (vLLM) "
                              "or rerank.model=llama3.1:8b (Ollama)")
        if self.cutoff <= 0:
            raise ConfigError(f"rerank.cutoff: must be > 0, got {self.cutoff}")
        if self.price is not None and self.price < 0:
            raise ConfigError(f"rerank.price: must be >= 0, got {self.price}")
