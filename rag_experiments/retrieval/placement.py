"""Placing a team's passages in the corpus text, so the span-anchored golden set scores them
whatever their chunking (relevance is span overlap, never a shared chunk id).

Methods, tried in this order, the first that works recorded per hit (:data:`METHODS`):

* ``offsets``: the passage gives ``start``/``end``. What they count from is
  ``retrieval.external.offsets`` (:data:`OFFSETS`, ``Placer(docs, offsets=...)``):

  - ``text``: the document's stored text, after its front matter (what every span indexes;
    :func:`rag_experiments.corpus.loader.load_corpus` gives it);
  - ``raw``: the file as a library's loader reads it, YAML front matter included (LangChain
    ``TextLoader`` + ``add_start_index``, LlamaIndex ``SimpleDirectoryReader`` +
    ``start_char_idx``): shifted by the front matter's length (:attr:`Document.text_offset`,
    counted in the file read in text mode, CRLF read as LF as Python's ``open`` does). A passage
    that starts inside the front matter is placed from the text's start (the front matter is
    no document text); one that lies wholly in it cannot be placed. Converted documents (PDF,
    HTML, DOCX, PPTX) have no raw-file characters: their offset is 0, raw = text;
  - ``auto`` (default): when the passage gives its text, the offsets whose window holds that text
    (stored text first, then raw). Without text (bare offsets) into a document with front matter,
    both frames are checked against the document (:meth:`Placer._bare_frame`): a span that fits
    only one of them is read in that frame (one ending inside the front matter is a text span; one
    running past the text's end as text offsets but not as raw ones is a raw span, and then every
    later passage of the system is read as raw); when both fit, the frame in which the span cuts no
    word (a splitter cuts between words) while the other's does; when that decides nothing, the
    frame the system's earlier passages showed; when there is none yet, the run stops with one line
    asking for ``retrieval.external.offsets=raw`` or ``text`` (:class:`AmbiguousOffsets`): reading
    them in the wrong frame would score every such passage a few words off, without a word. The
    note of each hit says which frame was chosen and why;

  The window must hold the passage's text (after the normalisation below, or once a metadata
  header is stripped, see below). Offsets that fit neither frame (outside the document, or
  another text there) never stop the run: the passage is placed by its text, noted, or, when it
  has none, is ``failed`` (counted and listed; ``max_unplaced`` applies);
* ``exact``: the text occurs verbatim in the document. A text that occurs more than once is placed
  at the occurrence nearest the passage's offsets when it gave some (in either frame; the note
  says so); without offsets it is ``ambiguous``: not placed (which occurrence the system meant is
  unknown: the first would credit or miss by chance), listed with the occurrences' offsets;
* ``normalised``: it occurs once both are normalised: runs of whitespace made one space,
  Markdown markup characters (``* ` # > | _ \\``) dropped, letters lower-cased; and when that fails,
  again with up to :data:`MAX_PREFIX_LINES` leading lines dropped (a breadcrumb or title the
  system put in front of its chunk text). Offsets map back to the original text;
* ``fuzzy``: the golden set's own approximate matcher (:func:`rag_experiments.golden.fuzzy.locate`,
  token similarity >= 0.85, ambiguous windows refused), for text the system altered more; it
  stops at :data:`FUZZY_BUDGET_MS` a passage (then ``failed``, "time bound");
* ``document``: a stored run's bare document name (no offsets, no text): the whole document,
  as a document-level run means it;
* ``ambiguous``: the text occurs several times (exact or normalised) and no offsets say which;
* ``failed``: none of these; ``unknown_document``: no corpus document has that source_uri/doc_id.

Metadata headers: a passage whose text starts with blocks that are not document text, of any
length (YAML front matter ``---`` ... ``---``; runs of ``key: value`` lines, e.g. LlamaIndex's
``get_content(metadata_mode="all")``, whose default ``metadata_template`` is ``{key}: {value}``,
``metadata_separator`` a newline and ``text_template`` ``{metadata_str}\n\n{content}``), is tried
as it is first, then without them (:func:`strip_header`): the placement notes how many lines
were dropped.

An unplaced passage stays in the ranked list at its rank as a hit no evidence span can overlap
(a miss that occupies its slot, as it does for the system's users), and is listed in the run's
``alignment_failures.json``.

Cost (``python tools/placement_cost.py``: every chunk of the two stacks over the demo corpus,
p50 / p95 ms a passage): see docs/tutorials/own-retriever.md.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Sequence

from ..golden.fuzzy import FUZZY_THRESHOLD, DocIndex, locate
from ..golden.normalise import normalised as _normalised  # the one normalisation golden add uses too
from ..types import Document, Hit
from .passages import ExternalResultError, Passage

METHODS = ("offsets", "exact", "normalised", "fuzzy", "document", "ambiguous", "failed", "unknown_document")
PLACED = frozenset(("offsets", "exact", "normalised", "fuzzy", "document"))
OFFSETS = ("auto", "raw", "text")  # what a passage's start/end count from
MAX_PREFIX_LINES = 3
MAX_OCCURRENCES = 20  # occurrences of a repeated text looked for (and listed) per passage
FUZZY_BUDGET = 5_000_000  # token comparisons the fuzzy matcher may spend on one passage (golden.fuzzy: work bound)
UNPLACED_DOC = "unplaced:"  # doc_id prefix of a hit no span can overlap
# a metadata line: "key: value" (LlamaIndex writes "key: " for an empty value); the key one to
# three words (letters, digits, _ . - /); "http://x", "12:30" or "Examples:" are not
_KEY = r"[^\S\n]*\w[\w.\-/]{0,40}(?: [\w.\-/]{1,40}){0,2}:"
_KEY_VALUE = re.compile(_KEY + r"[^\S\n].*")
# inside front matter also: "key:" (a YAML mapping or list follows), list items, comments, indented lines
_YAML_LINE = re.compile(_KEY + r"[^\S\n]*|[^\S\n]*(?:- .*|#.*)?|[^\S\n]+\S.*")


def strip_header(text: str) -> list[int]:
    """Where ``text``'s leading metadata blocks may end: the line indexes after each header line
    (the text from there on starts on a non-blank line), fewest lines first; [] when it starts
    with none. Blocks, any number, any length, blank lines between them: YAML front matter (a
    ``---`` line, then ``key: value`` / ``key:`` / list / indented / blank lines, then a ``---``
    line: one block, cut after its closing line only) and runs of ``key: value`` lines
    (LlamaIndex's ``{key}: {value}`` metadata: a cut after each, as a document line such as
    "Example: ..." may follow the metadata and look like it)."""
    lines = text.removeprefix("\ufeff").split("\n")  # a file read with its byte order mark
    i, n, cuts = 0, len(lines), []
    while i < n:
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if line.strip() == "---":
            j = i + 1
            while j < n and lines[j].strip() != "---" and (_KEY_VALUE.fullmatch(lines[j]) or _YAML_LINE.fullmatch(lines[j])):
                j += 1
            if j >= n or lines[j].strip() != "---":
                break
            i = j + 1
        elif _KEY_VALUE.fullmatch(line):
            i += 1
        else:
            break
        k = i
        while k < n and not lines[k].strip():
            k += 1
        if k < n:
            cuts.append(k)
    return sorted(set(cuts))


class AmbiguousOffsets(ExternalResultError):
    """Bare offsets in ``auto`` mode that fit a document's text and its raw file alike."""


