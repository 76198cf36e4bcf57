"""``static-minilm``: a static (model2vec-class) embedder distilled from the bundled MiniLM.

A text's vector is the mean of its tokens' rows in a (30,522 x 256) float16 table, L2-normalised:
MiniLM's own tokenizer, no transformer. 50-280x faster than the int8 MiniLM on 2 cores
(docs/reference/performance.md measures both), at a recall cost on paraphrases: a first look at a
corpus in seconds, or a sweep's cheap leg, not the default.

The table ships in this package (``assets/static-minilm/embeddings.npy``, ~15 MB), made by
``tools/distil_static.py`` from the bundled int8 ONNX MiniLM (every vocabulary token alone through
the model, PCA to 256 dimensions, Zipf/SIF weighting) and checked against the sha256 below before
use, like the MiniLM's weights. Licence: derived from sentence-transformers/all-MiniLM-L6-v2,
Apache-2.0 (``assets/static-minilm/LICENSE.md``).
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np
from tokenizers import Tokenizer

from ..errors import ConfigError

ASSET = "assets/static-minilm/embeddings.npy"
TABLE_SHA256 = "221405a6741dcf583c4ff1f3efe719ff537fa7118d8ac46f29b4da7b8d1364ce"
MAX_TOKENS = 512  # no attention window: a longer text is still averaged whole; chunkers size by this


def table_path() -> Path:
    return Path(str(resources.files(__package__).joinpath(ASSET)))


class StaticMiniLM:
    provider = "static"
    paid = False
    max_tokens = MAX_TOKENS

    def __init__(self, table_file: str | Path | None = None, expected_sha256: str = TABLE_SHA256) -> None:
        path = Path(table_file) if table_file else table_path()
        if not path.is_file():
            raise ConfigError(f"embedding.name=static-minilm: no token table at {path}",
                              hint="reinstall rag-experiments, or re-make it: python tools/distil_static.py")
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest != expected_sha256:
            raise ConfigError(f"embedding: {path} has sha256 {digest}, expected {expected_sha256}",
                              hint="reinstall rag-experiments; the file is corrupt or a different distillation "
                                   "(python tools/distil_static.py --check compares)")
        self.model_sha256 = digest
        self.model_id = f"static-minilm@{digest[:12]}"
        self._table = np.load(path, allow_pickle=False).astype(np.float32)
        self.dim = int(self._table.shape[1])
        tok_file = resources.files(__package__).joinpath("assets/all-MiniLM-L6-v2/tokenizer.json")
        self._tok = Tokenizer.from_str(tok_file.read_text(encoding="utf-8"))
        self._tok.no_truncation()
        self._tok.no_padding()
        # without character offsets (tokenizers >= 0.20): a quarter faster, and embed needs only the ids
        self._encode = getattr(self._tok, "encode_batch_fast", self._tok.encode_batch)

    def space_parts(self, input_type: str) -> dict:
        # symmetric, like the MiniLM: a query is embedded exactly like a document
        return {"provider": self.provider, "model": self.model_id, "dimensions": self.dim, "input_type": "symmetric"}

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return [tuple(o) for o in self._tok.encode(text, add_special_tokens=False).offsets]

    def count_tokens(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def embed(self, texts: Sequence[str], *, input_type: str = "document", batch_size: int = 16,
              progress: bool = False) -> np.ndarray:
        """Unit-normalised float32 mean of each text's token rows (a text of no known token: zeros)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        step = 256  # texts per gather: keeps the gathered rows (tokens x dim floats) small
        for lo in range(0, len(texts), step):
            encodings = self._encode(list(texts[lo : lo + step]), add_special_tokens=False)
            token_ids = [e.ids for e in encodings]
            lengths = np.fromiter(map(len, token_ids), dtype=np.int64, count=len(token_ids))
            nonempty = lengths > 0
            if not nonempty.any():
                continue
            ids = np.concatenate([np.asarray(t, dtype=np.int64) for t in token_ids if t])
            rows = np.repeat(np.arange(len(token_ids)), lengths)
            # token counts per (text, distinct token) times the distinct tokens' rows: one small
            # matmul instead of gathering a row per token (a batch repeats most of its tokens)
            distinct, inverse = np.unique(ids, return_inverse=True)
            counts = np.bincount(rows * len(distinct) + inverse, minlength=len(token_ids) * len(distinct))
            counts = counts.reshape(len(token_ids), len(distinct)).astype(np.float32)
            out[lo : lo + len(token_ids)] = counts @ self._table[distinct]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.clip(norms, 1e-12, None)
