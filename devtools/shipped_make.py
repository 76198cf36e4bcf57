"""Make the demo's shipped vectors (``make demo-vectors``): see :mod:`.shipped` for what they are.

Apart from the reader so that the ingest, which reads them, does not import what making them
needs (the default config's composition, the experiment's embedder loading).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from rag_experiments.embedding.shipped import load, shipped_path


def write(out: Path | None = None) -> dict:
    """Embed the default chunking's texts of the demo corpus with the bundled model; write the file.

    The texts are batched as an ingest into an empty cache batches them (unique texts in chunk
    order, 256 per executor call, 16 per model call, length-sorted within a call), so each vector
    is the one a cold ingest on this machine computes, to the bit.
    """
    import platform
    from datetime import datetime, timezone

    import onnxruntime

    from rag_experiments.store import EMBED_BATCH_TEXTS, embedding_space_key
    from rag_experiments.chunking import chunk_corpus
    from rag_experiments.corpus.loader import load_corpus
    from rag_experiments.scale.executors import LocalEmbedding
    from rag_experiments.experiment import load_settings_embedder
    from rag_experiments.session import compose_settings
    from rag_experiments.tracking.mlflow_run import git_state
    from rag_experiments.types import sha256_text

    settings, _ = compose_settings([])
    if settings.corpus.path != "demo" or settings.embedding.name != "minilm-onnx":
        raise SystemExit("the default config no longer ingests the demo with the bundled model; nothing to ship")
    embedder = load_settings_embedder(settings)
    docs = load_corpus(settings.corpus.path, settings.corpus.name)
    texts = [c.indexed_text for c in chunk_corpus(docs, settings.chunking, embedder, progress=True)]
    by_hash = dict(zip((sha256_text(t) for t in texts), texts))
    hashes = list(by_hash)
    batches = [hashes[lo:lo + EMBED_BATCH_TEXTS] for lo in range(0, len(hashes), EMBED_BATCH_TEXTS)]
    vectors = np.zeros((len(hashes), embedder.dim), dtype=np.float32)
    from tqdm import tqdm

    with tqdm(total=len(hashes), desc=f"embedding ({embedder.model_id})", unit="text") as bar:
        for i, vecs in LocalEmbedding(embedder, settings.embedding.batch_size).map(
                [[by_hash[h] for h in b] for b in batches], "document"):
            start = i * EMBED_BATCH_TEXTS
            vectors[start:start + len(vecs)] = vecs
            bar.update(len(vecs))
    meta = {
        "space": embedding_space_key(embedder, "document"),
        "model": embedder.model_id,
        "corpus": settings.corpus.name,
        "chunking": {"name": settings.chunking.name, "max_tokens": settings.chunking.max_tokens,
                     "overlap": settings.chunking.overlap, "breadcrumbs": settings.chunking.breadcrumbs},
        "texts": len(hashes),
        "onnxruntime": onnxruntime.__version__,
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "made_by": "make demo-vectors (python -m devtools.shipped_make)",
        **git_state(),  # the tree it was made from, as a run records it: git_commit, git_dirty
        "made_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    out = out or shipped_path()
    np.savez_compressed(out, meta=np.array(json.dumps(meta)), hashes=np.array([h.encode() for h in hashes]),
                        vectors=vectors)
    load.cache_clear()
    return meta


if __name__ == "__main__":  # make demo-vectors
    print(json.dumps(write(), indent=2))