@dataclass(frozen=True)
class Placement:
    method: str  # one of METHODS
    doc: Document | None
    start: int = 0
    end: int = 0
    note: str = ""


class Placer:
    """Places passages in ``docs``; per-document indexes are built on first use and kept.
    ``offsets``: what a passage's start/end count from (:data:`OFFSETS`, see the module)."""

    def __init__(self, docs: Sequence[Document], offsets: str = "auto") -> None:
        if offsets not in OFFSETS:
            raise ValueError(f"offsets must be one of {', '.join(OFFSETS)}, got {offsets!r}")
        self.offsets = offsets
        self.by_name: dict[str, Document] = {}
        for d in docs:
            self.by_name.setdefault(d.source_uri, d)
            self.by_name.setdefault(d.doc_id, d)
        # a system that read the files names them by path: match the file name when it is unique
        stems: dict[str, list[Document]] = {}
        for d in docs:
            stems.setdefault(PurePosixPath(d.source_uri).stem, []).append(d)
        self.by_stem = {s: ds[0] for s, ds in stems.items() if len(ds) == 1}
        self._norm: dict[str, tuple[str, list[int]]] = {}
        self._index: dict[str, DocIndex] = {}
        # bare offsets in auto mode: how many passages showed each frame (see _bare_frame)
        self._bare_seen: Counter = Counter()

    def document(self, name: str) -> Document | None:
        d = self.by_name.get(name)
        if d is None:
            d = self.by_stem.get(PurePosixPath(name.replace("\\", "/")).stem)
        return d

    def place(self, p: Passage, where: str = "") -> Placement:
        """Where passage ``p`` is (``where`` names it in notes only: placing never raises)."""
        doc = self.document(p.document)
        if doc is None:
            return Placement("unknown_document", None, note=f"no corpus document {p.document!r}")
        texts = _candidates(p.text)
        if p.start is not None:
            placed, why = self._by_offsets(doc, p, texts, where)
            if placed is not None:
                return placed
            if not texts:
                return Placement("failed", doc, note=why)
            placed = self._by_text(doc, texts, near=(p.start, p.start - doc.text_offset))
            return Placement(placed.method, doc, placed.start, placed.end,
                             f"{why}; " + ("placed by text" if placed.method in PLACED else placed.note)
                             + (f" ({placed.note})" if placed.method in PLACED and placed.note else ""))
        if p.text is None:  # only a stored run's bare docno gets here (read_passage refuses it)
            return Placement("document", doc, 0, len(doc.text))
        return self._by_text(doc, texts)

    def _frames(self, doc: Document, p: Passage, has_text: bool, where: str) -> tuple[list[tuple[str, int]], str]:
        """(name, shift): what the offsets may count from, in the order tried; and a note saying
        why when ``auto`` chose one frame for bare offsets."""
        if self.offsets == "text" or (self.offsets == "auto" and not doc.text_offset):
            return [("text", 0)], ""
        if self.offsets == "raw":
            return [("raw", doc.text_offset)], ""
        if not has_text:
            return self._bare_frame(doc, p, where)
        return [("text", 0), ("raw", doc.text_offset)], ""

    def _bare_frame(self, doc: Document, p: Passage, where: str) -> tuple[list[tuple[str, int]], str]:
        """The frame of offsets given without text into a document with front matter (``auto``):
        see the module. The evidence of earlier passages is kept (:attr:`_bare_seen`): one system
        counts from one frame, so a passage that decides nothing is read in the frame the others
        showed."""
        n, shift, text = len(doc.text), doc.text_offset, doc.text
        if p.end <= shift:  # wholly inside the front matter as raw offsets: only text offsets can mean it
            return [("text", 0)], "offsets=auto: text frame (as raw offsets it lies in the front matter)"
        if p.end > n:  # past the text's end: raw offsets, or none at all (said as before)
            if p.end - shift > n:
                return [("text", 0)], ""
            self._bare_seen["raw-past-end"] += 1
            return [("raw", shift)], f"offsets=auto: raw frame (as text offsets it runs past the text's end, {n})"
        if self._bare_seen["raw-past-end"]:
            return [("raw", shift)], "offsets=auto: raw frame (an earlier passage fits no other)"

        def word_edges(s: int, e: int) -> bool:  # a splitter cuts between words, never inside one
            return ((s <= 0 or not (text[s - 1].isalnum() and text[s].isalnum()))
                    and (e >= n or not (text[e - 1].isalnum() and text[e].isalnum())))
        edges = {"text": word_edges(p.start, p.end), "raw": word_edges(p.start - shift, p.end - shift)}
        if edges["text"] != edges["raw"]:
            frame = "text" if edges["text"] else "raw"
            self._bare_seen[frame] += 1
            return ([(frame, 0 if frame == "text" else shift)],
                    f"offsets=auto: {frame} frame (its span cuts no word, the other's does)")
        seen_text, seen_raw = self._bare_seen["text"], self._bare_seen["raw"]
        if seen_text != seen_raw:
            frame = "text" if seen_text > seen_raw else "raw"
            return ([(frame, 0 if frame == "text" else shift)],
                    f"offsets=auto: {frame} frame (as {max(seen_text, seen_raw)} of {seen_text + seen_raw} earlier "
                    "passages showed)")
        raise AmbiguousOffsets(
            f"{where}: offsets {p.start}..{p.end} into {doc.source_uri!r} come without text, and the document "
            f"has {shift} characters of front matter: they fit its text and its raw file alike",
            hint="say what they count from: retrieval.external.offsets=raw (the file as read, front matter "
                 "included: LangChain start_index, LlamaIndex start_char_idx) or offsets=text")

    def _by_offsets(self, doc: Document, p: Passage, texts: list[tuple[str, str]],
                    where: str = "") -> tuple[Placement | None, str]:
        n, why, fits = len(doc.text), [], []
        if not (0 <= p.start < p.end):
            return None, f"offsets {p.start}..{p.end} are no span"
        frames, chosen = self._frames(doc, p, bool(texts), where)
        for frame, shift in frames:
            s, e = p.start - shift, p.end - shift
            if e <= 0:
                why.append(f"{frame}: inside the front matter (0..{shift})")
                continue
            if s < 0 and frame == "text" or e > n:
                why.append(f"{frame}: outside the text ({shift}..{shift + n})" if shift
                           else f"{frame}: outside the document (0..{n})")
                continue
            lo = max(0, s)
            note = f"offsets count from the raw file (front matter: {shift} chars)" if shift else ""
            if s < 0:
                note += "; starts in the front matter: placed from the text's start"
            if not texts:
                return Placement("offsets", doc, lo, e, "; ".join(x for x in (chosen, note) if x)), ""
            # the text the window must hold: each candidate, and when the window starts in the
            # front matter, each candidate's tail after it
            wanted = [t for t, _ in texts] + ([t[len(t) - e:] for t, _ in texts if len(t) >= e] if s < 0 else [])
            fits.append((frame, Placement("offsets", doc, lo, e, note), doc.text[lo:e], wanted))
        for frame, placed, window, wanted in fits:  # verbatim first: normalising costs more
            if window in wanted:
                return placed, ""
        for frame, placed, window, wanted in fits:
            w = _normalised(window)[0]
            if any(w == _normalised(t)[0] for t in wanted):
                return placed, ""
            why.append(f"{frame}: another text there")
        hint = ""
        if self.offsets == "auto" and not texts and doc.text_offset and p.end - doc.text_offset <= n:
            hint = " (counted from the raw file? retrieval.external.offsets=raw)"
        return None, f"offsets {p.start}..{p.end} of {doc.source_uri!r} do not fit ({'; '.join(why)}){hint}"

    def _by_text(self, doc: Document, texts: list[tuple[str, str]], near: tuple[int, ...] = ()) -> Placement:
        """``near``: the passage's start offset in each frame, when it gave offsets (that did not
        hold its text): a repeated text is placed at the occurrence nearest them."""
        if not texts:
            return Placement("failed", doc, note="empty text")
        for t, stripped in texts:  # the fewest lines dropped first
            spans = _occurrences(doc.text, t)
            if spans:
                return _chosen("exact", doc, [(i, i + len(t)) for i in spans], near, stripped)
        norm, where = self._norm.get(doc.doc_id) or self._norm.setdefault(doc.doc_id, _normalised(doc.text))
        # every text tried is a suffix of the passage from a line start: normalised once, then cut
        full = texts[0][0]
        qnorm, qwhere = _normalised(full)
        starts = [0] + [i + 1 for i, c in enumerate(full) if c == "\n"]
        tried: set[int] = set()
        for t, stripped in texts:
            first = full.count("\n", 0, len(full) - len(t))  # the line this candidate starts on
            for drop in range(min(MAX_PREFIX_LINES, len(starts) - 1 - first) + 1):
                line = first + drop
                if line in tried:
                    continue
                tried.add(line)
                k = bisect.bisect_left(qwhere, starts[line])
                q = qnorm[k + 1:] if qnorm[k:k + 1] == " " else qnorm[k:]  # == _normalised(suffix)
                if not q:
                    break
                found = _occurrences(norm, q)
                if found:
                    note = "; ".join(x for x in (stripped, f"{drop} leading line(s) dropped" if drop else "") if x)
                    return _chosen("normalised", doc, [(where[j], where[j + len(q) - 1] + 1) for j in found],
                                   near, note)
        t, stripped = texts[-1]  # the text without its metadata header, when it had one
        index = self._index.get(doc.doc_id) or self._index.setdefault(doc.doc_id, DocIndex(doc.text))
        quote = t.strip()
        m = locate(index, quote, None, quote, FUZZY_THRESHOLD, FUZZY_BUDGET)
        note = "; ".join(x for x in (stripped, m.note) if x)
        if m.status != "none":
            return Placement("fuzzy", doc, m.start, m.end, note)
        return Placement("failed", doc, note=note or "not found in the document")


