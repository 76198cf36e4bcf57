"""Labelling in the order that settles a decision, and the rule that says it is settled.

``rag-exp golden label --decide A B`` compares two runs on one metric. Its pool is every passage
unjudged in either run's cut-off (:mod:`rag_experiments.tracking.pool`); the numbers come from
:mod:`rag_experiments.evaluation.bounds`. This module holds what does not depend on where they come
from (after Carterette, Allan and Sitaraman's minimal test collections, SIGIR 2006: judge what
discriminates between the systems, stop when the ordering is certain):

* **the order** (:func:`order`): the passage whose verdict alone moves the paired Δ most first (its
  rank-discounted weight in A minus in B: a passage one side ranks high and the other does not comes
  first, one both rank alike comes last; when one end of the range alone keeps the decision open, the
  passages that end counts against the leader first, but for the confident rule on MRR:
  :func:`favoured_side`), then the better rank, then case and span for a stable order; the
  confident rule orders by the weight times how uncertain the verdict still is, and offers early one
  passage per rank band and side drawn at random where a label there would teach the model most (the
  tracker's ``order_by="learn-sampled"``);
  the copies of one text in a case are one offer (:func:`one_per_text`), their verdict written to each;
* **the decision** (:func:`outcome`): A ahead / B ahead when the paired t-test on the per-case
  differences is significant at ``alpha`` (two-sided), else a tie;
* **the stopping rules**: ``certain`` (:func:`settle`): the per-case Δ at its lowest over the unjudged
  passages' verdicts and at its highest give the same outcome. Every assignment of verdicts gives
  per-case differences between those two ends, so the mean Δ cannot leave the range between them; a
  tie at both ends means neither end's Δ clears its interval. ``confident`` (the default,
  :mod:`.decide_stop`): the same outcome in at least 99% of seeded draws of the unjudged verdicts, each
  relevant at the rate the judged pool passages of its rank band and side show (a Beta prior: a cold
  start is uncertain). :attr:`Settling.declared` is the decision either rule declares; the replay
  (``tools/label_replay.py``) measures how often it differs from the full pool's.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable, Iterable, Sequence

from scipy import stats as sps

from ..stats.shown import p_eq
from .decide_stop import Confidence, cell_text
from .fuzzy import tokenize
from .golden_file import GoldenFile
from .normalise import normalised
from .records import Case, Judgement
from .resolve import GoldenSet, resolve
from .same_text import NEAR_DUPLICATE, near_duplicate

ALPHA = 0.05
SKIP, QUIT = 0, -1  # what a labelling step returns besides the number of verdicts it recorded


@dataclass(frozen=True)
class Candidate:
    """A passage to label for the decision: where each run ranks it and what its verdict can do."""

    case_id: str
    key: str  # doc_id:start-end
    weight: float  # how far its verdict alone moves the mean Δ
    rank_a: int | None
    rank_b: int | None
    text: str = ""
    copies: tuple[str, ...] = ()  # keys of the same text in this case: one verdict for all
    # the model cell it was drawn from when the learn-sampled order offers it early to learn that cell's
    # rate (decide_stop.learning_values); None: offered for what its own verdict can move
    learns: int | None = None

    def why(self, a: str, b: str, metric: str) -> str:
        """The CSV's ``why`` column: the ranks and the weight (and, drawn to learn a cell, which)."""
        ra = f"rank {self.rank_a} in {a}" if self.rank_a else f"not in {a}'s cut-off"
        rb = f"rank {self.rank_b} in {b}" if self.rank_b else f"not in {b}'s cut-off"
        copies = f"; {len(self.copies)} copy(ies) get the same verdict" if self.copies else ""
        learns = (f"; drawn at random from {cell_text(self.learns, a, b)}, to learn how often they are relevant"
                  if self.learns is not None else "")
        return f"{ra}, {rb}: its verdict moves {metric} Δ by up to {self.weight:.4f}{copies}{learns}"


def order(candidates: Iterable[Candidate], favour: str | None = None,
          value: Callable[[Candidate], float] | None = None) -> list[Candidate]:
    """By weight (or ``value``), then best rank. ``favour`` ("A" or "B"): that side's passages first
    (only it ranks them), then the shared ones, then the other side's (:func:`favoured_side` says
    which). ``value``: what the confident rule expects the verdict to settle, instead of the weight (the
    tracker's ``order_by``: spread, the weight times sqrt(p (1 - p)) of the passage's estimated rate; or
    learn-sampled, the default, and learn, measured and not adopted: :func:`.decide_stop.learning_values`)."""
    worth = value or (lambda c: c.weight)

    def best(c: Candidate) -> int:
        return min(r for r in (c.rank_a, c.rank_b) if r) if (c.rank_a or c.rank_b) else 10**9

    def side(c: Candidate) -> int:
        if favour is None:
            return 0
        mine, theirs = (c.rank_a, c.rank_b) if favour == "A" else (c.rank_b, c.rank_a)
        return 0 if mine and not theirs else (2 if theirs and not mine else 1)

    return sorted(candidates, key=lambda c: (side(c), -round(worth(c), 12), best(c), c.case_id, c.key))


