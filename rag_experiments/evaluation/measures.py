"""The quality measures a run logs, one registered declaration each (after ir_measures: a measure
is a name, its parameters and a description; everything else derives from it).

A :class:`Measure` says how to score one case (:class:`CaseInputs` -> a float, functions of
:mod:`.metrics`), which ``eval`` field gives its cutoffs (``ks``: one column per k; ``mrr_k``: one
column; ``None``: no cutoff), what it means (the metrics reference shows it), whether it is a
headline column (summaries, compare, promote, the gate), which ``eval`` switch turns it on when
it is not always logged, and whether the summary table a run prints shows it. :data:`REGISTRY` is the one list: the per-case columns
(:meth:`~.evaluate.EvalParams.metric_keys`), the names :mod:`.metric_key` parses, the headline and
the generated reference read it, in its order. Adding a measure is one entry here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from . import metrics as M


@dataclass(frozen=True)
class CaseInputs:
    """What the measures see of one case, from :func:`.relevance.credit`."""

    gains: Sequence[float]  # credited gain by rank (the judged hits only under eval.unjudged=condensed)
    grades: Sequence[float]  # grades of the case's relevant units
    judged: Sequence[bool]  # hit at rank i overlaps any judgement (the full list)
    full_gains: Sequence[float]  # the credited gains of the full list
    nonrelevant: Callable[[], tuple[Sequence[bool], int]] = lambda: ((), 0)  # bpref: judged-non-relevant
    # flags by rank and the number of non-relevant judgements (computed only when asked)
    # evidence groups (all-of): the group of the unit credited at each rank of ``gains`` (None: none
    # credited), and the group of each relevant unit, parallel to ``grades``; None: one group
    rank_groups: Sequence[int | None] | None = None
    unit_groups: Sequence[int | None] | None = None

    def groups(self) -> tuple[Sequence[int | None], Sequence[int | None]]:
        """(rank_groups, unit_groups); a case without them is one group: every credited rank and unit is 0."""
        if self.rank_groups is not None and self.unit_groups is not None:
            return self.rank_groups, self.unit_groups
        return [0 if g > 0 else None for g in self.gains], [0 if g > 0 else None for g in self.grades]


def _recall(c: CaseInputs, k: int) -> float:
    return M.group_recall_at_k(*c.groups(), k)


def _complete(c: CaseInputs, k: int) -> float:
    return M.complete_at_k(*c.groups(), k)


def _bpref(c: CaseInputs, k: int | None) -> float:
    flags, n = c.nonrelevant()
    return M.bpref(c.full_gains, flags, c.grades, n)


@dataclass(frozen=True)
class Measure:
    name: str  # the column and MLflow name: <name>_at_<k>, or <name> without a cutoff
    score: Callable[[CaseInputs, Any], float]  # (case, k) -> value
    cutoff: str | None  # the eval field of its cutoffs: ks (one per k), mrr_k, ndcg_k, judged_k; None: none
    description: str
    headline: bool = False  # a headline column (summaries, compare, promote, gate)
    when: str | None = None  # the eval switch that turns it on; None: always logged
    in_summary: bool = True  # a column of the summary table a run prints (else logged and per case only)
    # logged (and printed) only for a golden set with a case of several evidence groups; always per case
    groups_only: bool = False

    def cutoffs(self, eval_params: Any) -> tuple[int | None, ...]:
        """The cutoffs logged under ``eval_params`` (``()``: not logged; ``(None,)``: no cutoff)."""
        if self.when is not None and not getattr(eval_params, self.when):
            return ()
        if self.cutoff is None:
            return (None,)
        value = getattr(eval_params, self.cutoff)
        return tuple(int(k) for k in value) if isinstance(value, (tuple, list)) else (int(value),)


_MEASURES = [
    Measure("recall", _recall, "ks",
            "recall@k = |relevant evidence in the top k| / |relevant evidence| (trec_eval's recall_k), one "
            "per k of `eval.ks`, averaged over the cases. A case that needs several passages (evidence "
            "groups, kind `multi`) scores the mean of that share over its groups: with one passage per "
            "group, the share of groups found in the top k.", headline=True),
    Measure("mrr", lambda c, k: M.reciprocal_rank(c.gains, c.grades, k), "mrr_k",
            "reciprocal rank of the first relevant hit within the top `eval.mrr_k` (0 when none), averaged.",
            headline=True),
    Measure("ndcg", lambda c, k: M.ndcg_at_k(c.gains, c.grades, k), "ndcg_k",
            "nDCG@`eval.ndcg_k` with linear gain (grade YES = 2, PART = 1; trec_eval's ndcg_cut).", headline=True),
    Measure("hit", lambda c, k: M.hit_at_k(c.gains, c.grades, k), "ks",
            "1 when any relevant evidence is in the top k, else 0, per k of `eval.ks`, averaged."),
    Measure("complete", _complete, "ks",
            "complete@k: 1 when every evidence group of the case has a relevant passage in the top k, else 0, "
            "per k of `eval.ks`, averaged (a case of one group: hit@k). The all-of measure of `multi` cases: "
            "always in per_case.json, logged and printed only when the golden set has a case with several "
            "evidence groups.", groups_only=True),
    Measure("precision", lambda c, k: M.precision_at_k(c.gains, c.grades, k), "ks",
            "precision@k = |credited hits in the top k| / k (trec_eval's P_k: a list shorter than k counts "
            "its missing ranks as misses), per k of `eval.ks`, averaged; logged and in per_case.json, not "
            "printed in the run's summary table.", in_summary=False),
    Measure("judged", lambda c, k: M.judged_at_k(c.judged, k), "judged_k",
            "judged@`eval.judged_k`: the share of the top k hits that the golden set has a judgement for "
            "(label coverage; low values make the other numbers uncertain)."),
    Measure("bpref", _bpref, None,
            "bpref (trec_eval's): how often relevant hits rank above judged non-relevant ones; "
            "with `eval.bpref=true`.", when="bpref"),
]

#: every measure by name, in table order (headline measures first)
REGISTRY: dict[str, Measure] = {m.name: m for m in _MEASURES}
