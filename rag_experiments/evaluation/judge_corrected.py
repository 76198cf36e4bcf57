"""Judge-corrected headline metrics of a run: its ranked lists scored again under people's labels.

When people have checked every machine-judged pair of a random sample of cases (``rag-exp golden
spotcheck --cases N``, :func:`rag_experiments.golden.spotcheck_sample.case_sample`), each sampled case is
scored twice from the run's own ranked lists: as the run scored it (machine labels, ``M``) and
with each machine verdict replaced by the person's (``H``, same spans, same overlap rule, same
metric code: :func:`.evaluate.score_case`). :func:`rag_experiments.stats.ppi.ppi_mean` (plain
PPI) turns the
run's ``M`` on all cases and ``(H, M)`` on the sample into an estimate of the metric under
people's labels, with a 95% interval that holds both the case sampling and the human sample.

What it estimates: the metric the run would get if people had judged every pair the machines
judged (unjudged hits stay unjudged, as in the run). Only the headline metrics of all cases are
corrected: per-segment samples are too small.

A run logs ``judge_corrected_<metric>`` with ``.ci_low`` / ``.ci_high`` beside ``<metric>`` and
the per-case ``H`` of its sample in ``judge_corrected.json``, from which compare, promote and the
gate correct a paired difference (:func:`corrected_delta`): per-case differences of the two runs,
on the sample both runs' files hold (both are prefixes of one case order, so their common part is
the shorter prefix: still a random sample).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

import pandas as pd

from ..golden.resolve import EvalCase, GoldenSet
from ..golden.spotcheck_sample import CaseSample, case_sample, machine_judged_pairs, read_spotchecks, spotcheck_path
from ..stats.ppi import MIN_CASES, Corrected, ppi_mean, ppi_paired
from ..types import RankedList
from .evaluate import EvalParams, score_case
from .metric_key import headline, metric_title

ARTIFACT = "judge_corrected.json"
PREFIX = "judge_corrected_"


def human_case(case: EvalCase, grades: Mapping[str, int], own: Mapping[tuple, int] | None = None) -> EvalCase:
    """The case with every machine verdict in ``grades`` (judgement id -> grade) replaced by the
    person's. ``own``: (doc id, start, end) -> grade for machine judgements that re-graded the
    case's own evidence (the evidence keeps its ref, so it is found by its span)."""
    own = own or {}
    evidence = []
    for e in case.evidence:
        if e.ref in grades:
            e = replace(e, grade=grades[e.ref])
        elif e.ref.startswith(f"{case.case_id}#") and e.span.key in own:
            e = replace(e, grade=own[e.span.key])
        evidence.append(e)
    return replace(case, evidence=tuple(evidence))


@dataclass(frozen=True)
class JudgeCorrected:
    """The corrected headline metrics of one run."""

    estimates: dict[str, Corrected]
    sample: CaseSample
    cases: tuple[str, ...]  # the sampled cases the run scored, in case order
    human: dict[str, dict[str, float]]  # case id -> metric -> value under people's labels
    n_all: int
    pairs_per_case: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {"judge_corrected.cases": float(len(self.cases))}
        for name, c in self.estimates.items():
            out[PREFIX + name] = c.estimate
            out[f"{PREFIX}{name}.ci_low"] = c.low
            out[f"{PREFIX}{name}.ci_high"] = c.high
        return out

    def to_json(self) -> dict:
        return {
            "method": "PPI over cases (rag_experiments.stats.ppi): people's labels on every machine-judged pair "
                      "of a random sample of cases (rag-exp golden spotcheck --cases N)",
            "sample": {**self.sample.to_json(), "scored_cases": len(self.cases), "n_all": self.n_all},
            "cases": list(self.cases),
            "human_per_case": self.human,
            "estimates": {k: {**v.to_dict(), "halve": v.cases_to_halve()} for k, v in self.estimates.items()},
        }

    def lines(self) -> list[str]:
        """What a run prints: each metric corrected, beside the machine-label value."""
        out = [f"judge-corrected (people's labels on every machine pair of {len(self.cases)} random cases of "
               f"{self.n_all}, PPI):"]
        for name, c in self.estimates.items():
            half = c.cases_to_halve()
            more = (f"; {half['more_total']} more checked cases halve it" if half["more_total"] is not None else
                    f"; its judge part halves with {half['more_judge']} more checked cases" if half["more_judge"] else "")
            out.append(f"  {metric_title(name)} {c.estimate:.3f} [{c.low:.3f}, {c.high:.3f}] "
                       f"(machine labels {c.uncorrected:.3f}; mean error on the sample {c.mean_error:+.3f}{more})")
        return out


