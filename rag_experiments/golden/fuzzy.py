"""Where a labelled quote is in a (changed) document: text in, :class:`Match` out; no I/O and no
golden records (:mod:`.anchoring` turns matches into ``anchor`` records).

Approximate matching (``fuzzy``), standard library only (``difflib``), on tokens: ``\\w+`` words
and single punctuation characters, whitespace ignored (re-flowed text is not a change):

* seeds: the quote's lower-cased token 3-grams looked up in an index of the document's 3-grams
  (built once per document); each hit votes for an alignment (document token index - quote
  token index); 3-grams occurring more than 50 times in the document are ignored; a short quote
  whose every 3-gram was edited falls back to single tokens. Votes within 20% of the quote's
  length are clustered; the 3 best-voted clusters, plus the old offset, are candidate regions;
* each region (alignment -20% .. alignment + length +20%) is aligned to the quote with
  ``difflib.SequenceMatcher(autojunk=False)``; its matching blocks (>= 3 tokens), extrapolated to
  the quote's first and last token, give a window, refined by trying starts and then ends within
  +-5% of the quote's length (window length always within the quote's length +-20%);
* a window must contain every identifier of the labelled quote (inline `code` and snake_case
  words, :func:`guard_tokens`), so a near-duplicate passage about another identifier (the ``IN``
  paragraph next to the ``NOT IN`` one) is never taken for it;
* similarity = ``SequenceMatcher.ratio()`` over tokens = 2 * matched / (window + quote tokens),
  about 1 - (changed tokens / quote tokens); the best window wins (ties: nearest the old
  offset); when a second, non-overlapping window scores within 0.02 of it (and above the
  threshold) the match is ambiguous: ``stale``, not a guess.

Threshold 0.85 (:data:`FUZZY_THRESHOLD`): about 15% of the passage's tokens may change (a
reworded clause in a typical 60-token passage, a fixed typo, a changed default value); more
than that and the passage may now say something else, so a human must judge it again (``stale``;
``rag-exp golden check`` prints the fix). Measured on the demo golden set (550 spans): with one
word replaced in each of the 472 non-overlapping labelled passages (and a paragraph inserted at
the top of every page), 421 were re-anchored to exactly the edited passage, none to a wrong
window, and 51 went ``stale`` by design (49: the replaced word was part of an identifier; 2:
ambiguous or a 5-token quote below 0.85); with every labelled passage deleted, 467 of 472 went
``stale`` and 5 (1%) were taken for a near-duplicate sibling (similarity 0.86-0.98, e.g.
"timing of database I/O" for "timing of WAL I/O"): ``rag-exp golden check`` lists fuzzy anchors
for review for that reason.

Placing a team's passages (:mod:`rag_experiments.retrieval.placement`) uses the same matcher with
two options the golden set does not pass (its behaviour is unchanged): no old offset
(``old_start=None``: no region is tried where the quote used to be, there is none) and a work
``budget``: the token comparisons it may spend (each longest-match search inside
``SequenceMatcher`` costs the product of the two token ranges it searches); past it, the search
stops and the answer is ``none`` ("work bound"). A bound on work, not on a clock, so a loaded machine places the same
passages as an idle one, and a passage that is in no document costs a bounded time.
The index holds the document's 3-grams and, for the single-token fallback, its token positions,
both built once per document (the fallback used to rebuild the latter on every call).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from difflib import SequenceMatcher

FUZZY_THRESHOLD = 0.85
LENGTH_SLACK = 0.2  # candidate windows: the quote's length +-20%
GRAM = 3
MAX_GRAM_HITS = 50
MAX_CLUSTERS = 3
MIN_BLOCK = 3
AMBIGUITY_MARGIN = 0.02  # two fuzzy windows closer than this: do not guess, mark stale
_TOKEN = re.compile(r"\w+|[^\w\s]")
_CODE = re.compile(r"`([^`\n]+)`")
_IDENT = re.compile(r"[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+")


@dataclass(frozen=True)
class Match:
    status: str  # in_place | moved | fuzzy | none
    start: int = -1
    end: int = -1
    similarity: float = 0.0
    note: str = ""


def tokenize(text: str) -> tuple[list[str], list[int], list[int]]:
    """Tokens (``\\w+`` words and single punctuation characters; whitespace dropped) with their
    char starts and ends."""
    toks, starts, ends = [], [], []
    for m in _TOKEN.finditer(text):
        toks.append(m.group())
        starts.append(m.start())
        ends.append(m.end())
    return toks, starts, ends


def similarity(a: str, b: str) -> float:
    """Token-level ``SequenceMatcher.ratio()``: 2 * matched tokens / (tokens of a + tokens of b).
    Whitespace is ignored (re-flowed text scores 1.0); 1.0 also for identical strings."""
    if a == b:
        return 1.0
    ta, tb = tokenize(a)[0], tokenize(b)[0]
    if not ta and not tb:
        return 1.0
    return SequenceMatcher(None, ta, tb, autojunk=False).ratio()


class DocIndex:
    """A document's tokens with a lazily built token-3-gram index (for fuzzy seeds)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens, self.starts, self.ends = tokenize(text)
        self._grams: dict[tuple[str, ...], list[int]] | None = None
        self._unigrams: dict[str, list[int]] | None = None

    def grams(self) -> dict[tuple[str, ...], list[int]]:
        """Lower-cased token 3-gram -> token indexes where it starts."""
        if self._grams is None:
            low = [t.lower() for t in self.tokens]
            grams: dict[tuple[str, ...], list[int]] = {}
            for i in range(len(low) - GRAM + 1):
                grams.setdefault(tuple(low[i:i + GRAM]), []).append(i)
            self._grams = grams
        return self._grams

    def unigrams(self) -> dict[str, list[int]]:
        """Lower-cased token -> token indexes where a 3-gram starting with it starts (the positions
        the single-token fallback votes with), built once."""
        if self._unigrams is None:
            uni: dict[str, list[int]] = {}
            for g, ps in self.grams().items():
                uni.setdefault(g[0], []).extend(ps)
            self._unigrams = uni
        return self._unigrams


