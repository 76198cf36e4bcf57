"""How far unjudged hits could still move a number: each run's metric and the paired Δ, bounded.

An unjudged hit counts as a miss (:mod:`.metrics`), so every value is the *low-labels* reading of a
run. Which of its unjudged hits are relevant is unknown; this module bounds what they could do.

**Convention** (what "every unjudged hit were relevant" means):

* Only hits inside the metric's cut-off vary (the top 5 for recall@5, the top 10 for nDCG@10); an
  unjudged passage is one that no judgement of the case covers by the overlap rule
  (:func:`.relevance.credit`'s ``judged``), is not credited, and does not repeat an earlier hit.
* A passage that turns out relevant counts as **YES (grade 2)** and becomes a **new relevant unit of
  the case**: it joins recall's denominator and nDCG's ideal list, for both runs of a pair (relevance
  belongs to the case, not to a run). So recall@k's high end is ``(found + u) / (R + u)``, not
  ``(found + u) / R``. For recall, hit and RR a PART verdict gives the same value as YES (any grade
  counts); for nDCG a PART verdict can land between or outside the YES/NO ends, as can any mix.
* A case of several evidence groups (kind ``multi``) keeps its recall@k: a verdict that names no part
  belongs to no group (:mod:`rag_experiments.golden.resolve`), so it moves only RR, nDCG and hit.
* Passages are identified by their span (``doc:start-end``): a passage unjudged in both lists of a
  pair takes one verdict in both. The same text under two spans counts as two unknowns: the bounds
  stay valid (wider, never narrower than the truth allows).

**Per run** (:func:`run_range`): the min and max of the case's value over the verdicts of its unjudged
hits. recall, hit and RR rise with every YES, so their ends are "all NO" (the logged value) and "all
YES"; nDCG does not (a YES at rank 10 raises the ideal more than the DCG), so its min and max are found
exactly by trying each number m of YES verdicts on the m best-ranked (max) and m worst-ranked (min).

**Paired** (:func:`pair_range`): per case, the min and max of a - b over the verdicts of the passages
unjudged in either list. For recall, hit and RR a passage only A ranks in its cut-off raises a and
never raises b, so the max takes it as YES and the min as NO (and the reverse for B's); the passages
both rank are tried in every combination (up to :data:`EXACT_LIMIT`; recall depends only on how many,
so it tries counts). nDCG tries every combination of the union up to the limit; past it, the
per-run ends combined (an outer bound: wider, never wrong).

Aggregates (:func:`aggregate`) are means of the per-case ends: verdicts are per (case, passage), so
the cases' ends are reached together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Iterable, Mapping, Sequence

from ..golden.resolve import EvalCase, GoldenSet
from ..types import Hit, RankedList
from . import metrics as M
from .metric_key import MetricKey
from .relevance import credit

YES = 2  # the grade an unjudged hit takes at the high end
EXACT_LIMIT = 12  # passages tried in every combination per case (4,096); past it: outer bounds
BOUNDED = ("recall", "mrr", "ndcg", "hit")

Slot = int | str  # per rank: a fixed credited gain (0 for a judged miss or a repeat), or an unjudged passage's key


def passage_key(doc_id: str, start: int, end: int) -> str:
    return f"{doc_id}:{start}-{end}"


@dataclass(frozen=True)
class CaseView:
    """One ranked list of one case as the labels see it: per rank a fixed gain or an unknown."""

    slots: tuple[Slot, ...]
    grades: tuple[int, ...]  # the case's relevant units (evidence and YES / PART judgements)
    group_recall: tuple[float, ...] | None = None  # a multi-group case: recall@1..depth, fixed

    def unknown(self, k: int) -> list[str]:
        """The unjudged passages in the top k, best rank first."""
        return [s for s in self.slots[:k] if isinstance(s, str)]


def case_view(case: EvalCase, hits: Sequence[Hit], depth: int, min_coverage: float = 0.5) -> CaseView:
    hits = list(hits[:depth])
    c = credit(case, hits, min_coverage)
    slots: list[Slot] = []
    for h, gain, judged, dup in zip(hits, c.gains, c.judged, c.duplicate_of):
        unknown = gain == 0 and not judged and dup is None and h.end > h.start
        slots.append(passage_key(h.doc_id, h.start, h.end) if unknown else int(gain))
    grades = tuple(int(e.grade) for e in case.relevant)
    group_recall = None
    unit_groups = [e.group for e in case.relevant]
    if case.n_groups > 1 and not all(g is None for g in unit_groups):
        group_of = {e.ref: e.group for e in case.relevant}
        rank_groups = [None if ref is None else group_of.get(ref) for ref in c.refs]
        group_recall = tuple(M.group_recall_at_k(rank_groups, unit_groups, k) for k in range(1, depth + 1))
    return CaseView(tuple(slots), grades, group_recall)


def views(golden: GoldenSet, ranked: Mapping[str, RankedList], depth: int,
          min_coverage: float = 0.5) -> dict[str, CaseView]:
    """case id -> its view, for the scorable cases the run has a list for."""
    return {c.case_id: case_view(c, ranked[c.case_id].hits, depth, min_coverage)
            for c in golden.scorable if c.case_id in ranked}


# -- one case's value under one set of YES verdicts ---------------------------------------------
def value(metric: str, k: int, view: CaseView, yes: Iterable[str] = (), extra_units: int = 0) -> float:
    """The case's value when the passages in ``yes`` are relevant (YES) and every other unknown is
    not; ``extra_units``: relevant passages of the case this list does not rank in its top k (they
    join the denominator only). A case left with no relevant unit scores 0 (nothing to find)."""
    yes = set(yes)
    gains = [s if isinstance(s, int) else (YES if s in yes else 0) for s in view.slots]
    new_units = len(yes) + extra_units
    if metric == "recall" and view.group_recall is not None:
        return view.group_recall[min(k, len(view.group_recall)) - 1] if view.group_recall else 0.0
    grades = list(view.grades) + [YES] * new_units
    if not any(g > 0 for g in grades):
        return 0.0
    if metric == "recall":
        return M.recall_at_k(gains, grades, k)
    if metric == "hit":
        return M.hit_at_k(gains, grades, k)
    if metric == "mrr":
        return M.reciprocal_rank(gains, grades, k)
    if metric == "ndcg":
        return M.ndcg_at_k(gains, grades, k)
    raise ValueError(f"no bounds for metric {metric!r} (bounded: {', '.join(BOUNDED)})")


def run_range(metric: str, k: int, view: CaseView) -> tuple[float, float]:
    """(min, max) of the case's value over the verdicts of its unjudged hits in the top k."""
    unknown = view.unknown(k)
    if metric != "ndcg":  # monotone: all NO, all YES
        return value(metric, k, view), value(metric, k, view, unknown)
    found = [value(metric, k, view, unknown[:m]) for m in range(len(unknown) + 1)]
    found += [value(metric, k, view, unknown[len(unknown) - m:]) for m in range(1, len(unknown) + 1)]
    return min(found), max(found)


