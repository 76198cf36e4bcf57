"""The default way ingest computes document embeddings: batch after batch in this process.

Here, in the embedding layer, so the store (:mod:`rag_experiments.store`'s ``embed_with_cache``) and
the ingest (:mod:`rag_experiments.chunk_index`) need nothing from :mod:`rag_experiments.scale` (a layer
above them), which adds the Ray executor with the same ``map``; the caller passes that one in
(issue 46 item 3: the store reached into the executors)."""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np


class LocalEmbedding:
    """Batches embedded one after another in this process."""

    def __init__(self, embedder, model_batch_size: int = 16) -> None:
        self.embedder, self.model_batch_size = embedder, model_batch_size

    def map(self, batches: Sequence[list[str]], input_type: str = "document") -> Iterator[tuple[int, np.ndarray]]:
        for i, texts in enumerate(batches):
            yield i, self.embedder.embed(texts, input_type=input_type, batch_size=self.model_batch_size)
