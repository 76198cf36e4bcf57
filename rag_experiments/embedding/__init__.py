"""Text embedders behind one small interface (see :mod:`.base`)."""

from .base import Embedder, load_embedder

__all__ = ["Embedder", "load_embedder"]