def _ndcg_outer(k: int, view: CaseView, others: int) -> tuple[float, float]:
    """nDCG's range when up to ``others`` relevant units outside this list may also join the ideal."""
    unknown = view.unknown(k)
    found = []
    for extra in range(others + 1):
        for m in range(len(unknown) + 1):
            found.append(value("ndcg", k, view, unknown[:m], extra))
            found.append(value("ndcg", k, view, unknown[len(unknown) - m:], extra))
    return min(found), max(found)


def pair_range(metric: str, k: int, a: CaseView, b: CaseView) -> tuple[float, float]:
    """(min, max) of value(a) - value(b) on one case over the verdicts of the passages unjudged in
    either list's top k, one verdict per passage for both lists."""
    ua, ub = a.unknown(k), b.unknown(k)
    only_a = [p for p in ua if p not in ub]
    only_b = [p for p in ub if p not in ua]
    shared = [p for p in ua if p in ub]

    def delta(yes: Sequence[str]) -> float:
        ys = set(yes)
        return (value(metric, k, a, ys & set(ua), len(ys - set(ua)))
                - value(metric, k, b, ys & set(ub), len(ys - set(ub))))

    if metric != "ndcg":
        subsets = ([shared[:t] for t in range(len(shared) + 1)] if metric == "recall" and a.group_recall is None
                   and b.group_recall is None else _subsets(shared))
        if subsets is not None:
            hi = max(delta([*only_a, *s]) for s in subsets)
            lo = min(delta([*only_b, *s]) for s in subsets)
            return lo, hi
    else:
        union = [*ua, *only_b]
        every = _subsets(union)
        if every is not None:
            found = [delta(s) for s in every]
            return min(found), max(found)
        a_lo, a_hi = _ndcg_outer(k, a, len(only_b))
        b_lo, b_hi = _ndcg_outer(k, b, len(only_a))
        return a_lo - b_hi, a_hi - b_lo
    a_lo, a_hi = run_range(metric, k, a)  # too many shared passages to try: the per-run ends combined
    b_lo, b_hi = run_range(metric, k, b)
    return a_lo - b_hi, a_hi - b_lo