def _find_all(text: str, quote: str) -> list[int]:
    out, i = [], text.find(quote)
    while i >= 0:
        out.append(i)
        i = text.find(quote, i + 1)
    return out


def _seeds(index: DocIndex, qtoks: list[str], old_tok: int | None) -> list[int]:
    """Candidate alignments (token index of the quote's first token), best-voted first."""
    low = [t.lower() for t in qtoks]
    grams = index.grams()
    votes: list[int] = []
    for n in (GRAM, 1):  # 3-grams; for a short quote whose every 3-gram was edited, single tokens
        if n == 1:
            uni = index.unigrams()
        for i in range(len(low) - n + 1):
            hits = grams.get(tuple(low[i:i + n]), []) if n == GRAM else uni.get(low[i], [])
            if 0 < len(hits) <= MAX_GRAM_HITS:
                votes.extend(p - i for p in hits)
        if votes:
            break
    if not votes:
        return [] if old_tok is None else [old_tok]
    votes.sort()
    tol = max(2, int(len(qtoks) * LENGTH_SLACK))
    clusters: list[list[int]] = [[votes[0]]]
    for v in votes[1:]:
        if v - clusters[-1][-1] <= tol:
            clusters[-1].append(v)
        else:
            clusters.append([v])
    near = 0 if old_tok is None else old_tok
    centres = sorted(((len(c), c[len(c) // 2]) for c in clusters), key=lambda nc: (-nc[0], abs(nc[1] - near), nc[1]))
    chosen = [c for _, c in centres[:MAX_CLUSTERS]]
    if old_tok is not None and all(abs(c - old_tok) > tol for c in chosen):
        chosen.append(old_tok)  # a passage reworded in place: always try the old offset too
    return chosen


def guard_tokens(quote: str) -> frozenset[str]:
    """The labelled quote's identifiers: inline code (`...`) and snake_case words. A fuzzy window
    must contain every one of them, so a near-duplicate passage about another identifier (an
    ``IN`` paragraph next to the ``NOT IN`` one, the neighbouring row of an error-code table) is
    never taken for the labelled one."""
    return frozenset(_CODE.findall(quote)) | frozenset(_IDENT.findall(quote))


class WorkBound(Exception):
    """A fuzzy search spent its budget."""


class _Budgeted(SequenceMatcher):
    """A SequenceMatcher that charges each longest-match search (what ``get_matching_blocks`` and
    ``ratio`` spend their time in) the product of its two ranges, and stops past ``left``."""

    def __init__(self, left: int) -> None:
        super().__init__(None, autojunk=False)
        self.left = left

    def find_longest_match(self, alo=0, ahi=None, blo=0, bhi=None):
        ahi = len(self.a) if ahi is None else ahi
        bhi = len(self.b) if bhi is None else bhi
        self.left -= (ahi - alo) * (bhi - blo)
        if self.left < 0:
            raise WorkBound
        return super().find_longest_match(alo, ahi, blo, bhi)


def fuzzy_find(index: DocIndex, quote: str, old_start: int | None, budget: int | None = None) -> list[Match]:
    """The most similar window per candidate region, best first (see the module docstring).

    Windows start and end on token boundaries; only windows holding every
    :func:`guard_tokens` identifier of ``quote`` are eligible. ``old_start=None``: no old offset
    (no region tried there). ``budget``: token comparisons it may spend (see the module
    docstring), then it raises :class:`WorkBound`."""
    has_old = old_start is not None
    old_start = old_start or 0
    qtoks = tokenize(quote)[0]
    n, ntok = len(qtoks), len(index.tokens)
    if not n or not ntok:
        return []
    slack = max(1, int(n * LENGTH_SLACK))
    min_len, max_len = max(1, n - slack), n + slack
    guard = guard_tokens(quote)
    old_tok = min(bisect.bisect_left(index.starts, old_start), ntok - 1) if has_old else None
    text, toks = index.text, index.tokens
    sm = SequenceMatcher(None, autojunk=False) if budget is None else _Budgeted(budget)
    sm.set_seq2(qtoks)
    found: list[Match] = []
    tried: set[tuple[int, int]] = set()
    for align in _seeds(index, qtoks, old_tok):
        r_lo, r_hi = max(0, align - slack), min(ntok, align + n + slack)
        sm.set_seq1(toks[r_lo:r_hi])
        blocks = [b for b in sm.get_matching_blocks() if b.size >= MIN_BLOCK] or \
            [b for b in sm.get_matching_blocks() if b.size]
        if not blocks:
            continue
        first, last = blocks[0], blocks[-1]
        lo = max(0, r_lo + first.a - first.b)  # extrapolated to the quote's first and last token
        hi = min(ntok, r_lo + last.a + last.size + (n - last.b - last.size))
        radius = max(1, n // 20)

        best, best_i = Match("none"), lo

        def score(i: int, j: int) -> None:
            nonlocal best, best_i
            if not (0 <= i < j <= ntok and min_len <= j - i <= max_len) or (i, j) in tried:
                return
            tried.add((i, j))
            s, e = index.starts[i], index.ends[j - 1]
            if guard and any(tok not in text[s:e] for tok in guard):
                return
            sm.set_seq1(toks[i:j])
            if sm.real_quick_ratio() < best.similarity or sm.quick_ratio() < best.similarity:
                return
            sim = sm.ratio()
            if sim > best.similarity or (sim == best.similarity and best.status != "none"
                                         and abs(s - old_start) < abs(best.start - old_start)):
                best, best_i = Match("fuzzy", s, e, sim), i

        # coordinate search: the best start with the end fixed, then the best end for that start
        for i in sorted(range(lo - radius, lo + radius + 1), key=lambda x: abs(x - lo)):
            score(i, hi)
        for j in sorted(range(hi - radius, hi + radius + 1), key=lambda x: abs(x - hi)):
            score(best_i, j)
        if best.status != "none":
            found.append(_pad(best, text, quote))
    found.sort(key=lambda m: (-m.similarity, abs(m.start - old_start), m.start))
    return found


def _pad(m: Match, text: str, quote: str) -> Match:
    """Token windows have no outer whitespace: give back the whitespace the labelled quote had."""
    lead = len(quote) - len(quote.lstrip())
    trail = len(quote) - len(quote.rstrip())
    s, e = m.start, m.end
    while lead and s > 0 and text[s - 1] == quote[lead - 1]:
        s, lead = s - 1, lead - 1
    k = len(quote) - trail
    while trail and e < len(text) and text[e] == quote[k]:
        e, k, trail = e + 1, k + 1, trail - 1
    return Match(m.status, s, e, m.similarity, m.note)


def locate(index: DocIndex, quote: str, old_start: int | None, labelled: str, threshold: float,
           budget: int | None = None) -> Match:
    """Where ``quote`` (the effective span's text) is in the document now.

    ``labelled`` is the quote as labelled: the similarity of any new window is measured
    against it, and a window whose text differs from it is ``fuzzy``. ``old_start=None``: the
    quote had no place before; ``budget``: see :func:`fuzzy_find` (spent: ``none``, noted).
    """
    text = index.text
    has_old = old_start is not None
    old_start = old_start or 0
    if has_old and text[old_start:old_start + len(quote)] == quote:
        return _graded(Match("in_place", old_start, old_start + len(quote), 1.0), text, labelled)
    for q in dict.fromkeys((quote, labelled)):  # the current text first, then the labelled one
        hits = _find_all(text, q)
        if hits:
            pos = min(hits, key=lambda p: (abs(p - old_start), p))
            note = "" if len(hits) == 1 else (
                f"quote found {len(hits)} times (at {', '.join(map(str, hits[:8]))}); "
                f"chose the occurrence nearest the old offset {old_start}")
            m = _graded(Match("moved", pos, pos + len(q), 1.0, note), text, labelled)
            if m.similarity < threshold:  # an earlier fuzzy text, further from the label than allowed now
                return Match("none", m.start, m.end, m.similarity, f"{m.note}; similarity {m.similarity:.3f} "
                             f"< threshold {threshold}")
            return m
    try:
        found = fuzzy_find(index, labelled, old_start if has_old else None, budget)
    except WorkBound:
        return Match("none", note=f"approximate search stopped at its work bound ({budget:,} token comparisons)")
    if not found:
        return Match("none")
    m = found[0]
    if m.similarity < threshold:
        return Match("none", m.start, m.end, m.similarity,
                     f"best approximate match {m.similarity:.3f} < threshold {threshold} at {m.start}..{m.end}")
    rival = next((r for r in found[1:] if r.end <= m.start or r.start >= m.end), None)
    if rival is not None and rival.similarity >= threshold and m.similarity - rival.similarity < AMBIGUITY_MARGIN:
        return Match("none", m.start, m.end, m.similarity,
                     f"ambiguous: two passages match almost equally ({m.similarity:.3f} at {m.start}..{m.end}, "
                     f"{rival.similarity:.3f} at {rival.start}..{rival.end})")
    return Match("fuzzy", m.start, m.end, m.similarity, f"approximate match, similarity {m.similarity:.3f}")


def _graded(m: Match, text: str, labelled: str) -> Match:
    """An exact hit of an earlier fuzzy text is still fuzzy with respect to the labelled quote."""
    window = text[m.start:m.end]
    if window == labelled:
        return m
    return Match(m.status if m.status == "in_place" else "fuzzy", m.start, m.end, similarity(window, labelled),
                 (m.note + "; " if m.note else "") + "text differs from the labelled quote")
