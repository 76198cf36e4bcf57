"""Score ranked lists against a golden set: a per-case table and segmented aggregates.

Aggregates are means over scorable cases (cases with at least one non-stale relevant span).
Segments: by query ``kind`` (logged as ``recall_at_5.exact``) and by ``doc_type`` (logged as
``recall_at_5.doc_type.config``). Cases whose every relevant span is stale are reported in
``excluded`` and never counted as misses. A production query recorded without evidence (``rag-exp
golden import-queries``) is scored once a judgement finds a relevant passage for it; until then it is
``unanswered`` (reported, not scored: recall of a query with nothing relevant is undefined, and
trec_eval drops such topics too). An imported query's traffic stratum joins its kind in the
segment (``recall_at_5.production-head``).

The per-case table (``per_case.json`` of a run) holds, besides the metrics, each case's credited
``gains`` by rank and ``duplicate_ranks``: the ranks at which the system repeated a passage it had
already returned (scored as what the user sees: a repeat keeps its rank and earns nothing).
Per evidence group (a case that needs A *and* B, kind ``multi``): ``n_groups`` and ``group_ranks``,
the rank at which each group's first relevant passage was retrieved (None: not within the scored
depth), the per-group credit behind recall@k and complete@k.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import pandas as pd

from ..errors import ConfigError
from ..golden.resolve import EvalCase, GoldenSet
from ..span_match import matches
from ..types import RankedList
from . import metrics as M
from .measures import REGISTRY, CaseInputs
from .metric_key import MetricKey, by_segment
from .relevance import credit


@dataclass(frozen=True)
class EvalParams:
    """The ``eval`` config group. ``ks``: cutoffs for recall@k and hit@k; ``mrr_k``, ``ndcg_k``,
    ``judged_k`` as named; ``min_coverage``: the span overlap rule (:mod:`.relevance`)."""

    ks: tuple[int, ...] = (5, 20)
    mrr_k: int = 10
    ndcg_k: int = 10
    judged_k: int = 10
    min_coverage: float = 0.5
    level: str = "chunk"  # chunk | document (collapse chunk hits to documents: benchmarks)
    bootstrap_samples: int = 1000
    seed: int = 13
    ann_recall_queries: int = 50  # queries for the vector leg's ANN recall vs exact KNN (0: skip)
    # how an unjudged hit counts: nonrelevant (a miss, trec_eval's default) | condensed (removed
    # before scoring: recall'@k, RR'@k, nDCG'@k; judged@k is measured on the full list either way)
    unjudged: str = "nonrelevant"
    bpref: bool = False  # also score bpref per case (trec_eval's; robust to incomplete labels)
    # recall@1..curve_k per case, for plots (not a config key)
    curve_k: int = field(default=20, metadata={"omegaconf_ignore": True})

    def __post_init__(self) -> None:
        object.__setattr__(self, "ks", tuple(self.ks))  # OmegaConf builds lists
        if not self.ks or any(k <= 0 for k in self.ks):
            raise ConfigError(f"eval.ks: every k must be > 0, got {list(self.ks)}")
        for name in ("mrr_k", "ndcg_k", "judged_k", "curve_k"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"eval.{name}: must be > 0, got {getattr(self, name)}")
        if not 0 < self.min_coverage <= 1:
            raise ConfigError(f"eval.min_coverage: must be in (0, 1], got {self.min_coverage}")
        if self.level not in ("chunk", "document"):
            raise ConfigError(f"eval.level: must be 'chunk' or 'document', got {self.level!r}")
        if not 0 <= self.bootstrap_samples <= 10_000:  # an index matrix of cases x samples: 10^9 asked for 1.67 TiB
            raise ConfigError(f"eval.bootstrap_samples: must be in 0..10000, got {self.bootstrap_samples}")
        if self.unjudged not in ("nonrelevant", "condensed"):
            raise ConfigError(f"eval.unjudged: must be 'nonrelevant' or 'condensed', got {self.unjudged!r}")

    @property
    def depth_needed(self) -> int:
        return max(*self.ks, self.mrr_k, self.ndcg_k, self.judged_k, self.curve_k)

    def metric_keys(self) -> list[MetricKey]:
        """The per-case columns, in order: the headline measures at their cutoffs, then the others
        (:data:`.measures.REGISTRY`: hit@k and precision@k for the ks, judged@k, bpref when on)."""
        ordered = sorted(REGISTRY.values(), key=lambda m: not m.headline)
        return [MetricKey(m.name, k) for m in ordered for k in m.cutoffs(self)]

    def metric_names(self) -> list[str]:
        return [m.mlflow_name for m in self.metric_keys()]

    def summary_names(self) -> list[str]:
        """The columns of the summary table a run prints (the measures with ``in_summary``)."""
        return [m.mlflow_name for m in self.metric_keys() if REGISTRY[m.metric].in_summary]


@dataclass(frozen=True)
class EvalResult:
    per_case: pd.DataFrame
    metrics: dict[str, float]
    n_cases: int
    excluded: tuple[str, ...] = ()  # case ids whose relevant evidence is all stale
    headline: tuple[str, ...] = field(default_factory=tuple)
    unanswered: tuple[str, ...] = ()  # production queries without evidence and no relevant passage judged
    summary: tuple[str, ...] = ()  # the columns of the printed summary (EvalParams.summary_names)


def score_case(case: EvalCase, ranked: RankedList, p: EvalParams) -> dict:
    hits = ranked.hits[: p.depth_needed]
    c = credit(case, hits, p.min_coverage)
    grades = [e.grade for e in case.relevant]
    group_of = {e.ref: e.group for e in case.relevant}
    rank_groups = [None if ref is None else group_of.get(ref) for ref in c.refs]
    row: dict = {
        "case_id": case.case_id, "query": case.query, "kind": case.segment_kind, "doc_type": case.doc_type,
        "n_relevant": len(grades),
        "first_relevant_rank": M.first_relevant_rank(c.gains),
        "n_groups": case.n_groups,
    }
    if p.unjudged == "condensed":
        gains = M.condensed(c.gains, c.judged)
        scored_groups = [g for g, gain, j in zip(rank_groups, c.gains, c.judged) if j or gain > 0]
    else:
        gains, scored_groups = list(c.gains), rank_groups
    unit_groups = [e.group for e in case.relevant]
    if case.n_groups == 1 or all(g is None for g in unit_groups):  # one group: every relevant unit counts
        scored_groups = unit_groups = None
    inputs = CaseInputs(gains, grades, c.judged, c.gains, lambda: _nonrelevant(case, hits, c, p.min_coverage),
                        scored_groups, unit_groups)
    for key in p.metric_keys():
        row[key.column] = REGISTRY[key.metric].score(inputs, key.k)
    row["recall_curve"] = [M.group_recall_at_k(rank_groups, unit_groups, k) if unit_groups is not None
                           else M.recall_at_k(c.gains, grades, k) for k in range(1, p.curve_k + 1)]
    row["gains"] = list(c.gains)
    # ranks (1-based, within the scored depth) that repeat an earlier hit's span: they keep their
    # rank and earn nothing (:mod:`.relevance`); the first occurrence is the one credited
    row["duplicate_ranks"] = c.duplicate_ranks
    row["group_ranks"] = M.group_first_ranks(rank_groups, case.n_groups)
    row["grades"] = grades
    row["top5"] = [h.chunk_id for h in hits[:5]]
    row["top5_docs"] = [h.doc_id for h in hits[:5]]
    # the ranking itself (first 100), so a run can be exported for trec_eval / ranx
    row["ranked_ids"] = [h.chunk_id for h in ranked.hits[:100]]
    row["ranked_docs"] = [h.doc_id for h in ranked.hits[:100]]
    row["ranked_scores"] = [float(h.score) for h in ranked.hits[:100]]
    row["latency_ms"] = ranked.latency_ms
    return row


def _nonrelevant(case: EvalCase, hits, c, min_coverage: float) -> tuple[list[bool], int]:
    """bpref's input: a hit is judged non-relevant when it overlaps a grade-0 judgement and no
    relevant span of the case (by the overlap rule of :mod:`.relevance`); and the number of
    grade-0 judgements."""
    nonrel_spans = [e.span for e in case.judged if e.grade == 0]
    rel_spans = [e.span for e in case.relevant]

    def over(h, spans) -> bool:
        return any(matches(h.doc_id, h.start, h.end, s.doc_id, s.start, s.end, min_coverage) for s in spans)

    flags = [g == 0 and over(h, nonrel_spans) and not over(h, rel_spans) for h, g in zip(hits, c.gains)]
    return flags, len(nonrel_spans)


def aggregate(per_case: pd.DataFrame, names: list[str]) -> dict[str, float]:
    if per_case.empty:
        return {}
    return {key.mlflow_name: float(values.mean()) for key, values in by_segment(per_case, names)}


def evaluate(golden: GoldenSet, results: Mapping[str, RankedList], p: EvalParams = EvalParams(),
             failed: tuple[str, ...] = ()) -> EvalResult:
    """``failed``: case ids whose query could not be searched; excluded (never scored as misses)
    and reported by the caller."""
    rows, excluded, unanswered = [], [], []
    skip = set(failed)
    for case in golden.cases:
        if case.case_id in skip:
            continue
        if case.all_stale:
            excluded.append(case.case_id)
            continue
        if case.unanswered:
            unanswered.append(case.case_id)
            continue
        if not case.relevant:
            raise ConfigError(f"golden set {golden.path}: case {case.case_id} has no relevant evidence")
        if case.case_id not in results:
            raise ConfigError(f"no retrieval result for case {case.case_id}")
        rows.append(score_case(case, results[case.case_id], p))
    per_case = pd.DataFrame(rows)
    names = p.metric_names()
    metrics = aggregate(per_case, names)
    if not any(c.n_groups > 1 for c in golden.cases):  # complete@k would repeat hit@k: per case only
        metrics = {k: v for k, v in metrics.items() if not REGISTRY[MetricKey.parse(k).metric].groups_only}
        names = [n for n in names if not REGISTRY[MetricKey.parse(n).metric].groups_only]
    summary = [n for n in p.summary_names() if n in names]
    metrics["n_cases"] = float(len(rows))
    if len(per_case):
        metrics["latency_ms_p50"] = float(per_case["latency_ms"].quantile(0.5))
        metrics["latency_ms_p95"] = float(per_case["latency_ms"].quantile(0.95))
    return EvalResult(per_case, metrics, len(rows), tuple(excluded), tuple(names), tuple(unanswered),
                      tuple(summary))
