"""What a team's retriever returns, read into one shape: :class:`Passage`.

A result is a list (or tuple) of passages, best first. A passage is any of:

* a mapping or an object with ``source_uri`` (or ``doc_id``) and either ``start`` and ``end``
  (character offsets into that corpus document's text) or ``text``; optional ``score``, ``id`` (or ``chunk_id``);
* a LangChain ``Document``: ``page_content`` is the text, ``metadata["source"]`` (or
  ``source_uri``/``doc_id``) the document, ``metadata["start_index"]`` (what
  ``RecursiveCharacterTextSplitter(add_start_index=True)`` writes) the start offset, and a
  ``score`` in the metadata when the retriever puts one there;
* a LlamaIndex ``NodeWithScore`` (or a bare node): ``node.get_content()`` is the text,
  ``node.metadata`` / ``node.ref_doc_id`` the document, ``node.start_char_idx`` /
  ``node.end_char_idx`` the offsets, ``score`` the score.

Duck-typed on purpose: neither library is imported here, so their versions are the team's
business. Anything else is a :class:`ExternalResultError` naming the target, the query and the
passage's position: a result we cannot read must never be scored as misses. So is a value the
answer cache (PostgreSQL JSON) cannot hold or that means nothing as a rank: a score of inf, -inf
or NaN, a NUL character or a lone surrogate in a text, a name or an id, and (when the system
sets a bound: ``retrieval.http.max_passage_chars``) a passage text longer than the bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import UserError

DOC_KEYS = ("source_uri", "doc_id", "source", "file_path", "uri", "url")


class ExternalResultError(UserError):
    """A team's retriever returned something that cannot be read as ranked passages."""


@dataclass(frozen=True)
class Passage:
    """One passage as the system returned it (before it is placed in the corpus)."""

    document: str  # source_uri or doc_id, as the system names it
    start: int | None = None
    end: int | None = None
    text: str | None = None
    score: float | None = None
    id: str | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @classmethod
    def from_json(cls, d: Mapping) -> Passage:
        return cls(**{k: d.get(k) for k in ("document", "start", "end", "text", "score", "id")})


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _offset(value: Any, field: str, where: str) -> int | None:
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or (isinstance(value, float) and not math.isfinite(value)) or value != int(value)):
        raise ExternalResultError(f"{where}: {field} must be an integer character offset, got {value!r}")
    return int(value)


def _score(value: Any, where: str) -> float | None:
    if value is None:
        return None
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise ExternalResultError(f"{where}: score must be a number, got {str(value)[:60]!r}") from None
    except OverflowError:  # an integer beyond any float
        raise ExternalResultError(f"{where}: score {str(value)[:40]}... is beyond any float",
                                  hint="return finite scores, or none: the system's order is what is scored") from None
    if not math.isfinite(score):  # NaN, inf, -inf: no JSON (the answer cache) holds them, no rank means them
        raise ExternalResultError(f"{where}: score is {'NaN' if math.isnan(score) else score}",
                                  hint="return finite scores, or none: the system's order is what is scored")
    return score


def _text(value: str, field: str, where: str) -> str:
    """``value`` if PostgreSQL's JSON (the answer cache) can hold it and it is Unicode text."""
    if "\x00" in value:
        raise ExternalResultError(f"{where}: {field} holds a NUL character (\\u0000) at {value.index(chr(0))}, "
                                  "which no text column or JSON value in PostgreSQL can hold",
                                  hint="strip NUL characters from the system's text")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ExternalResultError(f"{where}: {field} holds {value[exc.start:exc.end]!r} at {exc.start}, a lone "
                                  "surrogate (not Unicode text: bytes decoded with errors='surrogateescape'?)",
                                  hint="decode the documents as UTF-8 with errors='replace'") from None
    return value