def judge_corrected(golden: GoldenSet, results: Mapping[str, RankedList], params: EvalParams,
                    per_case: pd.DataFrame, names: list[str] | tuple[str, ...] | None = None,
                    spot_path=None) -> JudgeCorrected | None:
    """The run's headline metrics corrected by the case sample, or None without one of at least
    :data:`~rag_experiments.stats.ppi.MIN_CASES` cases the run scored."""
    if per_case.empty or golden.path is None:
        return None
    spot = spot_path or spotcheck_path(golden.path)
    checks = read_spotchecks(spot)
    if not checks:
        return None
    sample = case_sample(golden.records, checks)
    scored = per_case.set_index("case_id")
    cases = tuple(c for c in sample.cases if c in scored.index and c in results)
    if len(cases) < MIN_CASES:
        return None
    names = list(names or [k.mlflow_name for k in headline(params.ks, params.mrr_k, params.ndcg_k)])
    by_id = {c.case_id: c for c in golden.cases}
    own = _own_evidence_grades(golden, sample)
    human: dict[str, dict[str, float]] = {}
    for cid in cases:
        row = score_case(human_case(by_id[cid], sample.grades, own.get(cid)), results[cid], params)
        human[cid] = {n: float(row[n]) for n in names}
    estimates = {}
    for n in names:
        m_all = scored[n].to_numpy(dtype=float)
        estimates[n] = ppi_mean(m_all, [human[c][n] for c in cases], scored.loc[list(cases), n].to_numpy(dtype=float))
    return JudgeCorrected(estimates, sample, cases, human, len(scored), sample.pairs_per_case)


def _own_evidence_grades(golden: GoldenSet, sample: CaseSample) -> dict[str, dict[tuple, int]]:
    """Per case: span key -> people's grade, for sampled machine judgements (the resolver may have
    folded one into the case's own evidence, which keeps the evidence's ref)."""
    out: dict[str, dict[tuple, int]] = {}
    for j in machine_judged_pairs(golden.records):
        if j.id in sample.grades:
            out.setdefault(j.case_id, {})[j.span.key] = sample.grades[j.id]
    return out


def corrected_delta(per_case_a: pd.DataFrame, per_case_b: pd.DataFrame, artifact_a: Mapping | None,
                    artifact_b: Mapping | None, metric: str) -> Corrected | None:
    """The judge-corrected paired difference ``b - a`` of ``metric`` over the cases both runs
    scored, from the two runs' per-case tables and ``judge_corrected.json``; None when either run
    has none or they share fewer than MIN_CASES sampled cases."""
    if not artifact_a or not artifact_b:
        return None
    a = per_case_a.set_index("case_id")[metric]
    b = per_case_b.set_index("case_id")[metric]
    common = [c for c in a.index if c in b.index]
    ha, hb = artifact_a.get("human_per_case", {}), artifact_b.get("human_per_case", {})
    position = {c: i for i, c in enumerate(common)}
    sampled = [c for c in artifact_a.get("cases", []) if c in position and c in set(artifact_b.get("cases", []))
               and metric in ha.get(c, {}) and metric in hb.get(c, {})]
    if len(sampled) < MIN_CASES:
        return None
    return ppi_paired(a[common].to_numpy(dtype=float), b[common].to_numpy(dtype=float),
                      [ha[c][metric] for c in sampled], [hb[c][metric] for c in sampled],
                      [position[c] for c in sampled])
