"""Who computes document embeddings during ingest: this process, or a Ray cluster's workers.

Both feed the same embedding cache in the same order of batches, committed as each batch
arrives, so a killed ingest resumes without recomputing what was cached, and a Ray ingest and a
local ingest write identical chunks and vectors (each batch is embedded by the same code with
the same model batches; tested).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from ..embedding.base import load_configured
from ..embedding.executor import LocalEmbedding  # the default executor lives below the store
from ..embedding.options import EmbeddingOptions
from ..errors import ConfigError
from .cluster import connect

__all__ = ["EXECUTORS", "IngestParams", "LocalEmbedding", "RayEmbedding", "embedding_executor"]

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class IngestParams:
    executor: str = "local"  # local | ray
    ray_address: str | None = None  # None: $RAY_ADDRESS, else a local Ray

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise ConfigError(f"ingest.executor: must be one of {', '.join(EXECUTORS)}, got {self.executor!r}")


def _embed_on_worker(embedding_name: str, options, texts: list[str], input_type: str,
                     model_batch_size: int) -> np.ndarray:
    # load_configured is cached per worker process: the model loads once
    return load_configured(embedding_name, options).embed(texts, input_type=input_type, batch_size=model_batch_size)


class RayEmbedding:
    """Batches fanned out as Ray tasks (one CPU each), gathered as they complete.

    At most ``2 x cluster CPUs`` batches are in flight, so a million-chunk corpus never sits in
    the object store at once.
    """

    def __init__(self, embedding_name: str, options=None, model_batch_size: int = 16,
                 address: str | None = None) -> None:
        self.embedding_name, self.options = embedding_name, options or EmbeddingOptions()
        self.model_batch_size, self.address = model_batch_size, address

    def map(self, batches: Sequence[list[str]], input_type: str = "document") -> Iterator[tuple[int, np.ndarray]]:
        import ray

        connect({"address": self.address or os.environ.get("RAY_ADDRESS")})
        task = ray.remote(num_cpus=1, max_retries=2)(_embed_on_worker)
        window = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        pending: dict = {}
        todo = iter(enumerate(batches))
        while True:
            for i, texts in todo:
                pending[task.remote(self.embedding_name, self.options, texts, input_type, self.model_batch_size)] = i
                if len(pending) >= window:
                    break
            if not pending:
                return
            done, _ = ray.wait(list(pending), num_returns=1)
            yield pending.pop(done[0]), ray.get(done[0])


def embedding_executor(params: IngestParams, embedder, options):
    """``options``: the ``embedding`` group (its name and batch size)."""
    if params.executor == "ray":
        if getattr(embedder, "paid", False):
            # an API model is network-bound and rate-limited per key: fanning requests out to
            # workers buys nothing and would put the key on every node
            raise ConfigError(f"ingest.executor=ray: {options.name} is an API model; embed it with "
                              "ingest.executor=local (requests are batched within the provider's limits)")
        return RayEmbedding(options.name, options, options.batch_size, params.ray_address)
    return LocalEmbedding(embedder, options.batch_size)