def favoured_side(settling: Settling) -> str | None:
    """Whose passages to label first. When only one end of the range keeps the decision open, the
    passages that end counts as relevant against the leader are the ones to read: the lowest Δ
    (A - B) takes B's unjudged passages as YES and A's as NO, so when it is the open end, B's
    passages first (most unjudged passages are not relevant, and each NO on one raises that end);
    the highest Δ: A's first. Both ends open (or settled): None, by weight alone. The confident rule
    on MRR does not use it (the tracker's ``state`` says why)."""
    if settling.settled:
        return None
    if settling.now.winner == settling.high.winner != settling.low.winner:
        return "B"
    if settling.now.winner == settling.low.winner != settling.high.winner:
        return "A"
    return None


def text_groups(candidates: Sequence[Candidate]) -> list[int]:
    """Each candidate's group as labelling counts passages (in the given order): the index, among the
    groups' first candidates, of its group's first. One group: the same case and the same text once
    normalised, or a near-duplicate (:func:`same_passage`) of a group's first in that case. The one
    grouping of the offers (:func:`one_per_text`) and of the confident rule's draws
    (``tracking.decide_tracker``), so a verdict the loop applies to a group is one draw too."""
    groups: list[int] = []
    firsts: list[Candidate] = []
    at_text: dict[tuple[str, str], int] = {}
    of_case: dict[str, list[int]] = {}
    for c in candidates:
        slot = (c.case_id, normalised_text(c.text) if c.text else c.key)
        at = at_text.get(slot)
        if at is None and c.text:
            at = next((i for i in of_case.get(c.case_id, ()) if firsts[i].text and same_passage(firsts[i].text, c.text)),
                      None)
        if at is None:
            at = len(firsts)
            of_case.setdefault(c.case_id, []).append(at)
            firsts.append(c)
        at_text[slot] = at
        groups.append(at)
    return groups


def one_per_text(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Keep the first of each case's passages that labelling counts as one passage (in the given order):
    the same text once normalised, or a near-duplicate (:func:`.same_text.near_duplicate`, token
    similarity >= 0.95 with the same identifiers), the grouping the terminal loop and the CSV export
    offer (:func:`.hand_label.plan_hand_labelling`), so "left" counts the rows an export writes. The
    others become its ``copies`` and their weights add to its own."""
    candidates = list(candidates)
    kept: list[Candidate] = []
    for c, at in zip(candidates, text_groups(candidates)):
        if at == len(kept):
            kept.append(c)
            continue
        first = kept[at]
        kept[at] = Candidate(first.case_id, first.key, first.weight + c.weight, first.rank_a or c.rank_a,
                             first.rank_b or c.rank_b, first.text, (*first.copies, c.key))
    return kept


@lru_cache(maxsize=262144)
def same_passage(a: str, b: str) -> bool:  # asked again for the same passages after every verdict
    """Whether labelling counts two of a case's passages as one: a near-duplicate (the same text
    once normalised is one too)."""
    ba, bb = _bag(a), _bag(b)
    size = sum(ba.values()) + sum(bb.values())
    # the tokens both hold bound the similarity (matched tokens are among them): most pairs of a case
    # end here, without the sequence match (8.6 s -> 0.9 s on 230 cases of 12 unlike passages)
    if size and 2 * sum((ba & bb).values()) / size < NEAR_DUPLICATE and normalised_text(a) != normalised_text(b):
        return False
    return near_duplicate(a, b) is not None


@lru_cache(maxsize=65536)
def _bag(text: str) -> Counter:
    return Counter(tokenize(text)[0])


@lru_cache(maxsize=65536)
def normalised_text(text: str) -> str:  # the loop reads the same passages again after every verdict
    return normalised(text)[0]


@dataclass(frozen=True)
class Outcome:
    winner: str  # "A" | "B" | "tie"
    delta: float
    p: float
    # the t interval of Δ at 1 - alpha (the test's own): nan when undefined (one case, or all alike)
    ci: tuple[float, float] = (math.nan, math.nan)

    def text(self, a: str = "A", b: str = "B", interval: bool = False) -> str:
        """``B ahead (Δ-0.120, p=0.031)``; ``interval``: with Δ's interval, ``Δ-0.120 [-0.230, -0.010]``."""
        p = _p(self.p)
        ci = (f" [{self.ci[0]:+.3f}, {self.ci[1]:+.3f}]" if interval and not math.isnan(self.ci[0]) else "")
        if self.winner == "tie":
            return f"no significant difference (Δ{self.delta:+.3f}{ci}, {p})"
        return f"{a if self.winner == 'A' else b} ahead (Δ{self.delta:+.3f}{ci}, {p})"


