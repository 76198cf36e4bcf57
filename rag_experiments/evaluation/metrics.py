"""Retrieval metrics as small pure functions, following trec_eval / ranx conventions.

Inputs: ``gains`` (the credited gain at each rank, rank 1 first; see :mod:`.relevance`) and
``grades`` (the grades of all relevant units of the case). Every function raises
``ValueError`` for a case with no relevant units: such a case is an error, never a silent 0.

* recall@k = |relevant units in top k| / |relevant units|          (trec_eval ``recall_k``)
  for a case of one evidence group; over evidence groups (a case that needs A *and* B), the
  mean over its groups of that share within each group (:func:`group_recall_at_k`): with one
  passage per group, the share of groups found in the top k. One group: exactly the line above.
* complete@k = 1 if every evidence group has a relevant unit in the top k, else 0
  (:func:`complete_at_k`; one group: hit@k). No trec_eval / ir_measures equivalent.
* hit@k (success@k) = 1 if any relevant unit is in the top k, else 0
* precision@k = |relevant in top k| / k                             (trec_eval ``P_k``)
* RR@k = 1 / rank of the first relevant hit within the top k, else 0 (ranx ``mrr@k``,
  trec_eval ``recip_rank`` with a cutoff); MRR is its mean over cases.
* nDCG@k with **linear gain**: DCG = sum_i gain_i / log2(i + 1); ideal DCG from the grades
  sorted descending (trec_eval ``ndcg_cut_k``, ranx ``ndcg``; not the exponential
  ``2^g - 1`` of ranx's ``ndcg_burges``).
* judged@k = share of the top k hits that overlap any judgement (any grade): holes in the
  labels show up as a low judged@k.
* condensed lists (``eval.unjudged=condensed``; Sakai's condensed-list measures, what
  ir_measures' ``judged_only`` computes): unjudged hits are removed before scoring, so recall'@k,
  RR'@k and nDCG'@k score the judged hits only, each keeping its order (:func:`condensed`).
* bpref (trec_eval ``bpref``, Buckley & Voorhees 2004): with R relevant and N judged
  non-relevant units, (1/R) * sum over retrieved relevant r of
  1 - min(n_r, R) / min(R, N), n_r = judged non-relevant hits ranked above r (1 when none is);
  unjudged hits are ignored.
"""

from __future__ import annotations

import math
from typing import Sequence


def _check(grades: Sequence[float], k: int) -> None:
    if k <= 0:
        raise ValueError(f"k must be > 0, got {k}")
    if not any(g > 0 for g in grades):
        raise ValueError("case has no relevant evidence; every case needs at least one relevant unit")


def recall_at_k(gains: Sequence[float], grades: Sequence[float], k: int) -> float:
    _check(grades, k)
    return sum(1 for g in gains[:k] if g > 0) / sum(1 for g in grades if g > 0)


def _per_group(rank_groups: Sequence[int | None], unit_groups: Sequence[int | None], k: int) -> dict[int, tuple[int, int]]:
    """group -> (its credited hits in the top k, its relevant units). ``rank_groups[i]``: the group
    of the unit credited at rank i+1 (None: nothing credited, or a unit of no group)."""
    if k <= 0:
        raise ValueError(f"k must be > 0, got {k}")
    sizes: dict[int, int] = {}
    for g in unit_groups:
        if g is not None:
            sizes[g] = sizes.get(g, 0) + 1
    if not sizes:
        raise ValueError("case has no relevant evidence; every case needs at least one relevant unit")
    found = dict.fromkeys(sizes, 0)
    for g in rank_groups[:k]:
        if g is not None and g in found:
            found[g] += 1
    return {g: (found[g], sizes[g]) for g in sorted(sizes)}


def group_recall_at_k(rank_groups: Sequence[int | None], unit_groups: Sequence[int | None], k: int) -> float:
    """The mean over evidence groups of |group's relevant units in top k| / |group's relevant units|."""
    shares = [f / n for f, n in _per_group(rank_groups, unit_groups, k).values()]
    return sum(shares) / len(shares)


def complete_at_k(rank_groups: Sequence[int | None], unit_groups: Sequence[int | None], k: int) -> float:
    """1.0 if every evidence group has a relevant unit in the top k, else 0.0."""
    return 1.0 if all(f > 0 for f, _ in _per_group(rank_groups, unit_groups, k).values()) else 0.0


def group_first_ranks(rank_groups: Sequence[int | None], n_groups: int) -> list[int | None]:
    """Per evidence group 0..n-1, the 1-based rank of its first credited unit (None: not retrieved)."""
    first: list[int | None] = [None] * n_groups
    for i, g in enumerate(rank_groups, start=1):
        if g is not None and g < n_groups and first[g] is None:
            first[g] = i
    return first


def hit_at_k(gains: Sequence[float], grades: Sequence[float], k: int) -> float:
    _check(grades, k)
    return 1.0 if any(g > 0 for g in gains[:k]) else 0.0


def precision_at_k(gains: Sequence[float], grades: Sequence[float], k: int) -> float:
    _check(grades, k)
    return sum(1 for g in gains[:k] if g > 0) / k


def reciprocal_rank(gains: Sequence[float], grades: Sequence[float], k: int) -> float:
    _check(grades, k)
    for i, g in enumerate(gains[:k], start=1):
        if g > 0:
            return 1.0 / i
    return 0.0


def dcg(gains: Sequence[float], k: int) -> float:
    return sum(g / math.log2(i + 1) for i, g in enumerate(gains[:k], start=1))


def ndcg_at_k(gains: Sequence[float], grades: Sequence[float], k: int) -> float:
    _check(grades, k)
    ideal = dcg(sorted((g for g in grades if g > 0), reverse=True), k)
    return dcg(gains, k) / ideal


def judged_at_k(judged: Sequence[bool], k: int) -> float:
    top = list(judged[:k])
    return sum(top) / len(top) if top else 0.0


def condensed(gains: Sequence[float], judged: Sequence[bool]) -> list[float]:
    """The gains of the judged hits only (a credited hit is judged), in rank order."""
    return [g for g, j in zip(gains, judged) if j or g > 0]


def bpref(gains: Sequence[float], nonrelevant: Sequence[bool], grades: Sequence[float], n_nonrelevant: int) -> float:
    """trec_eval's bpref: ``nonrelevant[i]``: hit i is judged non-relevant (and credited nothing)."""
    _check(grades, 1)
    r = sum(1 for g in grades if g > 0)
    denominator = min(r, n_nonrelevant)
    total, above = 0.0, 0
    for g, nonrel in zip(gains, nonrelevant):
        if g > 0:
            total += 1.0 - (min(above, r) / denominator) if above else 1.0
        elif nonrel:
            above += 1
    return total / r


def first_relevant_rank(gains: Sequence[float]) -> int | None:
    for i, g in enumerate(gains, start=1):
        if g > 0:
            return i
    return None
