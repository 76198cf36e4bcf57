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

import itertools
import math
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import UserError

DOC_KEYS = ("source_uri", "doc_id", "source", "file_path", "uri", "url")


class ExternalResultError(UserError):
    """A team's retriever returned something that cannot be read as ranked passages."""


@dataclass(frozen=True)
class Passage:
    """One passage of a team's answer: the typed contract a team's system can return (a mapping
    or any object of the shapes above is read into one).

        from rag_experiments import Passage

        def search(query: str, k: int, **params) -> list[Passage]:   # retrieval.external.target
            return [Passage("runtime-config-resource.html", start=120, end=480, score=12.5), ...]

    The rules (each broken one is an :class:`ExternalResultError` naming the field):

    * ``document``: the corpus document, by its ``source_uri`` or ``doc_id`` (or file name), not empty;
    * ``start`` and ``end``: integer character offsets into that document's text, both or neither
      (what they count from: ``retrieval.external.offsets``); offsets that do not hold the passage
      are counted as unplaced (the text, when given, is placed instead);
    * ``text``: the passage's text, placed in the document when there are no offsets (exact,
      then normalised, then fuzzy); a passage without offsets needs it (only a stored run may name
      a whole document);
    * ``score``: optional and finite; the order of the list is what is scored, best first;
    * ``id``: optional, the system's own id for the passage (shown beside it).

    At most ``k`` passages, best first; a repeat of a span already returned keeps its rank and is
    credited once.
    """

    document: str  # source_uri or doc_id, as the system names it
    start: int | None = None
    end: int | None = None
    text: str | None = None
    score: float | None = None
    id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.document, str) or not self.document:
            raise ExternalResultError(f"Passage.document: must be a non-empty string (a source_uri or doc_id), "
                                      f"got {self.document!r}")
        for name in ("start", "end"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise ExternalResultError(f"Passage.{name}: must be an integer character offset, got {v!r}")
        if (self.start is None) != (self.end is None):
            raise ExternalResultError(f"Passage: give both start and end (or neither), got start={self.start} "
                                      f"end={self.end}")
        for name in ("text", "id"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, str):
                raise ExternalResultError(f"Passage.{name}: must be a string, got {type(v).__name__}")
        if self.score is not None:
            if isinstance(self.score, bool) or not isinstance(self.score, (int, float)) or not math.isfinite(self.score):
                raise ExternalResultError(f"Passage.score: must be a finite number, got {self.score!r}")
            object.__setattr__(self, "score", float(self.score))

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


def _checked(p: Passage, where: str, max_chars: int | None, whole_documents: bool, bound: str) -> Passage:
    """A typed passage's values as :func:`read_passage` checks a mapping's (naming ``where``)."""
    if p.text is not None:
        _text(p.text, "text", where)
        if max_chars is not None and len(p.text) > max_chars:
            raise ExternalResultError(f"{where}: the passage text is {len(p.text):,} characters, more than "
                                      f"{bound}={max_chars:,}")
    _text(p.document, "the document name", where)
    if p.id is not None:
        _text(p.id, "id", where)
    if p.start is None and not p.text and not whole_documents:
        raise ExternalResultError(f"{where}: the passage has neither start/end offsets nor text")
    return p


def read_passage(obj: Any, where: str, max_chars: int | None = None, whole_documents: bool = False,
                 bound: str = "retrieval.http.max_passage_chars") -> Passage:
    """``obj`` as a :class:`Passage`; ExternalResultError naming ``where`` when it is not one (or
    when its text is longer than ``max_chars``). ``whole_documents``: a passage may name a
    document only (a stored run's bare docno)."""
    if isinstance(obj, Passage):  # typed by the system (or a stored run's, already read): the values are checked
        return _checked(obj, where, max_chars, whole_documents, bound)
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
                                  f"{bound}={max_chars:,}", hint=f"return passages, not whole files (or raise {bound})")
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


def read_result(result: Any, k: int, where: str, max_chars: int | None = None,
                whole_documents: bool = False, bound: str = "retrieval.http.max_passage_chars") -> list[Passage]:
    """The ranked passages of one answer. More than ``k`` is an error (a system that ignores ``k``
    would be measured on a different cutoff than it is asked for; an endless generator stops at
    k + 1); so is a passage text longer than ``max_chars`` (when given; ``bound`` names the key)."""
    if isinstance(result, Mapping):  # {"passages": [...]} and friends
        found = next((result[key] for key in ("passages", "results", "hits", "documents") if key in result), None)
        if found is None:
            raise ExternalResultError(f"{where}: the answer is a mapping without a passages/results/hits list "
                                      f"(keys: {', '.join(map(str, list(result)[:8]))})")
        result = found
    if isinstance(result, (str, bytes)) or not hasattr(result, "__iter__"):
        raise ExternalResultError(f"{where}: the answer must be a list of passages, got {type(result).__name__}")
    items = list(itertools.islice(result, k + 1))
    if len(items) > k:
        raise ExternalResultError(f"{where}: more than k: {len(items)} passages returned for k={k}",
                                  hint="return at most k passages, best first")
    return [read_passage(p, f"{where}, passage {i}", max_chars, whole_documents, bound)
            for i, p in enumerate(items, start=1)]