def _subsets(items: Sequence[str]) -> list[tuple[str, ...]] | None:
    if len(items) > EXACT_LIMIT:
        return None
    return [s for r in range(len(items) + 1) for s in combinations(items, r)]


# -- aggregates --------------------------------------------------------------------------------
def metric_parts(metric: str) -> tuple[str, int]:
    """``recall_at_5`` -> ("recall", 5); a metric without bounds -> ValueError naming it."""
    key = MetricKey.parse(metric)
    if key.metric not in BOUNDED or key.k is None or key.segment:
        raise ValueError(f"no bounds for {metric!r}: bounded are {', '.join(m + '@k' for m in BOUNDED)}")
    return key.metric, int(key.k)


@dataclass(frozen=True)
class Bounds:
    """A run's mean value (unjudged = miss) and how far its unjudged hits could move it."""

    metric: str  # recall_at_5
    value: float
    low: float
    high: float
    unjudged: int  # unjudged hits in the cut-off, over the cases
    cases: int

    def text(self) -> str:
        if not self.unjudged:
            return f"{MetricKey.parse(self.metric).title} {self.value:.3f}, every hit in the top " \
                   f"{metric_parts(self.metric)[1]} judged"
        return (f"{MetricKey.parse(self.metric).title} {self.value:.3f}, could be {self.low:.2f}-{self.high:.2f} "
                f"with {self.unjudged} hits unjudged{beyond_cut_off(self.metric)}")


@dataclass(frozen=True)
class DeltaBounds:
    """The paired Δ (a - b) with unjudged = miss, and its range over the unjudged passages' verdicts."""

    metric: str
    delta: float
    low: float
    high: float
    unjudged: int  # distinct unjudged passages in either cut-off, over the cases
    cases: int
    per_case_low: tuple[float, ...] = ()
    per_case_high: tuple[float, ...] = ()
    per_case: tuple[float, ...] = ()

    @property
    def sign_fixed(self) -> bool:
        """No verdict on the unjudged passages can flip the sign of the mean Δ."""
        return self.low > 0 or self.high < 0

    def text(self, a: str = "A", b: str = "B") -> str:
        title = MetricKey.parse(self.metric).title
        head = f"{title} Δ({a} - {b}) {self.delta:+.3f}"
        if not self.unjudged:
            return f"{head}: every hit in both cut-offs judged"
        rng = f", could be {self.low:+.3f} to {self.high:+.3f} with {self.unjudged} passages unjudged"
        if self.sign_fixed:
            ahead = a if self.low > 0 else b
            return f"{head}{rng}: {ahead} ahead whatever they turn out to be (the sign cannot flip{beyond_cut_off(self.metric, paired=True)})"
        if self.low == self.high:  # e.g. both find every relevant passage whatever the rest are
            return f"{head}{rng}: no verdict on them can move it"
        return f"{head}{rng}: the sign can still flip"


# metrics whose value reads how many relevant passages the case has (recall's denominator, nDCG's ideal list)
READS_EVERY_RELEVANT = ("recall", "ndcg")


def beyond_cut_off(metric: str, paired: bool = False) -> str:
    """What the ranges leave out, for a metric that reads every relevant passage of a case: a passage
    judged relevant outside these top k (another run's, a deeper rank) joins the case's relevant units and
    lowers the value below the range, and moves a Δ. A new user read "could be 0.80-0.97" as a floor and
    saw 0.61 after labelling the other runs' pool (nginx docs, 2026-12-07)."""
    name, k = metric_parts(metric)
    if name not in READS_EVERY_RELEVANT:
        return ""
    if paired:
        return f"; over the passages in these top {k}: one found relevant outside both can still move Δ"
    return f" (over this top {k}: a passage found relevant outside it lowers {MetricKey.parse(metric).title})"


