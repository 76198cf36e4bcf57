"""Any sentence-transformers model, for users with torch (the ``rerank`` extra) and a model.

Loaded by hub name (downloads where the user has network) or local path. Not used by the
default path, so torch stays out of the default install.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from ..cache_key import canonical_json
from ..errors import ConfigError
from ..install_hint import install_hint


class SentenceTransformerEmbedder:
    """``query_prefix`` / ``document_prefix``: e5 wants ``"query: "`` / ``"passage: "``, bge an
    instruction before queries; without them those models lose quality. They are part of the
    model id (so of the strategy) and of the cache space."""

    provider = "sentence-transformers"
    paid = False

    def __init__(self, name_or_path: str, device: str = "cpu", query_prefix: str = "",
                 document_prefix: str = "") -> None:
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise ConfigError(
                f"embedding.name: st:{name_or_path} needs sentence-transformers",
                hint=install_hint("rerank"),
            ) from None
        try:
            self._model = SentenceTransformer(name_or_path, device=device)
        except Exception as exc:  # noqa: BLE001 - many loader errors; say which model failed
            raise ConfigError(
                f"embedding.name: cannot load sentence-transformers model {name_or_path!r}: {exc}",
                hint="give a local folder path, or a hub name on a machine with network",
            ) from None
        # renamed in sentence-transformers 5 (the old name warns); accept both
        dim_of = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(dim_of())
        self.max_tokens = int(self._model.max_seq_length)
        # The weights, not only the name: a model retrained in place (same folder, same hub name at
        # another revision) must not be served the embeddings, chunks and lists of the old one.
        self.model_id = f"st:{name_or_path}@{weights_digest(self._model)[:12]}"
        if query_prefix or document_prefix:
            from ..cache_key import digest

            self.model_id += "+prefix:" + digest({"query_prefix": query_prefix,
                                                  "document_prefix": document_prefix})[:12]
        self._tok = self._model.tokenizer

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        enc = self._tok(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False)
        return [tuple(o) for o in enc["offset_mapping"]]

    def count_tokens(self, text: str) -> int:
        return len(self._tok(text, add_special_tokens=False, truncation=False)["input_ids"])

    def space_parts(self, input_type: str) -> dict:
        symmetric = not (self.query_prefix or self.document_prefix)
        return {"provider": self.provider, "model": self.model_id, "dimensions": self.dim,
                "input_type": "symmetric" if symmetric else input_type}

    def sent_text(self, text: str, input_type: str) -> str:
        return (self.query_prefix if input_type == "query" else self.document_prefix) + text

    def embed(self, texts: Sequence[str], *, input_type: str = "document", batch_size: int = 64,
              progress: bool = False) -> np.ndarray:
        vecs = self._model.encode(
            [self.sent_text(t, input_type) for t in texts], batch_size=batch_size, show_progress_bar=progress, normalize_embeddings=True
        )
        return np.asarray(vecs, dtype=np.float32)


def weights_digest(model) -> str:
    """sha256 over every parameter and buffer (name, dtype, shape, raw bytes), in name order."""
    import torch

    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(canonical_json([name, str(t.dtype), list(t.shape)]).encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()