def outcome(diffs: Sequence[float], alpha: float = ALPHA) -> Outcome:
    """The decision the per-case differences a - b give: a paired t-test, two-sided."""
    n = len(diffs)
    if n == 0:
        return Outcome("tie", 0.0, 1.0)
    mean = math.fsum(diffs) / n
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else 0.0
    ci = (math.nan, math.nan)
    if sd == 0.0:
        p = 1.0 if mean == 0.0 else 0.0
    else:
        p = float(2 * sps.t.sf(abs(mean) / (sd / math.sqrt(n)), n - 1))
        half = float(sps.t.ppf(1 - alpha / 2, n - 1)) * sd / math.sqrt(n)
        ci = (mean - half, mean + half)
    winner = "tie" if p >= alpha else ("A" if mean > 0 else "B")
    return Outcome(winner, mean, p, ci)


# The confident rule settles only while more than this share of the pool is unjudged. On the git-doc
# pair (160 passages, full pool a tie at p=0.058) one random order of ten had it declare "hybrid ahead"
# settled with P 0.996 after 149 labels: at the end of a small pool the decision rests on a few
# passages' modelled rates, and labelling them costs at most this share of the pool. The demo's and
# Cranfield's replays settle with 17-90% of the pool still unjudged: unchanged.
TAIL_SHARE = 0.10


def in_tail(left: int, judged: int) -> bool:
    """Whether ``left`` unjudged passages are the pool's last TAIL_SHARE (the pool: ``judged`` + ``left``)."""
    return 0 < left <= TAIL_SHARE * (judged + left)


@dataclass(frozen=True)
class Settling:
    now: Outcome  # unjudged passages as misses (what compare shows)
    low: Outcome  # every per-case Δ at its lowest
    high: Outcome  # at its highest
    confidence: Confidence | None = None  # the confident rule's reading (None: --stop certain, or certain)
    # unjudged passages left when they are the pool's last TAIL_SHARE (0: more are left): there the
    # confident rule does not settle, the rest is labelled (see TAIL_SHARE)
    tail: int = 0

    @property
    def certain(self) -> bool:
        """The worst-case rule: the same decision at both ends of every per-case Δ."""
        return self.low.winner == self.high.winner

    @property
    def settled(self) -> bool:
        return self.certain or (self.confidence is not None and self.confidence.settled and not self.tail)

    @property
    def declared(self) -> str:
        """The decision the rule declares (or would, once settled): "A", "B" or "tie"."""
        if self.certain or self.confidence is None:
            return self.low.winner if self.certain else self.now.winner
        return self.confidence.winner

    def text(self, a: str = "A", b: str = "B") -> str:
        ends = (f"lowest Δ{self.low.delta:+.3f}, {_p(self.low.p)}; highest Δ{self.high.delta:+.3f}, "
                f"{_p(self.high.p)}")
        if self.certain:
            return (f"settled (rule: certain): {self.low.text(a, b).split(' (')[0]} whatever this pool's unjudged "
                    f"passages turn out to be ({ends})")
        worst = (f"with every unjudged passage against {a} it would be {self.low.text(a, b)}, "
                 f"with every one for {a} {self.high.text(a, b)}")
        c = self.confidence
        if c is None:
            return f"not settled: {worst}"
        said = said_as(c.winner, a, b)
        sure = f"P({said}) = {c.probability:.3f} ± {c.error:.3f} over {c.draws} draws of the unjudged verdicts"
        if c.settled and self.tail:
            return (f"not settled: {sure}, but only {self.tail} passage(s) are left, the pool's last "
                    f"{TAIL_SHARE:.0%}: they are labelled, not modelled; {worst}")
        if c.settled:
            return f"settled (rule: confident, level {c.level:g}): {said}, {sure}; the worst case is still open: {worst}"
        return f"not settled: {sure}, below {c.level:g}; {worst}"


def said_as(winner: str, a: str, b: str) -> str:
    return {"A": f"{a} ahead", "B": f"{b} ahead", "tie": "no significant difference"}[winner]


def _p(p: float, alpha: float = ALPHA) -> str:
    return p_eq(p, alpha)  # four places near α


def settle(now: Sequence[float], low: Sequence[float], high: Sequence[float], alpha: float = ALPHA) -> Settling:
    return Settling(outcome(now, alpha), outcome(low, alpha), outcome(high, alpha))


