"""Embedders behind paid HTTP APIs: Voyage (``voyageai`` SDK) and OpenAI or any OpenAI-compatible
server (``openai`` SDK: vLLM, Ollama, LM Studio, Hugging Face TEI via ``embedding.base_url``).

What they share lives in :class:`ApiEmbedder`:

* the key comes from the provider's environment variable only (:data:`KEY_VARIABLES`); a missing
  one is a :class:`ConfigError` naming the variable, raised before any work (the experiment checks
  it first; the client itself is made at the first request, so estimates need no key);
* :meth:`plan_requests` packs texts into requests within the provider's limits (texts and
  tokens per request); the store commits each request's vectors as it arrives, so a killed
  ingest never pays twice;
* 429 / 5xx are retried by the SDK itself (``embedding.max_retries``);
* every answer is checked: one vector per text, the configured dimension, finite numbers; a
  malformed answer is a :class:`ApiError` naming the provider and model, never the key;
* :attr:`usage` adds up the tokens the provider reports (what is billed).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import ConfigError, UserError
from ..install_hint import install_hint
from .options import EmbeddingOptions
from .pricing import NATIVE_DIMENSIONS, embedding_price
from .tokens import WordPieceCounter

# provider -> environment variables holding its key (first set wins)
KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "voyage": ("VOYAGE_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "cohere": ("CO_API_KEY", "COHERE_API_KEY"),
}

DEFAULT_MODELS = {"voyage": "voyage-3.5", "openai": "text-embedding-3-small"}

# Request limits from the providers' docs: Voyage takes up to 1,000 texts and (for voyage-3.5)
# 320K tokens per request; OpenAI 2,048 inputs and 300K tokens. Our token counts are WordPiece
# estimates, so the token budget keeps a margin below the documented limit.
REQUEST_LIMITS = {"voyage": (1000, 120_000), "openai": (2048, 200_000)}


def quiet_http_logs() -> None:
    """The SDKs' HTTP clients log every request at INFO, which Hydra's job logging prints: keep
    warnings only (the progress bar already shows the requests)."""
    for name in ("httpx", "httpx2", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)


class ApiError(UserError):
    """A provider answered something unusable (after the SDK's retries)."""


def api_key(provider: str, purpose: str) -> str:
    """The key from the provider's variable; a missing key names the variable (never a value)."""
    names = KEY_VARIABLES[provider]
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    raise ConfigError(f"{names[0]} is not set ({purpose} calls the {provider} API)",
                      hint=f"export {names[0]}=<your key>")


def scrub(text: str, secret: str | None) -> str:
    """``text`` without ``secret`` (belt and braces: the SDKs do not echo keys, but a proxy might)."""
    text = " ".join(str(text).split())
    if secret:
        text = text.replace(secret, "***")
    return text[:300] + ("..." if len(text) > 300 else "")


@dataclass(frozen=True)
class ApiUsage:
    """Billed usage reported by a provider."""

    tokens: int = 0
    requests: int = 0
    texts: int = 0

    def __add__(self, other: "ApiUsage") -> "ApiUsage":
        return ApiUsage(self.tokens + other.tokens, self.requests + other.requests, self.texts + other.texts)

    def __sub__(self, other: "ApiUsage") -> "ApiUsage":
        return ApiUsage(self.tokens - other.tokens, self.requests - other.requests, self.texts - other.texts)


class ApiEmbedder:
    provider = ""
    paid = True
    max_tokens = 32_000  # chunk sizes are bounded by chunking.max_tokens; this only caps it

    def __init__(self, options: EmbeddingOptions) -> None:
        self.options = options
        self.model = options.model or DEFAULT_MODELS[self.provider]
        self._key: str | None = None  # read at the first request: estimates need no key
        self._sdk = None
        self._counter = WordPieceCounter()
        self.requested_dim = options.dimensions
        # None until known: an OpenAI-compatible server's model may be one we have no table for
        self.dim: int | None = options.dimensions or NATIVE_DIMENSIONS.get(f"{self.provider}:{self.model}")
        self._dim_checked = options.dimensions is not None
        suffix = f"@{options.dimensions}" if options.dimensions else ""
        self.model_id = f"{self.provider}:{self.model}{suffix}{self._variant_suffix()}"
        self.usage = ApiUsage()
        texts_limit, tokens_limit = REQUEST_LIMITS[self.provider]
        self.max_batch_texts = options.max_batch_texts or texts_limit
        self.max_batch_tokens = options.max_batch_tokens or tokens_limit
        self.price_per_mtok = embedding_price(self.provider, self.model, options.price_per_mtok)

    def _variant_suffix(self) -> str:
        return ""

    # -- what chunking and estimates need ----------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        return self._counter.count_tokens(text)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return self._counter.token_spans(text)

    def estimate_tokens(self, texts: Sequence[str], input_type: str = "document") -> int:
        return sum(self._counter.count_many([self.sent_text(t, input_type) for t in texts]))

    def sent_text(self, text: str, input_type: str) -> str:
        return text

    def space_parts(self, input_type: str) -> dict[str, Any]:
        """What identifies a cached vector besides the text (see store.embedding_space_key)."""
        return {"provider": self.provider, "model": self.model_id, "dimensions": self.requested_dim,
                "input_type": input_type}

    # -- requests -----------------------------------------------------------------------------------
    def plan_requests(self, texts: Sequence[str], input_type: str = "document") -> list[list[int]]:
        """Index lists, one per request, within the provider's texts and tokens per request."""
        counts = self._counter.count_many([self.sent_text(t, input_type) for t in texts])
        plans: list[list[int]] = []
        cur: list[int] = []
        cur_tokens = 0
        for i, n in enumerate(counts):
            if cur and (len(cur) >= self.max_batch_texts or cur_tokens + n > self.max_batch_tokens):
                plans.append(cur)
                cur, cur_tokens = [], 0
            cur.append(i)
            cur_tokens += n
        if cur:
            plans.append(cur)
        return plans

    def embed(self, texts: Sequence[str], *, input_type: str = "document", batch_size: int = 0,
              progress: bool = False) -> np.ndarray:
        """Unit-normalised float32 vectors; one request per planned batch."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        out: list[np.ndarray | None] = [None] * len(texts)
        for idx in self.plan_requests(texts, input_type):
            vecs = self._checked([texts[i] for i in idx], input_type)
            for i, v in zip(idx, vecs):
                out[i] = v
        return np.stack(out)

    def _checked(self, texts: list[str], input_type: str) -> np.ndarray:
        try:
            vectors, tokens = self._request([self.sent_text(t, input_type) for t in texts], input_type)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - SDK errors of every kind: one clear line
            raise self._describe(exc) from None
        if len(vectors) != len(texts):
            raise ApiError(f"embedding: {self.provider} model {self.model!r} returned {len(vectors)} vectors "
                           f"for {len(texts)} texts")
        try:
            arr = np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError):
            raise ApiError(f"embedding: {self.provider} model {self.model!r} returned vectors of unequal length "
                           "or non-numbers") from None
        if arr.ndim != 2 or not np.isfinite(arr).all():
            raise ApiError(f"embedding: {self.provider} model {self.model!r} returned malformed vectors")
        self._check_dim(arr.shape[1])
        self.usage = self.usage + ApiUsage(int(tokens or 0), 1, len(texts))
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        return arr / np.clip(norms, 1e-12, None)

    def _check_dim(self, got: int) -> None:
        if got > 4000:  # stop after one request, not after paying for the whole corpus
            raise ConfigError(f"embedding.dimensions: {self.provider} model {self.model!r} returns {got}-dimensional "
                              "vectors; pgvector's HNSW indexes at most 4000 (halfvec)",
                              hint="set embedding.dimensions to a size the model supports (Matryoshka models)")
        if self.requested_dim is not None and got != self.requested_dim:
            raise ConfigError(
                f"embedding.dimensions: configured {self.requested_dim}, but {self.provider} model {self.model!r} "
                f"returned {got}-dimensional vectors",
                hint=f"set embedding.dimensions={got}, or a dimension the model supports")
        if self.dim is not None and got != self.dim and not self._dim_checked:
            raise ConfigError(
                f"embedding.dimensions: {self.provider} model {self.model!r} returned {got}-dimensional vectors, "
                f"expected its native {self.dim}", hint=f"set embedding.dimensions={got}")
        if self.dim is not None and got != self.dim:
            raise ApiError(f"embedding: {self.provider} model {self.model!r} changed dimension mid-run "
                           f"({self.dim} -> {got})")
        self.dim = got
        self._dim_checked = True

    def _describe(self, exc: BaseException) -> UserError:
        status = getattr(exc, "status_code", None) or getattr(exc, "http_status", None)
        where = f" at {self.options.base_url}" if self.options.base_url else ""
        what = f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "")
        return ApiError(f"embedding: {self.provider} API{where} failed for model {self.model!r}: {what}: "
                        f"{scrub(str(exc), self._key)}",
                        hint=f"check {KEY_VARIABLES[self.provider][0]}, embedding.model and the provider's status")

    @property
    def _client(self):
        if self._sdk is None:
            self._key = api_key(self.provider, f"embedding={self.provider}")
            quiet_http_logs()
            self._sdk = self._make_client()
        return self._sdk

    def _make_client(self):
        raise NotImplementedError

    def _request(self, texts: list[str], input_type: str) -> tuple[list, int]:
        raise NotImplementedError

    def cost_usd(self, tokens: int) -> float | None:
        return None if self.price_per_mtok is None else tokens * self.price_per_mtok / 1_000_000


class VoyageEmbedder(ApiEmbedder):
    """Voyage AI through the ``voyageai`` SDK: ``input_type`` document / query, ``output_dimension``."""

    provider = "voyage"

    def _make_client(self):
        try:
            import voyageai
        except ImportError:
            raise ConfigError("embedding=voyage needs the voyageai SDK",
                              hint=install_hint("api")) from None
        # max_retries counts attempts in this SDK (tenacity stop_after_attempt)
        return voyageai.Client(api_key=self._key, max_retries=self.options.max_retries + 1,
                               timeout=self.options.timeout, base_url=self.options.base_url or None)

    def _variant_suffix(self) -> str:
        return "" if self.options.input_types else "+no-input-type"

    def space_parts(self, input_type: str) -> dict[str, Any]:
        parts = super().space_parts(input_type if self.options.input_types else "none")
        return parts

    def _request(self, texts: list[str], input_type: str) -> tuple[list, int]:
        result = self._client.embed(texts, model=self.model,
                                    input_type=input_type if self.options.input_types else None,
                                    output_dimension=self.requested_dim)
        return result.embeddings, result.total_tokens


class OpenAIEmbedder(ApiEmbedder):
    """OpenAI (or any OpenAI-compatible server) through the ``openai`` SDK; ``dimensions`` is sent
    only when configured (servers for models without Matryoshka training reject it)."""

    provider = "openai"

    def _make_client(self):
        try:
            import openai
        except ImportError:
            raise ConfigError("embedding=openai needs the openai SDK", hint=install_hint("api")) from None
        return openai.OpenAI(api_key=self._key, base_url=self.options.base_url or None,
                             max_retries=self.options.max_retries, timeout=self.options.timeout)

    def _variant_suffix(self) -> str:
        if self.options.query_prefix or self.options.document_prefix:
            from ..cache_key import digest

            return "+prefix:" + digest({"query_prefix": self.options.query_prefix,
                                           "document_prefix": self.options.document_prefix})[:12]
        return ""

    def sent_text(self, text: str, input_type: str) -> str:
        prefix = self.options.query_prefix if input_type == "query" else self.options.document_prefix
        return prefix + text

    def space_parts(self, input_type: str) -> dict[str, Any]:
        symmetric = not (self.options.query_prefix or self.options.document_prefix)
        return super().space_parts("symmetric" if symmetric else input_type)

    def _request(self, texts: list[str], input_type: str) -> tuple[list, int]:
        kwargs = {"dimensions": self.requested_dim} if self.requested_dim else {}
        resp = self._client.embeddings.create(model=self.model, input=texts, **kwargs)
        data = sorted(resp.data, key=lambda d: d.index)
        usage = getattr(resp, "usage", None)
        tokens = getattr(usage, "total_tokens", None) or getattr(usage, "prompt_tokens", None) or 0
        return [d.embedding for d in data], tokens
