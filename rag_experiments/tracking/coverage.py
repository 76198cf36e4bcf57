"""How complete the labels behind a comparison are: judged@k per run, and whether it differs.

A hit nobody judged counts as a miss, so a run whose top k holds more unjudged chunks than the
baseline's is measured against a harder standard. That happens when its chunks were never in
the pool the near-misses were judged from: another variant, another chunking, an external
system. judged@k (``judged_at_<k>``, the share of the top k covering a judged span, any grade)
is logged per case. Here its paired difference against the baseline is tested like any metric
(paired randomization test, Holm across the runs). When it differs significantly, the comparison
says so in one line with the command that judges the two runs' pool. ``promote`` refuses when
the champion is the less judged of the two (its unjudged hits may be relevant, so the
candidate's win may be an artefact of the labels; ``--force`` overrides, recorded); a candidate
that wins while less judged than the champion wins conservatively, and is not refused.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, replace
from typing import Sequence

from ..errors import GoldenSetError
from ..evaluation import bounds as B
from ..evaluation.metric_key import metric_title
from ..evaluation.rescore import rescore
from ..golden.resolve import GoldenSet, load_golden
from ..golden.versions import GoldenVersion, NotAnAncestor
from ..stats.paired import holm, paired_permutation_test
from ..stats.shown import p_eq
from .champion_newest import eval_params
from .runs import RunView
from .versioned import logged_precision, quality_metrics, candidate_files, find_chain, load_ranked_lists

JUDGED_PREFIX = "judged_at_"
COVERAGE_LINE = "LABEL COVERAGE DIFFERS"  # how a coverage warning starts


def judged_columns(runs: Sequence[RunView]) -> list[str]:
    """The judged@k columns the runs' per-case tables share, smallest k first."""
    tables = [r.per_case for r in runs if r.per_case is not None]
    if not tables:
        return []
    common = set.intersection(*[{c for c in t.columns if str(c).startswith(JUDGED_PREFIX)} for t in tables])
    return sorted(common, key=lambda c: int(c[len(JUDGED_PREFIX):]) if c[len(JUDGED_PREFIX):].isdigit() else 0)


def fix_command(runs: Sequence[RunView], k: int) -> str:
    """`rag-exp golden label --pool` over these runs: their unjudged hits in the top k are judged
    (a span judged once is never paid for again), after which their judged@k is comparable."""
    return shlex.join(["rag-exp", "golden", "label", "--pool", *[r.id for r in runs], "-k", str(k)])


@dataclass(frozen=True)
class CoverageGap:
    label: str
    column: str  # judged_at_10
    base: float
    value: float
    delta: float
    p: float  # Holm-adjusted where it came from a comparison
    command: str

    def line(self) -> str:
        k = self.column[len(JUDGED_PREFIX):]
        side = "fewer" if self.delta < 0 else "more"
        p = p_eq(self.p)
        return (f"{COVERAGE_LINE}: {self.label} has judged@{k} {self.value:.3f} vs the baseline's "
                f"{self.base:.3f} (Δ{self.delta:+.3f}, {p}): {side} of its top {k} were ever judged, "
                f"and an unjudged hit counts as a miss, so the comparison is biased "
                f"{'against' if self.delta < 0 else 'for'} it; judge the pool of both first: {self.command}")


def with_judged_at(runs: Sequence[RunView], metric: str, golden: GoldenSet | None = None, c=None
                   ) -> tuple[list[RunView], str] | None:
    """The runs with judged@k at the depth of ``metric`` in their per-case tables (recall@5 ->
    ``judged_at_5``: what one labelling depth checks), scored from each run's stored ranked lists on
    ``golden`` (default: the newest version of the runs' golden file), and that column's name. None
    when a run already logs it, or it cannot be computed (a metric without a cut-off, runs on
    different golden versions, a run without ranked lists or a per-case table): the logged judged@k
    stands then."""
    try:
        k = B.metric_parts(metric)[1]
    except ValueError:
        return None
    column = f"{JUDGED_PREFIX}{k}"
    if any(r.per_case is None or column in r.per_case for r in runs) or len({r.golden for r in runs}) > 1:
        return None
    golden = golden or newest_golden(runs)
    if golden is None:
        return None
    out = []
    for r in runs:
        ranked = load_ranked_lists(r, c)
        if ranked is None:
            return None
        result, _missing = rescore(golden, ranked, replace(eval_params(r.params), judged_k=k))
        judged = result.per_case[["case_id", column]]
        per_case = r.per_case.merge(judged, on="case_id", how="inner")  # the cases both score
        out.append(replace(r, per_case=per_case))
    return out, column


