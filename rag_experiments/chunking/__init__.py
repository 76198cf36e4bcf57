"""Chunking strategies: pure functions from a document to chunks with exact char spans."""

from .params import ChunkingParams, TokenCounter
from .strategies import chunk_document, chunk_corpus, strategy_key

__all__ = ["ChunkingParams", "TokenCounter", "chunk_document", "chunk_corpus", "strategy_key"]
