"""Token counts without the model: the bundled MiniLM WordPiece tokenizer.

API embedders have no local tokenizer here (Voyage's and OpenAI's are downloaded at run time,
which this package never does). Chunking and cost estimates count WordPiece tokens instead;
the real usage comes back with every response and is what gets reported and logged at the end.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from tokenizers import Tokenizer


@lru_cache(maxsize=1)
def _tokenizer():
    tok_file = resources.files(__package__).joinpath("assets/all-MiniLM-L6-v2/tokenizer.json")
    tok = Tokenizer.from_str(tok_file.read_text(encoding="utf-8"))
    tok.no_truncation()
    tok.no_padding()
    return tok


class WordPieceCounter:
    """``count_tokens`` / ``token_spans`` (what chunking needs) from the bundled tokenizer."""

    def count_tokens(self, text: str) -> int:
        return len(_tokenizer().encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in _tokenizer().encode_batch(list(texts), add_special_tokens=False)]

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return [tuple(o) for o in _tokenizer().encode(text, add_special_tokens=False).offsets]