def gaps_at_depth(runs: Sequence[RunView], labels: Sequence[str], metric: str, golden: GoldenSet | None,
                  alpha: float, n_resamples: int, seed: int, c=None, sampled: bool = False) -> list[str] | None:
    """The label-coverage check at the depth of the metric compared: one labelling depth. Deciding on
    recall@5 (``golden label --decide``, the default objective) labels the top 5, so the check asks for
    judged@5 and its command for ``-k 5``; a logged judged@10 would keep asking for ``-k 10``. judged@k
    per case comes from :func:`with_judged_at` (the stored ranked lists on the newest labels), its
    paired difference against the first run tested as compare tests a column (Holm across the runs).
    ``sampled``: the runs are scored on a label sample (coverage differs by design), and the line says
    the sampled-labels note is the unbiased comparison. The warning lines, or None when :func:`with_judged_at` cannot say (then the table's judged@k
    check stands)."""
    deep = with_judged_at(runs, metric, golden, c)
    if deep is None:
        return None
    runs, column = deep
    k = int(column[len(JUDGED_PREFIX):])
    base = runs[0].per_case.set_index("case_id")[column].astype(float)
    tests = []
    for r in runs[1:]:
        other = r.per_case.set_index("case_id")[column].astype(float)
        shared = base.index.intersection(other.index)
        a, b = base.loc[shared].to_numpy(), other.loc[shared].to_numpy()
        tests.append((a, b, paired_permutation_test(a, b, n_resamples=n_resamples, seed=seed) if len(a) else math.nan))
    lines = []
    for r, label, (a, b, _p), q in zip(runs[1:], labels[1:], tests, holm([t[2] for t in tests])):
        if q < alpha:
            gap = CoverageGap(label, column, float(a.mean()), float(b.mean()), float(b.mean() - a.mean()), q,
                              fix_command([runs[0], r], k))
            lines.append(f"{gap.line()} (-k {k}: the depth of {metric_title(metric)}, the metric compared; no LLM "
                         f"key: label them yourself with {gap.command} --by-hand, or rag-exp golden label --decide "
                         f"{runs[0].id} {r.id} --by-hand for the passages that can change this decision)"
                         + ("; scored on a label sample, the sampled-labels note below is the unbiased comparison"
                            if sampled else ""))
    return lines


# -- the newest labels: rescored, not re-run; and how far the unjudged hits could move each number --
@dataclass(frozen=True)
class NewestLabels:
    """The runs rescored on the golden file as it is now (None: not rescored, ``note`` says why)."""

    runs: list[RunView] | None
    golden: GoldenSet | None
    note: str = ""


def newest_golden(runs: Sequence[RunView]) -> GoldenSet | None:
    """The golden file the runs used, as it is now, when every run's version is a prefix of it."""
    versions = [GoldenVersion.from_tags(r.tags) for r in runs]
    if any(v is None for v in versions):
        return None
    try:
        path, _ = find_chain(versions, candidate_files(runs))
        return load_golden(path)
    except (NotAnAncestor, GoldenSetError, OSError):
        return None


def on_newest_labels(runs: Sequence[RunView], c=None) -> NewestLabels:
    """Every run's stored ranked lists (``run.trec``) scored on the newest golden version, on the
    cases all of them have a list for, when the runs share one version and labels changed since they ran (what the champion's
    rescoring does, for every run of a comparison): labels given after a sweep count at once, with no
    re-run. Runs that kept no ranked lists leave the comparison on its logged values, and say so."""
    golden = newest_golden(runs)
    if golden is None or all(r.golden == golden.digest for r in runs):
        return NewestLabels(None, golden)
    if len({r.golden for r in runs}) > 1:  # runs on several versions: compared on the oldest one's cases
        return NewestLabels(None, golden)  # and labels (versioned.align), as the invariant says
    frames = []
    for r in runs:
        ranked = load_ranked_lists(r, c)
        if ranked is None:
            return NewestLabels(None, golden, f"the labels changed since some runs were scored (golden "
                                f"{golden.digest[:12]} now), but run {r.id[:12]} ({r.label}) kept no ranked lists "
                                "(run.trec): compared on the logged values; re-run it to use the newest labels")
        result, _missing = rescore(golden, ranked, eval_params(r.params))
        frames.append(result.per_case)
    common = set.intersection(*[set(df["case_id"]) if len(df) else set() for df in frames])
    version = GoldenVersion.of(golden)
    out = []
    for r, df in zip(runs, frames):
        df = logged_precision(df[df["case_id"].isin(common)].reset_index(drop=True))
        tags = {**r.tags, **version.tags(), "golden_rescored_from": r.golden or ""}
        out.append(replace(r, per_case=df, metrics=quality_metrics(df), tags=tags))
    older = sorted({r.golden[:12] for r in runs if r.golden and r.golden != golden.digest})
    note = (f"rescored, not re-run: every run's stored ranked lists (run.trec) scored on the newest labels, golden "
            f"{golden.digest[:12]} ({len(golden.records)} records), on the {len(common)} cases all of them retrieved "
            f"(logged on {', '.join(older)})")
    return NewestLabels(out, golden, note)


def bounds_lines(runs: Sequence[RunView], metric: str, golden: GoldenSet | None = None, c=None,
                 labels: Sequence[str] | None = None) -> list[str]:
    """Per run, ``metric`` with the range its unjudged hits in the cut-off allow, and each run's
    paired Δ against the first (the baseline) with its range (evaluation.bounds), on the newest labels.
    ``labels``: the runs' names as the caller's table shows them (else each run's own name)."""
    try:
        B.metric_parts(metric)
    except ValueError:
        return []
    golden = golden or newest_golden(runs)
    if golden is None:
        return []
    k = B.metric_parts(metric)[1]
    seen = []
    for r in runs:
        ranked = load_ranked_lists(r, c)
        seen.append(None if ranked is None else B.views(golden, ranked, k, eval_params(r.params).min_coverage))
    lines = [f"how far unjudged hits could move {metric_title(metric)} (each one in the top {k} relevant or not; "
             f"golden {golden.digest[:12]}):"]
    base = seen[0]
    names = list(labels) if labels is not None else [r.label for r in runs]
    for name, v in zip(names, seen):
        if v is None:
            lines.append(f"  {name}: no stored ranked lists (run.trec): not bounded")
            continue
        text = f"  {name}: {B.run_bounds(metric, v).text()}"
        if base is not None and v is not base:
            text += f"; {B.delta_bounds(metric, v, base).text(name, names[0])}"
        lines.append(text)
    return lines