def without_judgements(path, keep: str = "all") -> GoldenSet:
    """The golden file as it was before any verdict: its judgements taken away (with ``keep="first"``
    each case's best-graded relevant span only, for a benchmark whose qrels are all evidence). Its
    views tell which passages of a run's cut-off are pool passages (unjudged there)."""
    kept = []
    for r in GoldenFile(path).read_records():
        if isinstance(r, Judgement):
            continue
        if keep == "first" and isinstance(r, Case) and r.evidence:
            best = max(range(len(r.evidence)), key=lambda i: (r.evidence[i][1], -i))
            r = replace(r, evidence=(r.evidence[best],), groups=(r.groups[best],) if r.groups else r.groups)
        kept.append(r)
    return resolve(tuple(kept), GoldenFile(path).path, "start")


# -- the loop -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class State:
    """What the decision looks like now: its outcomes, the bounds line, what is left to label."""

    settling: Settling
    bounds_line: str  # DeltaBounds.text
    candidates: tuple[Candidate, ...]  # ordered, one per text
    names: tuple[str, str] | None = None  # the pair ``settling`` is about, when not the loop's (a sweep)
    # the pool passages of these runs judged now, by anyone and any route (a CSV import, an earlier
    # session, the judge): None when the caller does not count them (the replay)
    judged: int | None = None
    # what a settled decision leaves out, said with the stop (recall and nDCG: passages judged relevant
    # outside both cut-offs move Δ: evaluation.bounds.beyond_cut_off)
    note: str = ""


@dataclass
class LoopReport:
    labels: int = 0
    stopped: str = ""  # settled | budget | no passage left | quit
    last: State | None = None


def step_line(state: State, done: int, a: str = "A", b: str = "B", before: int | None = None) -> str:
    """``done``: this session's labels; shown when the state does not count the judged pool passages.
    Else the labels done are every pool passage judged (a CSV import counts at once), with ``before``
    (the count when the session began) beside it."""
    a, b = state.names or (a, b)
    left = len(state.candidates)
    moving = sum(1 for c in state.candidates if c.weight > 0)
    return (f"labels done {labels_done(state, done, before)}, left {left} ({moving} can move Δ); "
            f"{state.bounds_line}; decision now: {state.settling.now.text(a, b, interval=True)}; "
            f"{state.settling.text(a, b)}")


def labels_done(state: State, done: int, before: int | None = None) -> str:
    if state.judged is None:
        return str(done)
    return f"{state.judged} ({state.judged if before is None else before} before this session)"


def stop_reason(settling: Settling, a: str = "A", b: str = "B") -> str:
    """Which rule settled the decision, and how sure it is."""
    said = said_as(settling.declared, a, b)
    if settling.certain:
        return f"rule certain: {said} whatever they turn out to be"
    c = settling.confidence
    assert c is not None
    return f"rule confident: {said} with probability {c.probability:.3f} >= {c.level:g}"


def run_loop(current: Callable[[], State], label: Callable[[Candidate], int], *, budget: int | None,
             say: Callable[[str], None], a: str = "A", b: str = "B") -> LoopReport:
    """Offer the best candidate, re-read the state, until settled, the budget is spent, nothing is
    left, or ``label`` says quit. ``label`` records verdicts from the first candidate on (a person: that
    one and its copies; a judge: a round of several) and returns how many (:data:`SKIP`: the first is
    not offered again this session; :data:`QUIT`)."""
    report = LoopReport()
    skipped: set[tuple[str, str]] = set()
    before: int | None = None  # the judged pool passages when the session began
    while True:
        state = current()
        if skipped:
            state = replace(state, candidates=tuple(c for c in state.candidates if (c.case_id, c.key) not in skipped))
        before = state.judged if before is None else before
        report.last = state
        say(step_line(state, report.labels, a, b, before))
        if state.settling.settled:
            report.stopped = "settled"
            reason = stop_reason(state.settling, *(state.names or (a, b)))
            done = (f"{report.labels} label(s)" if state.judged is None else
                    f"{state.judged} label(s), {report.labels} of them this session")
            say(f"stop: the decision is settled after {done} ({reason}); "
                f"{len(state.candidates)} passage(s) left unlabelled" + (f"; {state.note}" if state.note else ""))
            return report
        if not state.candidates:
            report.stopped = "no passage left"
            say("stop: no passage left to offer (the rest were skipped), and the decision is not settled")
            return report
        if budget is not None and report.labels >= budget:
            report.stopped = "budget"
            say(f"stop: the budget of {budget} label(s) is spent; not settled")
            return report
        first = state.candidates[0]
        answer = label(first)
        if answer == QUIT:
            report.stopped = "quit"
            return report
        if answer == SKIP:
            skipped.add((first.case_id, first.key))
            continue
        report.labels += answer
