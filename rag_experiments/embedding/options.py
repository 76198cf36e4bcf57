"""Embedding settings as one frozen value (built from the ``embedding`` config group) and their
checks; :func:`.base.load_configured` turns them into an embedder.

Keys never live here: API keys come from the provider's environment variable only (see
:mod:`.api`), so they cannot reach params, Hydra outputs or artifacts.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError

API_PROVIDERS = ("voyage", "openai")


def check_embedder_name(name: str) -> None:
    """ConfigError unless ``name`` names an embedder we can build: checked with the rest of the
    config, so a sweep point with a bad name is refused before the sweep starts."""
    if name not in ("minilm-onnx", "static-minilm", "voyage", "openai") and not (name.startswith("st:") and name[3:].strip()):
        raise ConfigError(
            f"embedding.name: unknown embedder {name!r}",
            hint="use 'minilm-onnx' (bundled, offline), 'static-minilm' (bundled, offline, 50x faster or more, "
            "lower recall on paraphrases), 'st:<sentence-transformers model or path>', "
            "'voyage' or 'openai' (embedding=voyage / embedding=openai)",
        )


@dataclass(frozen=True)
class EmbeddingOptions:
    name: str = "minilm-onnx"  # minilm-onnx | static-minilm | st:<model or path> | voyage | openai
    batch_size: int = 16  # texts per model call
    model: str = ""  # voyage / openai model name ("" = the provider's default model)
    dimensions: int | None = None  # output_dimension (voyage) / dimensions (openai); None = native
    input_types: bool = True  # voyage: send input_type=document / query
    base_url: str | None = None  # another endpoint (an OpenAI-compatible server, a test stub)
    query_prefix: str = ""  # st: / openai-compatible e5, bge... instruction prefixes
    document_prefix: str = ""
    price_per_mtok: float | None = None  # USD per million tokens; None = list price (pricing.py)
    confirm: bool = True  # ask before paying to embed a corpus (--yes / embedding.confirm=false)
    max_batch_texts: int | None = None  # None = the provider's request limit
    max_batch_tokens: int | None = None
    max_retries: int = 4  # the SDK's own retries on 429 / 5xx
    timeout: float = 60.0

    def __post_init__(self) -> None:
        if self.batch_size <= 0:
            raise ConfigError(f"embedding.batch_size: must be > 0, got {self.batch_size}")
        if self.dimensions is not None and not 1 <= self.dimensions <= 4000:
            # pgvector indexes halfvec up to 4,000 dimensions (vector: 2,000)
            raise ConfigError(f"embedding.dimensions: must be in 1..4000 (pgvector's HNSW limit), got {self.dimensions}")
        if self.price_per_mtok is not None and self.price_per_mtok < 0:
            raise ConfigError(f"embedding.price_per_mtok: must be >= 0, got {self.price_per_mtok}")
        for name in ("max_batch_texts", "max_batch_tokens"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"embedding.{name}: must be > 0, got {value}")
        if self.max_retries < 0:
            raise ConfigError(f"embedding.max_retries: must be >= 0, got {self.max_retries}")


@dataclass(frozen=True)
class EmbeddingParams(EmbeddingOptions):
    """The ``embedding`` config group: the options, checked against ``name`` (the embedders take
    plain options, whatever ``name``)."""

    def __post_init__(self) -> None:
        check_embedder_name(self.name)
        super().__post_init__()
        check_embedding_config(self.name, self)


def check_embedding_config(name: str, options: EmbeddingOptions) -> None:
    """Reject combinations that cannot work, before any work starts."""
    api = name in API_PROVIDERS
    if not api and (options.model or options.dimensions or options.base_url):
        raise ConfigError(f"embedding.model / dimensions / base_url apply to embedding.name=voyage|openai, "
                          f"not {name!r}")
    if name in ("minilm-onnx", "static-minilm") and (options.query_prefix or options.document_prefix):
        raise ConfigError(f"embedding.query_prefix / document_prefix: {name} was trained without "
                          "instruction prefixes; they apply to st:<model> and openai-compatible servers")
    if name == "voyage" and (options.query_prefix or options.document_prefix):
        raise ConfigError("embedding.query_prefix / document_prefix: voyage takes input_type instead "
                          "(embedding.input_types=true)")