def read_passage(obj: Any, where: str, max_chars: int | None = None) -> Passage:
    """``obj`` as a :class:`Passage`; ExternalResultError naming ``where`` when it is not one (or
    when its text is longer than ``max_chars``)."""
    if isinstance(obj, Passage):  # a stored run's, already read
        return obj
    score = None
    node = _get(obj, "node")
    if node is not None and not isinstance(obj, Mapping):  # LlamaIndex NodeWithScore
        score, obj = _get(obj, "score"), node
    meta = _get(obj, "metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    if isinstance(obj, (str, bytes)) or obj is None or isinstance(obj, (int, float)):
        raise ExternalResultError(f"{where}: a passage must be a mapping or an object with source_uri/doc_id "
                                  f"and start/end or text, got {type(obj).__name__} {str(obj)[:60]!r}")
    document = next((str(v) for v in (_get(obj, k) for k in DOC_KEYS) if v not in (None, "")), None)
    document = document or next((str(meta[k]) for k in DOC_KEYS if meta.get(k) not in (None, "")), None)
    if document is None and _get(obj, "ref_doc_id"):
        document = str(_get(obj, "ref_doc_id"))
    if document is None:
        raise ExternalResultError(f"{where}: the passage names no document (none of {', '.join(DOC_KEYS)}, "
                                  "in the passage or its metadata)")
    text = _get(obj, "text")
    if text is None:
        text = _get(obj, "page_content")  # LangChain Document
    if text is None and callable(getattr(obj, "get_content", None)):
        text = obj.get_content()
    if text is not None and not isinstance(text, str):
        raise ExternalResultError(f"{where}: text must be a string, got {type(text).__name__}")
    if text is not None and max_chars is not None and len(text) > max_chars:
        raise ExternalResultError(f"{where}: the passage text is {len(text):,} characters, more than "
                                  f"retrieval.http.max_passage_chars={max_chars:,}",
                                  hint="return passages, not whole files (or raise retrieval.http.max_passage_chars)")
    start = _get(obj, "start")
    start = start if start is not None else _get(obj, "start_char_idx")
    start = start if start is not None else meta.get("start_index")
    end = _get(obj, "end")
    end = end if end is not None else _get(obj, "end_char_idx")
    start, end = _offset(start, "start", where), _offset(end, "end", where)
    if end is None and start is not None and text is not None:
        end = start + len(text)  # LangChain gives the start only
    if (start is None) != (end is None):
        raise ExternalResultError(f"{where}: give both start and end (or text), got start={start} end={end}")
    if start is None and not text:
        raise ExternalResultError(f"{where}: the passage has neither start/end offsets nor text")
    if score is None:
        score = _get(obj, "score")
        score = score if score is not None else meta.get("score")
    pid = _get(obj, "id") or _get(obj, "chunk_id") or _get(obj, "id_") or _get(obj, "node_id")
    pid = None if pid is None else _text(str(pid), "id", where)
    return Passage(_text(document, "the document name", where), start, end,
                   None if text is None else _text(text, "text", where), _score(score, where), pid)


def read_result(result: Any, k: int, where: str, max_chars: int | None = None) -> list[Passage]:
    """The ranked passages of one answer. More than ``k`` is an error (a system that ignores ``k``
    would be measured on a different cutoff than it is asked for); so is a passage text longer
    than ``max_chars`` (when given)."""
    if isinstance(result, Mapping):  # {"passages": [...]} and friends
        found = next((result[key] for key in ("passages", "results", "hits", "documents") if key in result), None)
        if found is None:
            raise ExternalResultError(f"{where}: the answer is a mapping without a passages/results/hits list "
                                      f"(keys: {', '.join(map(str, list(result)[:8]))})")
        result = found
    if isinstance(result, (str, bytes)) or not hasattr(result, "__iter__"):
        raise ExternalResultError(f"{where}: the answer must be a list of passages, got {type(result).__name__}")
    items = list(result)
    if len(items) > k:
        raise ExternalResultError(f"{where}: {len(items)} passages returned for k={k}",
                                  hint="return at most k passages, best first")
    return [read_passage(p, f"{where}, passage {i}", max_chars) for i, p in enumerate(items, start=1)]