def _occurrences(text: str, needle: str) -> list[int]:
    """Start offsets of ``needle`` in ``text`` (overlapping ones too), at most MAX_OCCURRENCES + 1."""
    out, i = [], text.find(needle)
    while i >= 0 and len(out) <= MAX_OCCURRENCES:
        out.append(i)
        i = text.find(needle, i + 1)
    return out


def _chosen(method: str, doc: Document, spans: list[tuple[int, int]], near: tuple[int, ...], note: str) -> Placement:
    """One occurrence: the only one, the one nearest the passage's offsets, or ``ambiguous``."""
    if len(spans) == 1:
        return Placement(method, doc, *spans[0], note)
    count = f"{len(spans) - 1}+" if len(spans) > MAX_OCCURRENCES else str(len(spans))
    listed = ", ".join(f"{s}..{e}" for s, e in spans[:MAX_OCCURRENCES])
    if near:
        s, e = min(spans, key=lambda span: (min(abs(span[0] - x) for x in near), span[0]))
        said = f"the text occurs {count} times; placed at the one nearest the offsets ({s}..{e})"
        return Placement(method, doc, s, e, "; ".join(x for x in (note, said) if x))
    said = f"ambiguous: the text occurs {count} times ({listed}) and the passage gives no offsets to say which"
    return Placement("ambiguous", doc, note="; ".join(x for x in (note, said) if x))


def _candidates(text: str | None) -> list[tuple[str, str]]:
    """The passage's text as given, then without its metadata header lines (fewest dropped
    first), each with a note."""
    if text is None or not text.strip():
        return []
    lines = text.split("\n")
    return [(text, "")] + [("\n".join(lines[k:]), f"{k} metadata/header line(s) dropped") for k in strip_header(text)]


def placed_hit(p: Passage, placement: Placement, rank: int) -> Hit:
    """The hit evaluation scores: the placed span, or a span in no document when unplaced."""
    score = p.score if p.score is not None else 0.0
    if placement.method in PLACED:
        d = placement.doc
        cid = p.id or "ext:" + hashlib.sha1(f"{d.doc_id}|{placement.start}|{placement.end}".encode()).hexdigest()[:16]
        return Hit(cid, d.doc_id, d.source_uri, d.doc_type, placement.start, placement.end, score, rank,
                   {"external": rank})
    cid = p.id or "ext:" + hashlib.sha1(f"{p.document}|{p.text}".encode()).hexdigest()[:16]
    return Hit(cid, UNPLACED_DOC + p.document, UNPLACED_DOC + p.document, "", 0, 0, score, rank, {"external": rank})