def run_bounds(metric: str, run_views: Mapping[str, CaseView]) -> Bounds:
    name, k = metric_parts(metric)
    vals, lows, highs, unjudged = [], [], [], 0
    for view in run_views.values():
        lo, hi = run_range(name, k, view)
        vals.append(value(name, k, view))
        lows.append(lo)
        highs.append(hi)
        unjudged += len(view.unknown(k))
    n = len(vals)
    return Bounds(metric, _mean(vals), _mean(lows), _mean(highs), unjudged, n)


def delta_bounds(metric: str, a: Mapping[str, CaseView], b: Mapping[str, CaseView]) -> DeltaBounds:
    """Over the cases both runs have."""
    name, k = metric_parts(metric)
    shared = [cid for cid in a if cid in b]
    lows, highs, deltas, unjudged = [], [], [], 0
    for cid in shared:
        lo, hi, now, n = case_delta(name, k, a[cid], b[cid])
        lows.append(lo)
        highs.append(hi)
        deltas.append(now)
        unjudged += n
    return delta_of(metric, lows, highs, deltas, unjudged)


def case_delta(name: str, k: int, a: CaseView, b: CaseView) -> tuple[float, float, float, int]:
    """One case: (lowest Δ, highest Δ, Δ with unjudged = miss, unjudged passages in either cut-off)."""
    lo, hi = pair_range(name, k, a, b)
    return lo, hi, value(name, k, a) - value(name, k, b), len(set(a.unknown(k)) | set(b.unknown(k)))


def delta_of(metric: str, lows: Sequence[float], highs: Sequence[float], deltas: Sequence[float],
             unjudged: int) -> DeltaBounds:
    return DeltaBounds(metric, _mean(deltas), _mean(lows), _mean(highs), unjudged, len(deltas),
                       tuple(lows), tuple(highs), tuple(deltas))


def _mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs) if xs else float("nan")


# -- what each verdict can do to the paired Δ ---------------------------------------------------
@dataclass(frozen=True)
class Sway:
    """One unjudged passage of a case and how far its verdict alone moves the paired Δ (mean over
    the cases), every other unjudged passage taken as not relevant."""

    case_id: str
    key: str  # passage_key
    weight: float  # |Δ(YES) - Δ(NO)| / cases
    rank_a: int | None  # its rank in A's cut-off (None: not there)
    rank_b: int | None


def case_sways(name: str, k: int, case_id: str, va: CaseView, vb: CaseView, cases: int) -> list[Sway]:
    """One case's unjudged passages (either cut-off) and their weights, ``cases`` the mean's divisor."""
    ua, ub = va.unknown(k), vb.unknown(k)
    base = value(name, k, va) - value(name, k, vb)
    out = []
    for key in dict.fromkeys([*ua, *ub]):
        yes = (value(name, k, va, [key] if key in ua else (), 0 if key in ua else 1)
               - value(name, k, vb, [key] if key in ub else (), 0 if key in ub else 1))
        ra = va.slots.index(key) + 1 if key in ua else None
        rb = vb.slots.index(key) + 1 if key in ub else None
        out.append(Sway(case_id, key, abs(yes - base) / cases, ra, rb))
    return out


def sways(metric: str, a: Mapping[str, CaseView], b: Mapping[str, CaseView]) -> list[Sway]:
    """Every passage unjudged in either run's cut-off on the cases both have, with its weight: the
    rank-discounted gain the metric gives it in A minus in B (recall: its share of the case's units;
    RR: 1/rank where nothing relevant ranks above; nDCG: 2/log2(rank+1) over the ideal), exactly as
    :func:`value` scores it, so a passage both runs rank alike weighs ~0."""
    name, k = metric_parts(metric)
    shared = [cid for cid in a if cid in b]
    return [s for cid in shared for s in case_sways(name, k, cid, a[cid], b[cid], len(shared))]


def with_verdict(view: CaseView, key: str, grade: int) -> CaseView:
    """The view once ``key`` is judged ``grade`` (0 NO, 1 PART, 2 YES): its slots become that fixed
    gain, and a relevant verdict adds a unit to the case (whether or not this list ranks it)."""
    slots = tuple(grade if s == key else s for s in view.slots)
    grades = view.grades + ((grade,) if grade > 0 else ())
    return CaseView(slots, grades, view.group_recall)
