"""Hosted rerankers through their SDKs: Voyage (``rerank-2.5`` / ``rerank-2.5-lite``, billed by
tokens) and Cohere (``rerank-v3.5``, billed by searches: one query with up to 100 documents).

Both return one relevance score per document in input order (the APIs answer sorted by score
with each document's index; we put them back). Keys come from ``VOYAGE_API_KEY`` /
``CO_API_KEY`` only; 429 / 5xx are retried by the SDK. Scores are cached by the caller
(``rerank_cache``: model, query, chunk text), so a sweep over ``rerank.cutoff`` pays once.
"""

from __future__ import annotations

from typing import Sequence

from ..embedding.api import KEY_VARIABLES, ApiError, api_key, quiet_http_logs, scrub
from ..embedding.pricing import rerank_price
from ..errors import ConfigError, UserError
from ..install_hint import install_hint
from .rerank_params import RerankParams

DEFAULT_MODELS = {"voyage": "rerank-2.5", "cohere": "rerank-v3.5"}
MAX_DOCUMENTS = 1000  # per request, both providers


class ApiReranker:
    provider = ""

    def __init__(self, params: RerankParams) -> None:
        self.model = params.model or DEFAULT_MODELS[self.provider]
        self.model_id = f"{self.provider}:{self.model}"
        self.base_url = params.base_url
        self._key = api_key(self.provider, f"rerank={self.provider}")
        quiet_http_logs()
        self.price = rerank_price(self.provider, self.model, params.price)
        self.tokens = 0
        self.search_units = 0
        self.requests = 0

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        scores: list[float] = []
        for lo in range(0, len(texts), MAX_DOCUMENTS):
            part = list(texts[lo : lo + MAX_DOCUMENTS])
            try:
                pairs = self._request(query, part)
            except UserError:
                raise
            except Exception as exc:  # noqa: BLE001 - SDK errors of every kind: one clear line
                status = getattr(exc, "status_code", None) or getattr(exc, "http_status", None)
                where = f" at {self.base_url}" if self.base_url else ""
                raise ApiError(f"rerank: {self.provider} API{where} failed for model {self.model!r}: "
                               f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "")
                               + f": {scrub(str(exc), self._key)}",
                               hint=f"check {KEY_VARIABLES[self.provider][0]} and rerank.model") from None
            self.requests += 1
            by_index = dict(pairs)
            if sorted(by_index) != list(range(len(part))):
                raise ApiError(f"rerank: {self.provider} model {self.model!r} scored documents "
                               f"{sorted(by_index)[:10]}, expected 0..{len(part) - 1}")
            scores.extend(float(by_index[i]) for i in range(len(part)))
        return scores

    def usage(self) -> dict[str, float]:
        out = {"rerank.requests": float(self.requests)}
        if self.provider == "voyage":
            out["rerank.tokens"] = float(self.tokens)
            if self.price is not None:
                out["rerank.cost_usd"] = self.tokens * self.price / 1_000_000
        else:
            out["rerank.search_units"] = float(self.search_units)
            if self.price is not None:
                out["rerank.cost_usd"] = self.search_units * self.price / 1000
        return out

    def _request(self, query: str, texts: list[str]) -> list[tuple[int, float]]:
        raise NotImplementedError


class VoyageReranker(ApiReranker):
    provider = "voyage"

    def __init__(self, params: RerankParams) -> None:
        super().__init__(params)
        try:
            import voyageai
        except ImportError:
            raise ConfigError("rerank=voyage needs the voyageai SDK", hint=install_hint("api")) from None
        self._client = voyageai.Client(api_key=self._key, max_retries=params.max_retries + 1,
                                       base_url=params.base_url or None)

    def _request(self, query: str, texts: list[str]) -> list[tuple[int, float]]:
        result = self._client.rerank(query, texts, model=self.model)
        self.tokens += int(result.total_tokens or 0)
        return [(r.index, r.relevance_score) for r in result.results]


class CohereReranker(ApiReranker):
    provider = "cohere"

    def __init__(self, params: RerankParams) -> None:
        super().__init__(params)
        try:
            import cohere
        except ImportError:
            raise ConfigError("rerank=cohere needs the cohere SDK", hint=install_hint("api")) from None
        kwargs = {"base_url": params.base_url} if params.base_url else {}
        self._client = cohere.ClientV2(api_key=self._key, max_retries=params.max_retries, **kwargs)

    def _request(self, query: str, texts: list[str]) -> list[tuple[int, float]]:
        result = self._client.rerank(model=self.model, query=query, documents=texts)
        billed = getattr(getattr(result, "meta", None), "billed_units", None)
        self.search_units += int(getattr(billed, "search_units", None) or 0)
        return [(r.index, r.relevance_score) for r in result.results]


def load_api_reranker(params: RerankParams) -> ApiReranker:
    return VoyageReranker(params) if params.name == "voyage" else CohereReranker(params)
