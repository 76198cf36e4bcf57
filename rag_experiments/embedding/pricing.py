"""List prices (USD) of the API models, for estimates before paying and costs after.

Override any of them per run with ``embedding.price_per_mtok`` / ``rerank.price``; a model
missing here has no estimate until you do (an OpenAI-compatible server you run yourself:
``embedding.price_per_mtok=0``). Snapshot of the providers' pricing pages, late 2026.
"""

from __future__ import annotations

# USD per million input tokens
EMBEDDING_PRICES: dict[str, float] = {
    "voyage:voyage-3.5": 0.06,
    "voyage:voyage-3.5-lite": 0.02,
    "voyage:voyage-3-large": 0.18,
    "voyage:voyage-code-3": 0.18,
    "voyage:voyage-3": 0.06,
    "voyage:voyage-3-lite": 0.02,
    "openai:text-embedding-3-small": 0.02,
    "openai:text-embedding-3-large": 0.13,
    "openai:text-embedding-ada-002": 0.10,
}

# rerankers: Voyage bills tokens (USD per million), Cohere bills searches (USD per 1,000 searches;
# one search = one query with up to 100 documents)
RERANK_PRICES: dict[str, float] = {
    "voyage:rerank-2.5": 0.05,
    "voyage:rerank-2.5-lite": 0.02,
    "voyage:rerank-2": 0.05,
    "voyage:rerank-2-lite": 0.02,
    "cohere:rerank-v3.5": 2.00,
}

# the native output dimension of the default models (for the schema before the first answer)
NATIVE_DIMENSIONS: dict[str, int] = {
    "voyage:voyage-3.5": 1024,
    "voyage:voyage-3.5-lite": 1024,
    "voyage:voyage-3-large": 1024,
    "voyage:voyage-code-3": 1024,
    "voyage:voyage-3": 1024,
    "voyage:voyage-3-lite": 512,
    "openai:text-embedding-3-small": 1536,
    "openai:text-embedding-3-large": 3072,
    "openai:text-embedding-ada-002": 1536,
}


def embedding_price(provider: str, model: str, override: float | None = None) -> float | None:
    return override if override is not None else EMBEDDING_PRICES.get(f"{provider}:{model}")


def rerank_price(provider: str, model: str, override: float | None = None) -> float | None:
    return override if override is not None else RERANK_PRICES.get(f"{provider}:{model}")
