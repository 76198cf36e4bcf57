"""Does a converted document's text look like text? Garbled-text and boilerplate checks.

``rag-exp corpus convert`` runs :func:`assess` over every loaded document and names each one that
looks wrong, with its reason, as a *warning* (``--strict`` turns warnings into failures). Two
kinds, each measured on a real Debian documentation package (``zsh-doc``: 186 texinfo HTML pages
and a 480-page pdfTeX PDF; ``groff``: grohtml HTML and four gropdf/ghostscript PDFs) and on the
demo corpus (187 Markdown pages of the PostgreSQL manual); the numbers behind each threshold are
in ``docs/how-to/check-conversions.md``:

**Garbled text** (a PDF whose text layer spaces words wrongly: ``aDocument``, ``Viewwith``,
``Dele gation``, ``an ypart``). The words of a page are its whitespace-separated tokens stripped
of punctuation, kept when purely alphabetic and at least 2 letters (identifiers, code and numbers
are not words); fenced code blocks and backtick spans are skipped. The *vocabulary* is every word
seen in at least 2 files of the corpus, plus a dictionary when one is installed
(``/usr/share/dict/words``: Debian's ``wamerican``; no network), plus, for a corpus of fewer than
3 files, every word seen at least 3 times. Signals, over the pages that are not boilerplate:

* ``unknown``: share of words in no vocabulary;
* ``glued``: unknown words that are two vocabulary words run together (``aDocument``,
  ``Viewwith``), or two words around a digit (``index0contains``), per 1,000 words;
* ``split``: two neighbouring tokens, one of them unknown, that make one vocabulary word once
  joined (``Dele gation``) or two once the space moves by one or two letters (``an ypart`` ->
  ``any part``), per 1,000 words.

A document is *garbled* when it has at least :data:`MIN_WORDS` words and either ``glued + split``
reaches :data:`MAX_BROKEN_PER_1000` with at least :data:`MIN_BROKEN` distinct broken forms (one
odd name used three times is not garbling), or ``unknown`` reaches :data:`MAX_UNKNOWN` (text
that is hardly words at all: a wrong font encoding, or a language the rest of the corpus and the
dictionary do not share; this rule needs a dictionary or :data:`BROAD_CORPUS_FILES` files, as a
small corpus's own vocabulary leaves many clean words unknown). A word the document itself uses 3 or more times counts as known (a
compound term such as ``netmask``; a converter rarely breaks one word the same way that often),
and a line ending in ``-`` (printed hyphenation, ``copy-`` / ``right``) is not a split.

**Boilerplate**: a table of contents or an index (lines of dot leaders, entries ending in page
numbers, entries pointing at numbered sections, one-letter index headings). A *page* (a PDF page;
the whole text for other formats) is boilerplate when at least :data:`BOILERPLATE_SHARE` of its
at least :data:`MIN_BOILERPLATE_LINES` non-empty lines are such lines. A document all of whose
text is boilerplate pages gets :attr:`DocQuality.boilerplate` (the flag a loader or an index can
act on); a PDF with some such pages lists them (:attr:`DocQuality.boilerplate_pages`, and
:meth:`DocQuality.boilerplate_spans` as char spans of the text).

Two more kinds of boilerplate (measured on zsh-doc's texinfo HTML): a *redirect stub* (a page
of at most :data:`REDIRECT_MAX_CHARS` characters, heading lines aside, whose text only points
elsewhere: ``The node you are looking for is at Aliasing.``) is flagged as a whole
(:attr:`DocQuality.redirect`, :attr:`DocQuality.boilerplate`); *navigation-bar lines* (link-only
lines such as ``| [ << ] | [ < ] | [ Up ] | [ > ] | ... | [Contents] | [Index] | [ ? ] |`` or
``Next: X, Previous: Y, Up: Z``, with the table rule under them) are counted per document and
given as char spans (:attr:`DocQuality.navigation`, in :meth:`DocQuality.boilerplate_spans`).

Nothing is dropped here: a boilerplate page still gets indexed (a golden span may point into it,
and dropping it would change every run's corpus digest); the warning names it so a team can move
the file out of the corpus folder or live with it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..types import Document

__all__ = [
    "BOILERPLATE_SHARE",
    "DICTIONARY_PATH",
    "MAX_BROKEN_PER_1000",
    "MAX_UNKNOWN",
    "MIN_BROKEN",
    "MIN_WORDS",
    "DocQuality",
    "QualityReport",
    "assess",
    "load_dictionary",
    "navigation_spans",
    "page_texts",
    "redirect_stub",
]

DICTIONARY_PATH = Path("/usr/share/dict/words")

# thresholds (docs/how-to/check-conversions.md has the measurements they come from)
MIN_WORDS = 100  # fewer words than this: too little text to judge
MIN_BROKEN = 3  # and at least this many distinct glued or split forms (one odd name is not garbling)
MAX_BROKEN_PER_1000 = 8.0  # glued + split words per 1,000 words: garbled on this alone
MAX_UNKNOWN = 0.2  # share of words in no vocabulary that says garbled on its own
BOILERPLATE_SHARE = 0.6
MIN_BOILERPLATE_LINES = 8
BROAD_CORPUS_FILES = 20  # without a dictionary, the unknown-share rule needs this many files
SMALL_CORPUS_FILES = 3  # below this many files, words seen 3+ times count as vocabulary too

_FENCE_BLOCK = re.compile(r"^(```+|~~~+)[^\n]*\n.*?^\1[ \t]*$", re.M | re.S)
_CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
_STRIP = "\"'`.,;:!?()[]{}<>*_|‘’“”«»—–-/\\#=+~^$%&@"
_WORD = re.compile(r"[A-Za-z]+")
_DIGIT_GLUE = re.compile(r"^([A-Za-z]{2,})\d+([A-Za-z]{2,})$")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_SHORT_OK = frozenset({"a", "i"})

# boilerplate line shapes
_LEADERS = re.compile(r"(?:\.\s?){4,}")  # ". . . ." or "....." (a TOC's dot leaders)
_PAGE_REFS = re.compile(r"\D[\s,]\s*(?:[ivxlc]+|\d{1,4})(?:\s*[,–-]\s*\d{1,4})*\s*$", re.I)
_SECTION_REF = re.compile(r"^(?:[A-Z]\.)?\d{1,3}(?:\.\d{1,3})*\.?\s+\S")
_TABLE_RULE = re.compile(r"^\|?[\s:|-]*-{3,}[\s:|-]*$")
# a redirect stub: a short page whose text only points elsewhere (texinfo's "The node you are
# looking for is at X.", "This page has moved to ...", a refresh link)
_REDIRECT = re.compile(r"\b(?:the node you are looking for is at|(?:has|have) (?:been )?moved|moved to|"
                       r"redirect(?:ed|ing)?\b|refresh\b|this page is now at|new location)", re.I)
REDIRECT_MAX_CHARS = 400  # a redirect stub's text (heading lines aside) is at most this long
# navigation bars: link-only lines repeated on every page (texinfo's "| [ << ] | [ < ] | [ Up ] |
# ... | [Contents] | [Index] | [ ? ] |", "Next: X, Previous: Y, Up: Z")
_MD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_NAV_TOKENS = frozenset({"<<", "<", ">", ">>", "?", "up", "top", "next", "prev", "previous", "contents", "index",
                         "home", "toc", "back", "forward", "about", "search", "table of contents"})
_NAV_LABELLED = re.compile(r"^(?:(?:next|previous|prev|up|home|contents|index)\s*:\s*[^,:]{1,80}?,?\s*){2,}$", re.I)


# --------------------------------------------------------------------------------------------
# words and vocabulary
# --------------------------------------------------------------------------------------------


def _prose(text: str) -> str:
    """The text without fenced code blocks and backtick spans (identifiers are not words)."""
    return _CODE_SPAN.sub(" ", _FENCE_BLOCK.sub(" ", text))


def _iter_raw(text: str):
    """``(raw, stripped)`` whitespace tokens, one at a time (the raw form says whether a line ended
    in ``-``): a list of every token of a 20 MB page cost ~25x the text in memory (issue 55)."""
    for line in text.split("\n"):  # a line's tokens at a time: str.split is ~2x faster than a regex
        for raw in line.split():
            t = raw.strip(_STRIP)
            if t:
                yield raw, t


def _tokens(text: str) -> list[str]:
    """Whitespace tokens with surrounding punctuation stripped (empty ones dropped)."""
    return [t for _, t in _iter_raw(text)]


def _is_word(token: str) -> bool:
    return token.isascii() and token.isalpha() and len(token) >= 2


def words(text: str) -> list[str]:
    """The lower-cased words of ``text`` as the checks count them (module docstring)."""
    return [t.lower() for t in _tokens(_prose(text)) if _is_word(t)]


@lru_cache(maxsize=4)
def load_dictionary(path: Path | None = DICTIONARY_PATH) -> frozenset[str] | None:
    """Lower-cased words of a word list (one a line; ``'s`` forms skipped), None when absent."""
    if path is None:
        return None
    try:
        raw = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    out = {w.strip().lower() for w in raw.split("\n") if w.strip() and "'" not in w}
    return frozenset(w for w in out if w.isalpha()) or None


def _vocabulary(per_doc: Sequence[Counter[str]], dictionary: frozenset[str] | None) -> frozenset[str]:
    df: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for counts in per_doc:
        df.update(counts.keys())
        total.update(counts)
    vocab = {w for w, n in df.items() if n >= 2}
    if len(per_doc) < SMALL_CORPUS_FILES:
        vocab |= {w for w, n in total.items() if n >= 3}
    if dictionary:
        vocab |= dictionary
    return frozenset(vocab)


# --------------------------------------------------------------------------------------------
# pages
# --------------------------------------------------------------------------------------------


def page_texts(doc: Document) -> list[tuple[int, int]]:
    """``(start, end)`` of each page of a converted PDF / PPTX (its page offsets); one span, the
    whole text, for every other document."""
    pages = doc.source.pages if doc.source is not None else ()
    if len(pages) < 2:
        return [(0, len(doc.text))]
    bounds = list(pages) + [len(doc.text)]
    return [(bounds[i], bounds[i + 1]) for i in range(len(pages)) if bounds[i + 1] > bounds[i]]


def _listing_line(line: str) -> bool:
    """A table-of-contents or index line: dot leaders, an entry ending in page numbers, an entry
    pointing at a numbered section, or a one-letter index heading."""
    s = line.strip()
    if _LEADERS.search(s):
        return True
    if s.startswith("|"):
        cells = [c.strip() for c in s.strip("|").split("|")]
        filled = [c for c in cells if c]
        if not filled:
            return False
        if len(filled) == 1 and len(filled[0]) <= 2:  # "| A | | |": an index letter
            return True
        return len(" ".join(filled).split()) <= 14 and _SECTION_REF.match(filled[-1]) is not None
    s = s.lstrip("-*+ ").strip()
    if len(s) <= 2:
        return bool(s) and not s.isdigit() or False
    n_words = len(s.split())
    if n_words > 14 or s.endswith((".", ":", ";", "?", "!")):
        return False
    return _PAGE_REFS.search(s) is not None or (_SECTION_REF.match(s) is not None and n_words <= 10)


def _nav_line(line: str) -> bool:
    """A navigation-bar line: table cells (or bracketed items) that are all navigation links
    (``[ << ]``, ``[ Up ]``, ``[Contents]``, ``[Index]``, ...; at least 2), or ``Next: X,
    Previous: Y, Up: Z``."""
    s = _MD_LINK.sub(lambda m: f"[{m.group(1)}]", line.strip())
    if _NAV_LABELLED.match(s):
        return True
    if s.startswith("|"):
        items = [c.strip() for c in s.strip("|").split("|")]
    else:
        items = re.findall(r"\[[^\]]*\]|\S+", s)
    items = [i for i in items if i]
    if len(items) < 2 or not all(i.startswith("[") and i.endswith("]") for i in items):
        return False
    return all(" ".join(i.strip("[]").split()).lower() in _NAV_TOKENS for i in items)


def navigation_spans(text: str) -> tuple[tuple[int, int], ...]:
    """Char spans of the navigation-bar lines of ``text`` (with the Markdown table rule that
    follows a navigation row: the converter's table header)."""
    out: list[tuple[int, int]] = []
    pos, after_nav = 0, False
    for line in text.split("\n"):
        end = pos + len(line)
        if _nav_line(line) or (after_nav and _TABLE_RULE.match(line.strip())):
            out.append((pos, end))
            after_nav = not _TABLE_RULE.match(line.strip())
        else:
            after_nav = False
        pos = end + 1
    return tuple(out)


def redirect_stub(doc: Document) -> str | None:
    """The sentence of a redirect stub (a short page whose text, heading lines aside, only points
    elsewhere: texinfo's ``The node you are looking for is at X.``), else None."""
    body = [ln.strip() for ln in doc.text.split("\n") if ln.strip() and not ln.lstrip().startswith("#")]
    text = " ".join(body)
    if not text or len(text) > REDIRECT_MAX_CHARS or len(body) > 3:
        return None
    return text if _REDIRECT.search(text) else None


def _boilerplate_page(text: str) -> bool:
    lines = [ln for ln in text.split("\n") if ln.strip() and not _TABLE_RULE.match(ln.strip())]
    if len(lines) < MIN_BOILERPLATE_LINES:
        return False
    hits = sum(1 for ln in lines if _listing_line(ln))
    return hits >= BOILERPLATE_SHARE * len(lines)


# --------------------------------------------------------------------------------------------
# garbled-text signals
# --------------------------------------------------------------------------------------------


def _known(w: str, vocab) -> bool:
    return w in vocab or (len(w) == 1 and w in _SHORT_OK)


def _glued(token: str, vocab) -> bool:
    """An unknown token made of two known words: camel-case (``aDocument``), digit-joined
    (``index0contains``) or run together (``viewwith``)."""
    m = _DIGIT_GLUE.match(token)
    if m:
        return _known(m.group(1).lower(), vocab) and _known(m.group(2).lower(), vocab)
    if not token.isalpha() or not token.isascii():
        return False
    parts = _CAMEL.split(token)
    if len(parts) == 2 and all(_known(p.lower(), vocab) for p in parts):
        return True
    w = token.lower()
    if len(w) < 6:
        return False
    return any(w[:i] in vocab and w[i:] in vocab for i in range(3, len(w) - 2))


def _split_pair(a: str, b: str, vocab) -> bool:
    """Two neighbouring words, at least one unknown, that are one word joined (``dele gation``)
    or two known words once the space moves by one or two letters (``an ypart``)."""
    if _known(a, vocab) and _known(b, vocab):
        return False
    joined = a + b
    if len(joined) >= 4 and joined in vocab:
        return True
    for k in (1, 2):  # the space one or two letters off; both words then of 3+ letters
        if len(a) + k >= 3 and len(b) - k >= 3 and a + b[:k] in vocab and b[k:] in vocab:
            return True
        if len(a) - k >= 3 and len(b) + k >= 3 and a[:-k] in vocab and a[-k:] + b in vocab:
            return True
    return False


@dataclass(frozen=True)
class DocQuality:
    """The checks' findings for one document (see the module docstring for each number)."""

    doc_id: str
    words: int
    unknown: float  # share of words in no vocabulary
    glued: int
    split: int
    pages: int  # pages assessed (1 for a document without page offsets)
    boilerplate_pages: tuple[int, ...] = ()  # 1-based
    examples: tuple[str, ...] = field(default=())  # a few glued / split words as printed
    distinct_broken: int = 0  # distinct glued / split forms (case-folded)
    # the vocabulary is broad enough for the unknown-share rule: a dictionary, or 20+ files
    # (without either, a clean page of a 6-file corpus has a third of its words "unknown")
    vocabulary_broad: bool = True
    page_spans: tuple[tuple[int, int], ...] = field(default=(), repr=False)
    redirect: str | None = None  # a redirect stub's text: the whole document is boilerplate
    navigation: tuple[tuple[int, int], ...] = field(default=(), repr=False)  # navigation-bar lines

    @property
    def broken_per_1000(self) -> float:
        return 1000.0 * (self.glued + self.split) / self.words if self.words else 0.0

    @property
    def garbled(self) -> bool:
        if self.words < MIN_WORDS:
            return False
        if self.vocabulary_broad and self.unknown >= MAX_UNKNOWN:
            return True
        return self.distinct_broken >= MIN_BROKEN and self.broken_per_1000 >= MAX_BROKEN_PER_1000

    @property
    def boilerplate(self) -> bool:
        """Every page is a table of contents or an index, or the document is a redirect stub:
        the per-document flag."""
        return self.redirect is not None or (bool(self.boilerplate_pages)
                                             and len(self.boilerplate_pages) == self.pages)

    def boilerplate_spans(self) -> tuple[tuple[int, int], ...]:
        """Char spans of the text on boilerplate pages and of navigation-bar lines (what an index
        could leave out), in text order."""
        return tuple(sorted([self.page_spans[p - 1] for p in self.boilerplate_pages] + list(self.navigation)))

    def warnings(self) -> list[str]:
        """One line per finding, e.g. ``text looks garbled: ...``; empty when none."""
        out = []
        if self.garbled:
            eg = ", ".join(repr(e) for e in self.examples)
            out.append(f"text looks garbled: {self.glued + self.split} glued or split words in {self.words:,} "
                       f"({self.broken_per_1000:.1f} per 1,000, limit {MAX_BROKEN_PER_1000:g}; e.g. {eg}); "
                       f"{self.unknown:.0%} of words in no dictionary nor 2+ files")
        if self.redirect is not None:
            text = self.redirect if len(self.redirect) <= 80 else self.redirect[:77] + "..."
            out.append(f"boilerplate: a redirect stub (its text only points elsewhere: {text!r})")
        elif self.boilerplate:
            out.append("boilerplate: a table of contents or an index (mostly dot leaders, page numbers, "
                       "section references)")
        elif self.boilerplate_pages:
            out.append(f"boilerplate pages (table of contents / index): {_ranges(self.boilerplate_pages)}")
        if self.navigation and self.redirect is None:
            out.append(f"boilerplate lines: {len(self.navigation)} navigation-bar lines ([ << ] [ Up ] [Contents] "
                       "...; DocQuality.boilerplate_spans gives them)")
        return out


def _ranges(pages: Sequence[int]) -> str:
    out, start, prev = [], pages[0], pages[0]
    for p in list(pages[1:]) + [None]:
        if p is not None and p == prev + 1:
            prev = p
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if p is not None:
            start = prev = p
    return ", ".join(out)


@dataclass(frozen=True)
class QualityReport:
    """The checks over one corpus: per-document findings and what the vocabulary was built from."""

    docs: tuple[DocQuality, ...]
    dictionary: str | None  # the word list used, or None (the corpus vocabulary alone)

    @property
    def flagged(self) -> tuple[DocQuality, ...]:
        return tuple(q for q in self.docs if q.warnings())

    def by_id(self) -> dict[str, DocQuality]:
        return {q.doc_id: q for q in self.docs}


def assess(docs: Iterable[Document], dictionary: frozenset[str] | None | Path = DICTIONARY_PATH) -> QualityReport:
    """Run the checks over ``docs`` (one corpus: the vocabulary is built from all of them).
    ``dictionary``: a word list's path (default: Debian's, used when installed), a set of words,
    or None for the corpus vocabulary alone."""
    docs = list(docs)
    source = None
    if isinstance(dictionary, Path):
        source = str(dictionary)
        dictionary = load_dictionary(dictionary)
        if dictionary is None:
            source = None
    elif dictionary is not None:
        source = f"{len(dictionary):,} given words"
    per_doc = [Counter(t.lower() for _, t in _iter_raw(_prose(d.text)) if _is_word(t)) for d in docs]
    vocab = _vocabulary(per_doc, dictionary)
    broad = dictionary is not None or len(docs) >= BROAD_CORPUS_FILES
    return QualityReport(tuple(_assess_one(d, vocab, broad) for d in docs), source)


class _DocVocabulary:
    """The corpus vocabulary plus the words one document uses 3+ times (no set copied per document)."""

    __slots__ = ("base", "own")

    def __init__(self, base: frozenset[str], own: Counter[str]) -> None:
        self.base, self.own = base, own

    def __contains__(self, word: object) -> bool:
        return word in self.base or self.own.get(word, 0) >= 3  # type: ignore[call-overload]


def _examples(groups: list[list[str]], n: int = 4) -> tuple[str, ...]:
    """Up to ``n`` distinct examples, the most telling kinds first (a split word, then a glued one)."""
    out: list[str] = []
    for group in groups:
        for e in group:
            if e.lower() not in {o.lower() for o in out}:
                out.append(e)
            if len(out) == n:
                return tuple(out)
    return tuple(out)


def _assess_one(doc: Document, corpus_vocab: frozenset[str], broad: bool) -> DocQuality:
    spans = page_texts(doc)
    bp = tuple(i + 1 for i, (a, b) in enumerate(spans) if _boilerplate_page(doc.text[a:b]))
    bp_set = set(bp)
    pages = [_prose(doc.text[a:b]) for i, (a, b) in enumerate(spans) if i + 1 not in bp_set]
    # a word the document itself uses 3+ times is its vocabulary (a compound term such as
    # "netmask"); a converter's broken spacing rarely repeats one broken form that often
    own = Counter(t.lower() for page in pages for _, t in _iter_raw(page) if _is_word(t))
    vocab = _DocVocabulary(corpus_vocab, own)
    n_words = unknown = glued = split = 0
    examples: list[list[str]] = [[], [], []]  # split, camel / digit glued, run-together glued
    forms: set[str] = set()
    for page in pages:
        prev: str | None = None  # the previous token if it was a word not ending a line in "-"
        for raw, t in _iter_raw(page):
            if len(t) == 1 and t.isascii() and t.isalpha():
                # not a word, but maybe the first letter of one ("w hich", "v ersion")
                prev = None if raw.endswith("-") else t
                continue
            if not _is_word(t):
                if _DIGIT_GLUE.match(t) and _glued(t, vocab):
                    glued += 1
                    forms.add(t.lower())
                    examples[1].append(t)
                prev = None
                continue
            w = t.lower()
            n_words += 1
            hyphen = raw.endswith("-")  # "man-" at a line end: printed hyphenation, not a split
            if w not in vocab:
                unknown += 1
                if _glued(t, vocab):
                    glued += 1
                    forms.add(w)
                    examples[1 if _CAMEL.search(t) else 2].append(t)
                    prev = None
                    continue
            if prev is not None and t.islower() and _split_pair(prev.lower(), w, vocab):
                split += 1
                forms.add(f"{prev.lower()} {w}")
                examples[0].append(f"{prev} {t}")
                prev = None
                continue
            prev = None if hyphen else t
    return DocQuality(doc_id=doc.doc_id, words=n_words, unknown=unknown / n_words if n_words else 0.0,
                      glued=glued, split=split, pages=len(spans), boilerplate_pages=bp,
                      examples=_examples(examples), distinct_broken=len(forms), vocabulary_broad=broad,
                      page_spans=tuple(spans), redirect=redirect_stub(doc), navigation=navigation_spans(doc.text))
