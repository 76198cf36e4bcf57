"""The probabilistic stopping rule of ``golden label --decide`` (``--stop confident``, the default).

After Carterette, Allan and Sitaraman's minimal test collections (SIGIR 2006): the verdicts still to
come are not all-YES or all-NO (the worst case, ``--stop certain``: :func:`rag_experiments.golden.
decide.settle`); each unjudged passage is relevant with a probability estimated from what is already
judged, and the decision is *settled* when the same decision comes out in at least ``level`` (0.99)
of Monte Carlo draws of the unjudged verdicts.

**The model** (:class:`RelevanceModel`): the judged pool passages (verdicts on passages that were
unjudged in either run's cut-off: this session's labels and any recorded before) are counted per
*cell*: the best rank either run gives the passage (bands 1, 2-3, 4-5, 6-10, 11+) and which run ranks
it (A only, B only, both: one system's own passages being more often relevant is what a decision
turns on; on MRR, which reads ranks inside the cut-off, a passage both rank at different ranks by
which ranks it higher: :func:`cell_of`). Each draw first draws the overall rate of relevance from Beta(1 + yes, 1 + no), a
uniform prior, so a cold start is uncertain (any rate from 0 to 1); then each cell's rate from
Beta(m p + yes_cell, m (1 - p) + no_cell) (shrunk to the overall rate with strength m = 4); then each
question's factor on the odds of relevance (:meth:`RelevanceModel.case_factors`: Gamma with mean 1 and a
spread measured from how the judged YES counts cluster by question, updated by the question's own
labels); then each passage's verdict from its cell's rate times its question's factor. Without the
factor (verdicts independent across questions) the rule declared wrong decisions settled where relevant
passages cluster in some questions, as Cranfield's do: the remaining YES verdicts spread evenly over the
questions read as a tie. Drawing the rates per draw, not plugging in their means,
carries their uncertainty: few labels give wide rates, so the rule asks for more. A relevant passage is
YES (grade 2) or PART (1) by the judged share of YES among the relevant (again with a uniform prior).
A passage whose text equals a judged passage of the same case takes that verdict; copies of one text
in a case take one draw.

**With features** (:class:`.relevance_logit.FeatureModel`, what ``golden label --decide`` and the replay
use, since they know the questions): each passage's own rate from its cell and its features
(:mod:`.relevance_features`: the share of the question's terms it holds), a Bayesian logistic
regression drawn from its Laplace posterior per draw; the per-question factor and the share of YES as
above. :class:`RelevanceModel` is the model without features (a tracker given no questions).

**The values** under a draw are computed exactly as :func:`rag_experiments.evaluation.bounds.value`
scores them (a relevant passage becomes a unit of the case for both runs), vectorised over the draws
with numpy (:class:`CaseTable`); the per-case differences of each draw go through the same paired
t-test as :func:`rag_experiments.golden.decide.outcome`. The draws are seeded and the same random
numbers are reused at every step (common random numbers), so the probability moves only with the
labels. With 2,000 draws the estimate's standard error at 0.95 is 0.005.

**The order** (:func:`learning_values`, the tracker's default ``order_by="learn-sampled"``): the
passage whose verdict is expected to shrink the variance of the mean Δ most, counting its own verdict
(for every passage) and what it teaches the model's coefficients (for one passage per cell, drawn at
random). Teaching every passage of a cell (``learn``, measured and not adopted) settled with far fewer
labels where the spread order leaves big cells judged little, but the heaviest passages of a cell
were the ones labelled, not a random sample of it, so the cell's rate was learnt biased and it
declared a wrong tie on Cranfield; drawn at random, no wrong decision in the same replays
(docs/how-to/golden-growth.md).

This module takes the case views by their fields (``slots``, ``grades``, ``group_recall``) and imports
nothing from the evaluation layer above it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
from scipy import special
from scipy import stats as sps

DRAWS = 2000
# 0.95 (with the per-question factor) declared "hybrid ahead" settled in 2 of 10 random label orders of
# the git-doc pair whose full pool gives a tie at p=0.058; 0.975 in 1; 0.99 in none
LEVEL = 0.99
SEED = 57
DISPERSION_FLOOR = 0.5  # 1/kappa at least: the per-question factor's spread before the labels measure it
PRIOR_STRENGTH = 4.0  # how many judged passages a cell's own count must outweigh to leave the overall rate
BANDS = (1, 3, 5, 10)  # best rank <= 1, <= 3, <= 5, <= 10, else: band 0..4
WINNERS = ("A", "B", "tie")


def cell_of(rank_a: int | None, rank_b: int | None, by_rank: bool = False) -> int:
    """The model's cell of a passage: 3 x its best rank's band + 0 when only A ranks it, 1 only B,
    2 both. A's own passages and B's have rates of their own: that one system's passages are more
    often relevant than the other's is what a decision is about, so the model must not assume it away.

    ``by_rank`` (a metric that reads the rank inside the cut-off: MRR): a passage both rank, at
    different ranks, goes to a cell of its own by which run ranks it higher (CELLS + 2 x band + 0 for
    A, 1 for B); at the same rank it stays in the "both" cell. Why: on MRR most top passages are in
    both lists, and a better run is one whose *higher-ranked* shared passages are the relevant ones; one
    rate for every shared passage drew them alike for both runs, so the draws leaned to a tie. git-doc's
    MRR@10 (hybrid ahead, p=0.021 with the whole pool) was declared a tie, settled, in 5 of 30 random
    label orders (P 0.990-0.993); with the split, in 0 of 30 (docs/how-to/golden-growth.md, "MRR:
    shared passages apart")."""
    best = min(r for r in (rank_a, rank_b) if r) if (rank_a or rank_b) else 10**9
    band = next((i for i, top in enumerate(BANDS) if best <= top), len(BANDS))
    if by_rank and rank_a and rank_b and rank_a != rank_b:
        return CELLS + 2 * band + (0 if rank_a < rank_b else 1)
    return 3 * band + (2 if rank_a and rank_b else (1 if rank_b else 0))


CELLS = 3 * (len(BANDS) + 1)  # the cells of a metric that reads no rank inside the cut-off (recall)
RANKED_CELLS = CELLS + 2 * (len(BANDS) + 1)  # with by_rank: the shared passages split by who ranks them higher


def cell_text(cell: int, a: str, b: str) -> str:
    """A cell in words: "the passages only A ranks, at ranks 6-10"."""
    if cell >= CELLS:
        band, higher = divmod(cell - CELLS, 2)
        who = f"both rank, {(a, b)[higher]} higher"
    else:
        band, side = divmod(cell, 3)
        who = (f"only {a} ranks", f"only {b} ranks", "both rank")[side]
    if band < len(BANDS):
        low, high = (BANDS[band - 1] + 1 if band else 1), BANDS[band]
        ranks = f"rank {low}" if low == high else f"ranks {low}-{high}"
    else:
        ranks = f"ranks below {BANDS[-1]}"
    return f"the passages {who}, at {ranks}"


@dataclass(frozen=True)
class Judged:
    """A judged pool passage: where the two runs rank it and its verdict's grade (0 NO, 1 PART, 2 YES)."""

    rank_a: int | None
    rank_b: int | None
    grade: int
    case_id: str | None = None  # the question it belongs to: relevance clusters by question
    features: tuple[float, ...] = ()  # relevance_features.features of the passage for its question


class RelevanceModel:
    """Rates of relevance per cell from the judged pool passages, drawn with their uncertainty."""

    def __init__(self, judged: Iterable[Judged], strength: float = PRIOR_STRENGTH, by_rank: bool = False) -> None:
        self.n_cells = RANKED_CELLS if by_rank else CELLS  # by_rank: cell_of's, shared passages split by who ranks higher
        self.yes = np.zeros(self.n_cells)
        self.no = np.zeros(self.n_cells)
        self.full = self.part = 0
        self.cells: list[int] = []  # per judged passage its cell, whether relevant, its features
        self.relevant: list[bool] = []
        self.features: list[tuple[float, ...]] = []
        self.by_case: dict[str, list[int]] = {}  # case -> its judged passages (indices into cells)
        for j in judged:
            c = cell_of(j.rank_a, j.rank_b, by_rank)
            if j.case_id is not None:
                self.by_case.setdefault(j.case_id, []).append(len(self.cells))
            self.cells.append(c)
            self.relevant.append(j.grade > 0)
            self.features.append(j.features)
            if j.grade > 0:
                self.yes[c] += 1
                self.full += j.grade >= 2
                self.part += j.grade == 1
            else:
                self.no[c] += 1
        self.strength = strength

    @property
    def judged(self) -> int:
        return int(self.yes.sum() + self.no.sum())

    def overall_mean(self) -> float:
        """The overall rate's expectation: Beta(1 + yes, 1 + no), a uniform prior."""
        return (1 + self.yes.sum()) / (2 + self.yes.sum() + self.no.sum())

    def cell_beta(self, overall) -> tuple[np.ndarray, np.ndarray]:
        """Each cell's Beta(a, b) for its rate given the overall rate (a number, or a column of draws):
        shrunk to it with strength m, moved by the cell's own counts."""
        return self.strength * overall + self.yes, self.strength * (1 - overall) + self.no

    def mean(self) -> np.ndarray:
        """Each cell's expected rate."""
        overall = self.overall_mean()
        return (self.strength * overall + self.yes) / (self.strength + self.yes + self.no)

    def means(self, cells: Sequence[int], features: Sequence[tuple[float, ...]]) -> np.ndarray:
        """The expected rate of passages in ``cells`` with ``features`` (the spread order, the factor)."""
        return self.mean()[np.asarray(cells, dtype=int)]

    def judged_means(self) -> np.ndarray:
        """Each judged passage's expected rate as the model sees it now."""
        return self.means(self.cells, self.features) if self.cells else np.zeros(0)

    def dispersion(self) -> float:
        """1/kappa of the per-question factor on the odds of relevance, by moments: how much more the
        judged YES counts per question spread around what the model predicts than independent verdicts
        would (Var y = e + e^2 / kappa, less the binomial part); at least DISPERSION_FLOOR, so a few
        labels cannot claim that questions are alike."""
        rate = self.judged_means()
        relevant = np.array(self.relevant, dtype=float)
        excess = square = 0.0
        for judged in self.by_case.values():
            p = rate[judged]
            e, y = p.sum(), relevant[judged].sum()
            excess += (y - e) ** 2 - (p * (1 - p)).sum()
            square += e * e
        measured = excess / square if square > 0 else 0.0
        return max(measured, DISPERSION_FLOOR)

    def case_factors(self, rng: np.random.Generator, draws: int, case_ids: Sequence[str]) -> np.ndarray:
        """(draws x cases) each question's factor on the odds of relevance of its unjudged passages: the
        random effect that makes relevance cluster by question. Its prior is Gamma(kappa, kappa) (mean 1);
        a question's own judged passages update it (Gamma(kappa + yes, kappa + expected yes)), so a
        question whose labels came out more often relevant than the model predicts keeps more YES to come."""
        inv = self.dispersion()
        if inv <= 0 or not case_ids:
            return np.ones((draws, len(case_ids)))
        kappa = 1.0 / inv
        rate = self.judged_means()
        relevant = np.array(self.relevant, dtype=float)
        shape = np.empty(len(case_ids))
        scale = np.empty(len(case_ids))
        for i, cid in enumerate(case_ids):
            judged = self.by_case.get(cid, [])
            y = relevant[judged].sum() if judged else 0.0
            e = rate[judged].sum() if judged else 0.0
            shape[i], scale[i] = kappa + y, 1.0 / (kappa + e)
        return rng.gamma(shape, scale, size=(draws, len(case_ids)))

    def draw_rates(self, rng: np.random.Generator, draws: int) -> tuple[np.ndarray, np.ndarray]:
        """(draws x cells) rates of relevance and (draws,) shares of YES among the relevant."""
        a, b = self.cell_beta(rng.beta(1 + self.yes.sum(), 1 + self.no.sum(), size=(draws, 1)))
        rates = rng.beta(np.maximum(a, 1e-9), np.maximum(b, 1e-9))
        yes_share = rng.beta(1 + self.full, 1 + self.part, size=draws)
        return rates, yes_share

    def draw_probs(self, rng: np.random.Generator, draws: int, cells: np.ndarray,
                   features: Sequence[tuple[float, ...]]) -> tuple[np.ndarray, np.ndarray]:
        """(draws x units) each unit's probability of relevance (its cell's drawn rate) and (draws,) shares
        of YES among the relevant."""
        rates, yes_share = self.draw_rates(rng, draws)
        return rates[:, cells], yes_share

    def cell_variance(self) -> np.ndarray:
        """Each cell's uncertainty now: the variance of its rate's log-odds (a Beta(a, b) rate's is
        trigamma(a) + trigamma(b)), with the overall rate at its mean. What a label in the cell can
        still teach (:func:`learning_values`)."""
        a, b = self.cell_beta(self.overall_mean())
        return special.polygamma(1, a) + special.polygamma(1, b)

    def coefficients(self, cells: Sequence[int], features: Sequence[tuple[float, ...]]) -> tuple[np.ndarray, np.ndarray]:
        """(units x dim) how each unit's log-odds reads the model's coefficients, and (dim x dim) their
        covariance now: here one coefficient per cell, the cells' log-odds, independent."""
        design = np.zeros((len(cells), self.n_cells))
        design[np.arange(len(cells)), np.asarray(cells, dtype=int)] = 1.0
        return design, np.diag(self.cell_variance())


def side_sign(rank_a: int | None, rank_b: int | None) -> float:
    """Which way a passage's YES moves Δ (A - B): +1 when A ranks it higher (or alone), -1 when B does,
    0 at the same rank."""
    if rank_a and (not rank_b or rank_a < rank_b):
        return 1.0
    if rank_b and (not rank_a or rank_b < rank_a):
        return -1.0
    return 0.0


def learning_values(model: RelevanceModel, cells: Sequence[int], features: Sequence[tuple[float, ...]],
                    weights: Sequence[float], signs: Sequence[float], sample_seed: int | None = None,
                    rates: np.ndarray | None = None) -> np.ndarray:
    """Per unjudged passage how much its verdict is expected to settle: the square root of the expected
    fall of the mean Δ's variance under the model. Two parts:

    * its own verdict: ``w^2 q`` (``w`` its weight, ``q = p (1 - p)`` at its rate ``p``), what the spread
      order (weight x sqrt(q)) reads alone;
    * what it teaches the model: the unjudged passages carry ``g = sum_j s_j w_j q_j d_j`` of Δ per unit
      of the model's coefficients (``d_j`` how passage j's log-odds reads them: its cell's intercept, its
      features' slopes; ``s_j`` :func:`side_sign`), so the coefficients' covariance ``S`` gives the mean
      Δ a variance ``g' S g``; one more label ``i`` takes ``S`` to ``S - q_i S d_i d_i' S / (1 + q_i
      d_i' S d_i)`` (the Laplace posterior's update), a fall of ``q_i (g' S d_i)^2 / (1 + q_i d_i' S
      d_i)``. With one coefficient per cell this is ``G_c^2 (v_c - 1 / (1 / v_c + q_i))``: a big cell
      judged little teaches most; a passage whose features lie where the slope is least known teaches
      more than one like the passages judged already.

    Why: the spread order (the first part alone) leaves big cells judged little (Cranfield recall@10
    vector vs hybrid: ranks 6-10 that only hybrid retrieves, 21 judged, none relevant, 2% expected of
    600 unjudged, 12% true), and the rule took 37% of the pool there. Without ``sample_seed`` (``learn``,
    measured and not adopted) it declared a wrong tie on Cranfield (docs/how-to/golden-growth.md, "an
    order that also counts what a verdict teaches").

    ``sample_seed`` (the ``learn-sampled`` order): the second part goes to one passage per cell drawn at
    random (seeded by ``sample_seed`` and the number of labels so far), the others keep the first part
    alone. What a label teaches is nearly the same for every passage of a cell, so the learning order
    took the heaviest: passages whose weight tracks how many relevant units their question has, and so
    a cell's labels came from its least relevant questions and its rate was learnt low, the wrong tie
    above. Drawn at random, the labels that teach a cell are a random sample of it."""
    if not len(cells):
        return np.zeros(0)
    p = model.means(cells, features) if rates is None else rates  # rates: the caller's model.means of them
    q = p * (1 - p)
    w = np.asarray(weights, dtype=float)
    design, cov = model.coefficients(cells, features)
    g = design.T @ (np.asarray(signs, dtype=float) * w * q)
    along = design @ (cov @ g)  # d_i' S g
    spread = np.einsum("ij,jk,ik->i", design, cov, design)  # d_i' S d_i
    taught = q * along**2 / (1 + q * spread)
    if sample_seed is not None:
        taught = np.where(one_per_cell(cells, [sample_seed, model.judged]), taught, 0.0)
    return np.sqrt(w * w * q + taught)


def one_per_cell(cells: Sequence[int], seed: Sequence[int]) -> np.ndarray:
    """A mask with one passage of each cell, drawn at random (the same seed, the same choice)."""
    cells = np.asarray(cells, dtype=int)
    draw = np.random.default_rng(list(seed)).random(len(cells))
    mask = np.zeros(len(cells), dtype=bool)
    for c in np.unique(cells):
        members = np.flatnonzero(cells == c)
        mask[members[np.argmin(draw[members])]] = True
    return mask


class CaseTable:
    """One case of a pair, compiled: per list the fixed gains of its top k and which unit (by index into
    ``units``) sits at each other rank; the case's fixed relevant units. :func:`batch_deltas` scores
    many cases' tables under every draw at once."""

    def __init__(self, metric: str, k: int, a, b, units: Sequence[str], group_of: Mapping[str, int]) -> None:
        self.metric, self.k = metric, k
        self.units = list(units)  # one draw per entry: a text group of the case's unjudged passages
        self.sides = [self._side(v, group_of) for v in (a, b)]
        self.grades = np.array([g for g in a.grades if g > 0], dtype=float)

    def _side(self, view, group_of: Mapping[str, int]):
        slots = list(view.slots[: self.k])
        fixed = np.zeros(self.k)
        unknown = np.full(self.k, -1, dtype=int)
        for i, s in enumerate(slots):
            if isinstance(s, str):
                unknown[i] = group_of[s]
            else:
                fixed[i] = float(s)
        fixed_recall = np.nan
        if self.metric == "recall" and view.group_recall is not None:
            gr = view.group_recall
            fixed_recall = gr[min(self.k, len(gr)) - 1] if gr else 0.0
        return fixed, unknown, fixed_recall

    def deltas(self, grades: np.ndarray) -> np.ndarray:
        """(draws,) value(A) - value(B) when the units take ``grades`` (draws x units, 0/1/2)."""
        return batch_deltas([self], grades)[:, 0]


def batch_deltas(tables: Sequence[CaseTable], grades: np.ndarray) -> np.ndarray:
    """(draws x cases) value(A) - value(B) of each table when the units, the tables' ``units`` one after
    the other, take ``grades`` (draws x all units; 0 NO, 1 PART, 2 YES). A relevant unit joins the
    case's units for both lists (as bounds.value counts it); a case left with no unit scores 0."""
    metric, k = tables[0].metric, tables[0].k
    offsets = np.cumsum([0] + [len(t.units) for t in tables])
    draws = grades.shape[0]
    n2 = np.add.reduceat((grades == 2).astype(float), offsets[:-1], axis=1)  # draws x cases
    n1 = np.add.reduceat((grades == 1).astype(float), offsets[:-1], axis=1)
    empty = offsets[1:] == offsets[:-1]  # reduceat gives a neighbour's column for an empty slice
    n2[:, empty] = 0
    n1[:, empty] = 0
    units = np.array([len(t.grades) for t in tables])[None, :] + n2 + n1
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    ideal = _ideal(tables, n2, n1, disc) if metric == "ndcg" else None
    values = []
    for side in (0, 1):
        fixed = np.stack([t.sides[side][0] for t in tables])  # cases x k
        unknown = np.stack([t.sides[side][1] + (np.where(t.sides[side][1] >= 0, off, 0))
                            for t, off in zip(tables, offsets[:-1])])
        at = unknown >= 0
        gains = np.broadcast_to(fixed, (draws, *fixed.shape)).copy()
        if at.any():
            gains[:, at] = grades[:, unknown[at]]
        rel = gains > 0
        if metric == "recall":
            v = rel.sum(-1) / np.maximum(units, 1)
        elif metric == "hit":
            v = rel.any(-1).astype(float)
        elif metric == "mrr":
            v = np.where(rel.any(-1), 1.0 / (rel.argmax(-1) + 1), 0.0)
        elif metric == "ndcg":
            v = (gains * disc).sum(-1) / ideal
        else:
            raise ValueError(f"no draws for metric {metric!r}")
        v = np.where(units > 0, v, 0.0)
        fixed_recall = np.array([t.sides[side][2] for t in tables])
        values.append(np.where(np.isnan(fixed_recall)[None, :], v, fixed_recall[None, :]))
    return values[0] - values[1]


def _ideal(tables: Sequence[CaseTable], n2: np.ndarray, n1: np.ndarray, disc: np.ndarray) -> np.ndarray:
    """(draws x cases) the ideal DCG@k of each case's units: its fixed ones plus the draw's new YES and PART."""
    levels = sorted({g for t in tables for g in t.grades.tolist()} | {2.0, 1.0}, reverse=True)
    counts = np.stack([np.array([(t.grades == g).sum() for t in tables], dtype=float)[None, :]
                       + (n2 if g == 2.0 else n1 if g == 1.0 else 0.0) for g in levels], axis=-1)  # d x c x levels
    cum = np.cumsum(counts, axis=-1)
    pos = np.arange(len(disc))
    level_at = (pos[None, None, None, :] >= cum[..., None]).sum(-2)  # d x c x k: index into levels (past: none)
    gain = np.append(np.array(levels), 0.0)[level_at]
    ideal = (gain * disc).sum(-1)
    return np.where(ideal > 0, ideal, 1.0)


@dataclass(frozen=True)
class Confidence:
    """How sure the decision is under the draws: the most frequent outcome and its share."""

    winner: str  # "A" | "B" | "tie"
    probability: float
    draws: int
    level: float
    # the final paired t statistic (A ahead positive) over the draws, its mean and sd: how far the
    # decision is from the threshold and how wide the draws still are (tools/label_replay.py --trace)
    t_mean: float = math.nan
    t_sd: float = math.nan

    @property
    def settled(self) -> bool:
        return self.probability >= self.level

    @property
    def error(self) -> float:
        """The Monte Carlo standard error of ``probability``."""
        return math.sqrt(max(self.probability * (1 - self.probability), 0.0) / self.draws)


def paired_t(diffs: np.ndarray) -> np.ndarray:
    """Per draw (rows of draws x cases) the paired t statistic of the per-case differences (A ahead
    positive; inf where every difference is the same and not 0, nan where all are 0; nan for one case)."""
    n = diffs.shape[1]
    if n < 2:
        return np.full(diffs.shape[0], np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        return diffs.mean(1) / (diffs.std(1, ddof=1) / math.sqrt(n))


def paired_outcomes(diffs: np.ndarray, alpha: float, t: np.ndarray | None = None) -> np.ndarray:
    """Per draw (rows of draws x cases) the paired t-test's outcome: 0 A ahead, 1 B ahead, 2 tie, as
    :func:`rag_experiments.golden.decide.outcome` decides it. ``t``: :func:`paired_t` of ``diffs`` when
    the caller has it already."""
    n = diffs.shape[1]
    mean = diffs.mean(1)
    if n < 2:
        return np.where(mean == 0, 2, np.where(mean > 0, 0, 1))
    sd = diffs.std(1, ddof=1)
    t = np.abs(paired_t(diffs) if t is None else t)
    p = np.where(sd > 1e-15, 2 * sps.t.sf(t, n - 1), np.where(np.abs(mean) > 1e-15, 0.0, 1.0))
    return np.where(p >= alpha, 2, np.where(mean > 0, 0, 1))


SCOUT = 5  # a first pass with draws / SCOUT; the full count only when it comes within SCOUT_MARGIN
SCOUT_MARGIN = 0.05  # of the level (at 400 draws and 0.90 the standard error is 0.015: 3 of them)


def confidence(tables: Sequence[CaseTable | float], cells: Sequence[Sequence[int]],
               fixed: Sequence[Sequence[int | None]], model: RelevanceModel, *, alpha: float,
               level: float = LEVEL, draws: int = DRAWS, seed: int = SEED,
               case_ids: Sequence[str] | None = None,
               features: Sequence[Sequence[tuple[float, ...]]] | None = None) -> Confidence:
    """The decision under ``draws`` draws of the unjudged verdicts. ``tables``: per case its table, or
    its Δ when nothing in it is unjudged; ``cells[i]``: the model cell of each of case i's units;
    ``fixed[i]``: a unit's known grade (a copy of a judged text) or None; ``case_ids[i]``: case i's
    question, for the per-question factor (:meth:`RelevanceModel.case_factors`; None: verdicts drawn
    independently across questions, which declared wrong decisions settled where relevance clusters);
    ``features[i]``: each unit's features (:mod:`.relevance_features`) for a model that reads them. A
    scouting pass of ``draws / SCOUT`` draws answers alone when it is far below the level (the loop asks
    after every label, and most steps are far from settled); a settled answer always rests on all ``draws``."""
    args = (tables, cells, fixed, model, alpha, level)
    if draws >= 2 * SCOUT:
        scout = _confidence(*args, draws // SCOUT, seed, case_ids, features)
        if scout.probability < level - SCOUT_MARGIN:
            return scout
    return _confidence(*args, draws, seed, case_ids, features)


def _confidence(tables, cells, fixed, model: RelevanceModel, alpha: float, level: float, draws: int,
                seed: int, case_ids: Sequence[str] | None = None, features=None) -> Confidence:
    rng = np.random.default_rng(seed)
    diffs = np.empty((draws, len(tables)))
    live = [i for i, t in enumerate(tables) if isinstance(t, CaseTable)]
    for i, t in enumerate(tables):
        if i not in live:
            diffs[:, i] = t
    if live:
        unit_cells = np.array([c for i in live for c in cells[i]], dtype=int)
        unit_features = [f for i in live for f in features[i]] if features is not None else [()] * len(unit_cells)
        known = [g for i in live for g in fixed[i]]
        u = len(unit_cells)
        p, yes_share = model.draw_probs(rng, draws, unit_cells, unit_features)
        if case_ids is not None:  # every case's factor from a stream of its own: the same at every step
            factors = model.case_factors(np.random.default_rng([seed, 1]), draws, case_ids)
            unit_case = np.array([i for i in live for _ in cells[i]], dtype=int)
            odds = factors[:, unit_case] * p
            p = odds / (1 - p + odds)
        rel = rng.random((draws, u)) < p
        full = rng.random((draws, u)) < yes_share[:, None]
        grades = np.where(rel, np.where(full, 2, 1), 0)
        for j, g in enumerate(known):
            if g is not None:
                grades[:, j] = g
        diffs[:, live] = batch_deltas([tables[i] for i in live], grades)
    t = paired_t(diffs)  # once: the outcomes and the reported spread both read it
    counts = np.bincount(paired_outcomes(diffs, alpha, t), minlength=3)
    best = int(counts.argmax())
    t = t[np.isfinite(t)]
    t_mean, t_sd = (float(t.mean()), float(t.std())) if len(t) else (math.nan, math.nan)
    return Confidence(WINNERS[best], float(counts[best] / draws), draws, level, t_mean, t_sd)
