"""Vectors shipped with the demo corpus: the bundled model's vectors of the default chunking's texts.

Why: the first command a newcomer runs (``make run``) ingests the demo, and embedding its 3,020
chunks is ~4 minutes of a 2-core machine's CPU (the int8 MiniLM model is compute-bound there:
~2,000 tokens/s), nearly all of that run. A vector is a function of its embedding space (model,
digest, dimensions) and its text: exactly the embedding cache's key. This file is that cache
pre-filled for one space and one corpus, made by the same code path an ingest runs
(``devtools/shipped_make.py``, ``make demo-vectors``). At ingest, texts missing from the database's cache are
looked up here before the model is called; what is found is copied into the cache and counted
apart (``IngestReport.shipped_vectors``, the run's ``ingest.shipped_vectors`` tag), so a record
never says a text was embedded when it was read from this file.

A text not in the file (another chunking, an edited page, another model) is embedded as usual.
``rag-exp bench`` and the scale demo never read the file: they measure the model.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

FILE_NAME = "demo_vectors.npz"


def shipped_path() -> Path:
    return Path(str(resources.files("rag_experiments").joinpath(f"data/{FILE_NAME}")))


@dataclass(frozen=True)
class ShippedVectors:
    space: str  # the embedding space key (store.embedding_space_key) the vectors belong to
    meta: dict  # how and from what they were made
    row: dict[str, int]  # text hash -> row of ``vectors``
    vectors: np.ndarray  # float32, one row per text

    def lookup(self, space: str, hashes: list[str]) -> dict[str, np.ndarray]:
        if space != self.space:
            return {}
        return {h: self.vectors[self.row[h]] for h in hashes if h in self.row}


@lru_cache(maxsize=4)
def load(path: str | None = None) -> ShippedVectors | None:
    """The shipped file, or None when there is none (a build without it); loaded once per process."""
    file = Path(path) if path else shipped_path()
    if not file.is_file():
        return None
    try:
        with np.load(file, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            hashes = [h.decode() for h in z["hashes"]]
            vectors = z["vectors"].astype(np.float32, copy=False)
        if vectors.ndim != 2 or vectors.shape[0] != len(hashes) or not isinstance(meta.get("space"), str):
            raise ValueError(f"{len(hashes)} hashes, vectors of shape {vectors.shape}, space {meta.get('space')!r}")
    except Exception as exc:  # noqa: BLE001 - an unreadable cache costs time, never a wrong vector
        # The texts are then embedded as if there were no file: slower, and the same vectors.
        warnings.warn(f"{file}: unreadable shipped vectors ({exc}); embedding instead. "
                      f"Re-make them with `make demo-vectors` (or reinstall).", stacklevel=2)
        return None
    return ShippedVectors(meta["space"], meta, {h: i for i, h in enumerate(hashes)}, vectors)
