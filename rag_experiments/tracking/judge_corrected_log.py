"""A run's judge-corrected metrics in MLflow: logged beside its own, read back by compare.

The numbers come from :mod:`rag_experiments.evaluation.judge_corrected`; this module puts them
into the run (metrics ``judge_corrected_<metric>`` with ``.ci_low`` / ``.ci_high``, the artifact
``judge_corrected.json``), reads the artifact back, and writes the lines compare, promote and the
gate show beside their uncorrected numbers (:func:`judge_corrected_lines`): each run's corrected
value and, against the baseline, the corrected paired difference with its 95% interval.
"""

from __future__ import annotations

from typing import Sequence

from ..evaluation.judge_corrected import ARTIFACT, PREFIX, JudgeCorrected, corrected_delta
from ..evaluation.metric_key import metric_title
from .mlflow_run import dict_json, log_batch, log_files
from .runs import artifact_json

CASES_METRIC = "judge_corrected.cases"


def log_judge_corrected(run_id: str | None, corrected: JudgeCorrected | None) -> None:
    """Log ``corrected`` into the run (nothing when either is None)."""
    if run_id is None or corrected is None:
        return
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    log_batch(client, run_id, metrics=corrected.metrics(),
              tags={"judge_corrected": f"{len(corrected.cases)} cases of {corrected.n_all}"})
    log_files(client, run_id, {ARTIFACT: dict_json(corrected.to_json())})


def read_judge_corrected(run_id: str, client=None, artifact_uri: str = "") -> dict | None:
    """The run's ``judge_corrected.json``, or None when it logged none (or it cannot be read)."""
    return artifact_json(run_id, ARTIFACT, client, artifact_uri)


def _interval(lo: float, hi: float, signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"[{f.format(lo)}, {f.format(hi)}]"


def judge_corrected_lines(runs: Sequence, labels: Sequence[str], metrics: Sequence[str]) -> list[str]:
    """One line per run that logged judge-corrected metrics (``runs[0]`` is the baseline): the
    corrected value of each of ``metrics`` it corrected, and against the baseline the corrected
    paired difference (per-case differences on the cases both runs' samples hold) beside the
    uncorrected one. Nothing when no run has them."""
    if not any(CASES_METRIC in r.metrics for r in runs):
        return []
    base = runs[0]
    arts = {}
    for r in runs:
        if CASES_METRIC in r.metrics:
            arts[r.id] = read_judge_corrected(r.id, artifact_uri=getattr(r, "artifact_uri", ""))
    lines = []
    for i, (r, label) in enumerate(zip(runs, labels)):
        if CASES_METRIC not in r.metrics:
            if i == 0:
                lines.append(f"judge-corrected: the baseline {label} logged none (no case sample when it ran): "
                             "no corrected differences")
            continue
        parts = []
        for m in metrics:
            if PREFIX + m not in r.metrics:
                continue
            part = (f"{metric_title(m)} {r.metrics[PREFIX + m]:.3f} "
                    f"{_interval(r.metrics[f'{PREFIX}{m}.ci_low'], r.metrics[f'{PREFIX}{m}.ci_high'])}")
            same_golden = r.golden is not None and r.golden == base.golden
            if i and same_golden and base.per_case is not None and r.per_case is not None \
                    and m in base.per_case.columns and m in r.per_case.columns:
                d = corrected_delta(base.per_case, r.per_case, arts.get(base.id), arts.get(r.id), m)
                if d is not None:
                    sure = "" if d.low <= 0 <= d.high else " *"
                    part += (f" Δ{d.estimate:+.3f} {_interval(d.low, d.high, True)}{sure} "
                             f"(machine labels Δ{d.uncorrected:+.3f}, {d.n_labelled} people-checked cases)")
            parts.append(part)
        if parts:
            n = int(r.metrics[CASES_METRIC])
            lines.append(f"judge-corrected {label} (people's labels on {n} cases): " + "; ".join(parts))
    if len(lines) > 0:
        lines.append("judge-corrected: 95% intervals with the judge's error in them (PPI over a random sample of "
                     "cases people checked); * = the corrected difference excludes 0")
    return lines
