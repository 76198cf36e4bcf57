"""Side-by-side comparison of runs on one golden set: values, intervals, paired deltas.

One row per run, one column per metric plus one per segment (the primary metric on that
segment: a query kind such as ``exact``, or ``doc_type.<type>``). Each cell shows the logged
value with its 95% bootstrap interval (the run's ``<metric>.ci_low`` / ``.ci_high``). Every run
but the baseline also shows, per cell, the paired delta against the baseline (candidate minus
baseline, over cases aligned by ``case_id``) and the p-value of the paired randomization test
(:func:`rag_experiments.stats.paired.paired_permutation_test`), Holm-corrected across the runs
compared in that column, plus win/tie/loss counts on the primary metric. A cell whose delta is not
significant also carries what its paired cases could detect (:mod:`rag_experiments.stats.power`: the
minimum detectable effect at power 0.8, and the cases that would detect the observed delta).

:func:`build_comparison` returns a :class:`Comparison` that renders itself (``to_rich``, ``to_markdown``:
:mod:`.compare_render`); its plots, saved or logged to MLflow, are in :mod:`.compare_plots`.

The baseline is the first run given (with ``--sweep``/``--last-sweep``: the first sweep point
to start), or ``--baseline``. Runs measured on a different golden set (``golden_sha256`` tag)
than the baseline get no p-value (their cases do not pair); a different golden set or corpus
(``corpus_digest``) anywhere in the selection is warned about loudly and marks the table.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np
import pandas as pd

from ..errors import UserError
from ..evaluation.metric_key import MetricKey, Segment, metric_title
from ..stats.bootstrap import bootstrap_interval
from ..stats.paired import WinTieLoss, holm, paired_permutation_test, test_settings, win_tie_loss
from ..stats.power import PowerEstimate, estimate
from .compare_render import markdown_table, rich_tables
from .coverage import JUDGED_PREFIX, CoverageGap, fix_command, judged_columns
from .judge_corrected_log import judge_corrected_lines
from .sampled_log import MARK as SAMPLED_MARK
from .sweep_parent import order_key
from .sampled_log import sampled_lines
from .runs import RunView

#: params that never explain a difference in results (where and how a run was logged)
IGNORED_PARAM_PREFIXES = ("run_name", "progress", "tracking.", "db.", "hydra.")


#: the family one star's Holm correction covers. "runs" (the default): the runs compared with the
#: baseline, separately in each column (metric, segment, judged@k), so with two runs nothing is corrected
#: and each column's star is its own test. "all": every paired test of the table at once (runs x metrics x
#: segments x judged@k), a family-wise error rate for the whole table.
FAMILIES = ("runs", "all")


@dataclass(frozen=True)
class Column:
    """A table column: the metric (and segment) it shows, under its header."""

    key: MetricKey  # its mlflow_name keys the row's cells: recall_at_5.exact
    title: str


@dataclass(frozen=True)
class Cell:
    value: float | None
    interval: tuple[float, float] | None
    delta: float | None = None
    p: float | None = None  # raw paired-test p-value
    p_adj: float | None = None  # Holm-adjusted across the runs in this column
    n_paired: int = 0
    # what these paired cases could detect (stats.power): the MDE and the cases the observed delta needs
    power: PowerEstimate | None = None


@dataclass(frozen=True)
class Row:
    run: RunView
    label: str
    baseline: bool
    cells: dict[str, Cell]
    wtl: WinTieLoss | None
    flags: tuple[str, ...] = ()  # "golden", "corpus": differs from the baseline

    @property
    def n_cases(self) -> int | None:
        if self.run.per_case is not None:
            return len(self.run.per_case)
        n = self.run.metrics.get("n_cases")
        return None if n is None else int(n)


@dataclass(frozen=True)
class Comparison:
    rows: list[Row]
    columns: list[Column]
    primary: str
    alpha: float
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    family: str = "runs"  # what one Holm correction covers: FAMILIES

    @property
    def baseline(self) -> Row:
        return self.rows[0]

    @property
    def comparable(self) -> bool:
        return not any(r.flags for r in self.rows)

    def to_rich(self, width: int = 180) -> list:
        return rich_tables(self, width)

    def to_markdown(self, rows: Sequence[Row] | None = None) -> str:
        return markdown_table(self, rows)


# -- labels ---------------------------------------------------------------------------------------
def short_labels(runs: Sequence[RunView], max_len: int = 60) -> list[str]:
    """Run names without the override tokens every run shares (``corpus.path=... golden.path=...``).

    Hydra names sweep points by all their overrides; only the ones that differ tell runs apart.
    A run left with nothing is called by its variant; duplicates get the run id's first digits.
    """
    names = [r.label for r in runs]
    if len(runs) > 1:
        token_sets = [set(n.split()) for n in names]
        common = set.intersection(*token_sets)
        names = [" ".join(t for t in n.split() if t not in common) for n in names]
    names = [n or r.tags.get("variant") or r.id[:8] for n, r in zip(names, runs)]
    return _unique([n if len(n) <= max_len else n[: max_len - 1] + "…" for n in names], runs)


def _unique(labels: list[str], runs: Sequence[RunView]) -> list[str]:
    return [f"{lab} ({r.id[:6]})" if labels.count(lab) > 1 else lab for lab, r in zip(labels, runs)]


#: the param a run logs for its variant (config `retrieval.variant`, chosen by the group `retrieval=`)
VARIANT_PARAM = "retrieval.variant"


def run_labels(runs: Sequence[RunView]) -> list[str]:
    """Rows named by the params that differ between the runs (``rrf_k=30 keyword_weight=0.5``):
    the last part of a dotted key when that is unambiguous, the full key otherwise. Runs with no
    differing param (or no params) fall back to :func:`short_labels`."""
    diff = differing_params(runs) if len(runs) > 1 else []
    if not diff:
        return short_labels(runs)
    tails = [k.rsplit(".", 1)[-1] for k in diff]
    names = {k: (t if tails.count(t) == 1 else k) for k, t in zip(diff, tails)}
    # the variant is chosen with the Hydra group `retrieval=hybrid` (a sweep's child names, the
    # parent's "Best" line): the same name here, not the param's tail `variant=hybrid`
    names.update({k: "retrieval" for k in diff if k == VARIANT_PARAM})
    labels = [" ".join(f"{names[k]}={r.params[k]}" for k in diff if k in r.params) for r in runs]
    fallback = short_labels(runs)
    return _unique([lab or fb for lab, fb in zip(labels, fallback)], runs)


def sweep_order(runs: Sequence[RunView], objective: str | None, maximize: bool = True) -> list[RunView]:
    """A sweep's points as every table of it lists them (the parent's description, ``rag-exp
    compare --sweep``): the first point to start (the baseline), then the others best-first on
    the objective (a point without it last; ties: the earlier point, :func:`.sweep_parent.order_key`).
    Best-first, so a description cut to MLflow's tag limit keeps the best rows."""
    if not runs:
        return []
    first, rest = runs[0], list(runs[1:])
    if not objective:
        return [first, *rest]

    order = order_key(rest)  # ties: the tie rule of the sweep parent and promote (sweep_parent.best_of)

    def key(r: RunView):
        v = r.metrics.get(objective)
        missing = v is None or (isinstance(v, float) and math.isnan(v))
        return (missing, 0.0 if missing else round(-v if maximize else v, 12), order(r))

    return [first, *sorted(rest, key=key)]


def parent_test_settings(parent: RunView | None, resamples: int | None, seed: int | None) -> tuple[int, int]:
    """The paired tests' (resamples, seed): as given, else what the sweep parent recorded
    (its summary's), else :func:`rag_experiments.stats.paired.test_settings`."""
    tags = parent.tags if parent is not None else {}
    if resamples is None and tags.get(RESAMPLES_TAG, "").isdigit():
        resamples = int(tags[RESAMPLES_TAG])
    if seed is None and tags.get(SEED_TAG, "").isdigit():
        seed = int(tags[SEED_TAG])
    return test_settings(resamples, seed)


#: what a sweep parent records of its summary's paired tests
RESAMPLES_TAG, SEED_TAG, DIRECTION_TAG = "paired_test.resamples", "paired_test.seed", "objective_direction"


# -- segments -------------------------------------------------------------------------------------
def known_segments(runs: Sequence[RunView], primary: str | None = None) -> list[Segment]:
    """The query kinds, then the doc types, of the runs' per-case tables (in order of appearance),
    then those only in logged names of ``primary`` (``recall_at_5.exact``)."""
    # each table's distinct values in order of appearance (not a Segment per case: 46k for a sweep)
    found = [Segment(col, str(v)) for r in runs if r.per_case is not None for col in ("kind", "doc_type")
             if col in r.per_case for v in pd.unique(r.per_case[col].dropna())]
    found = sorted(dict.fromkeys(found), key=lambda s: s.column != "kind")
    logged = [MetricKey.parse(n) for r in runs for n in r.metrics if not n.endswith((".ci_low", ".ci_high"))]
    logged = [k.segment for k in logged if k.segment and k.column == primary and k.segment not in found]
    return found + list(dict.fromkeys(logged))


def resolve_segments(names: Sequence[str] | None, runs: Sequence[RunView], primary: str) -> list[Segment]:
    """Segment names to segments: a query kind (``exact``), ``doc_type.<t>`` or a bare doc type.

    ``None``: every query kind the runs have (per-case tables, else logged metric names).
    """
    known = known_segments(runs, primary)
    kinds = [s.value for s in known if s.column == "kind"]
    dtypes = [s.value for s in known if s.column == "doc_type"]
    if names is None:
        return [Segment("kind", k) for k in sorted(kinds)]
    out = []
    for name in names:
        name = name.strip()
        if not name:
            continue
        if name.startswith(("doc_type.", "doc_type=")) or name in kinds:
            out.append(Segment.parse(name))
        elif name in dtypes:
            out.append(Segment("doc_type", name))
        else:
            raise UserError(f"--segments: no run has a segment {name!r}",
                            hint=f"query kinds: {', '.join(kinds) or 'none'}; doc types: {', '.join(dtypes) or 'none'}")
    return out


def in_segment(per_case: pd.DataFrame, segment: Segment) -> np.ndarray:
    """Which rows of a per-case table belong to ``segment`` (none when it lacks the column)."""
    if segment.column not in per_case:
        return np.zeros(len(per_case), dtype=bool)
    return per_case[segment.column].astype(str).to_numpy() == segment.value


# -- values ---------------------------------------------------------------------------------------
# (mean, bootstrap interval) of a column (on a segment) of a per-case table, per table while it
# lives: a sweep summary asks for the same ones in its table and again in its plots. Keyed by the
# table's id, evicted when the table is collected (so an id is never reused while cached); the
# tables are read-only once loaded.
_FROM_CASES: dict[int, dict] = {}


def _from_cases(per_case: pd.DataFrame, key: MetricKey, samples: int, seed: int) -> tuple[float, tuple[float, float]] | None:
    memo = _FROM_CASES.get(id(per_case))
    if memo is None:
        memo = _FROM_CASES[id(per_case)] = {}
        weakref.finalize(per_case, _FROM_CASES.pop, id(per_case), None)
    k = (key.column, key.segment, samples, seed)
    if k not in memo:
        vals = per_case[key.column].to_numpy(dtype=float)
        if key.segment is not None:
            vals = vals[in_segment(per_case, key.segment)]
        memo[k] = (float(vals.mean()), bootstrap_interval(vals, samples, seed)) if len(vals) else None
    return memo[k]


def value_and_interval(run: RunView, key: MetricKey, samples: int = 1000,
                       seed: int = 13) -> tuple[float | None, tuple[float, float] | None]:
    """The logged value and interval; recomputed from the per-case table when not logged."""
    value = run.metric(key.mlflow_name)
    interval = run.interval(key.mlflow_name)
    if (value is None or interval is None) and run.per_case is not None and key.column in run.per_case:
        found = _from_cases(run.per_case, key, samples, seed)
        if found is not None:
            value = found[0] if value is None else value
            interval = found[1] if interval is None else interval
    return value, interval


def paired_values(base: pd.DataFrame, other: pd.DataFrame, metric: str,
                  segment: Segment | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-case values of ``metric`` of two runs on their common cases (inner join on case_id)."""
    return Pairing(base, other).values(metric, segment)


class Pairing:
    """Two runs' cases joined once for many columns (a 100-point sweep summary made ~700 joins)."""

    def __init__(self, base: pd.DataFrame, other: pd.DataFrame) -> None:
        for name, df in (("baseline", base), ("candidate", other)):
            if not df["case_id"].is_unique:
                raise UserError(f"{name} per-case table has duplicate case ids; cannot pair cases")
        self.base, self.other = base, other
        ids = base["case_id"].to_numpy()
        if len(base) == len(other) and (ids == other["case_id"].to_numpy()).all():
            # the same cases in the same order (runs on one golden set): what the join returns
            self.ia = self.ib = np.arange(len(base))
            return
        joined = (base[["case_id"]].assign(_ia=np.arange(len(base)))
                  .merge(other[["case_id"]].assign(_ib=np.arange(len(other))), on="case_id"))
        self.ia, self.ib = joined["_ia"].to_numpy(), joined["_ib"].to_numpy()

    def values(self, metric: str, segment: Segment | None = None) -> tuple[np.ndarray, np.ndarray]:
        if metric not in self.base or metric not in self.other:
            return np.array([]), np.array([])
        ia, ib = self.ia, self.ib
        if segment is not None:
            keep = in_segment(self.base, segment)[ia]
            ia, ib = ia[keep], ib[keep]
        return column_values(self.base, metric)[ia], column_values(self.other, metric)[ib]


# a per-case table's columns as float arrays, per table while it lives (the same columns are read
# for every pairing of a sweep summary and its verdict: ~2,700 conversions for 100 points)
_COLUMNS: dict[int, dict[str, np.ndarray]] = {}


def column_values(per_case: pd.DataFrame, name: str) -> np.ndarray:
    memo = _COLUMNS.get(id(per_case))
    if memo is None:
        memo = _COLUMNS[id(per_case)] = {}
        weakref.finalize(per_case, _COLUMNS.pop, id(per_case), None)
    if name not in memo:
        arr = per_case[name].to_numpy(dtype=float)
        arr.setflags(write=False)
        memo[name] = arr
    return memo[name]


def _digest_warnings(runs: Sequence[RunView], labels: Sequence[str]) -> list[str]:
    out = []
    for tag, what in (("golden_sha256", "GOLDEN SETS"), ("corpus_digest", "CORPUS VERSIONS")):
        groups: dict[str, list[str]] = {}
        for r, label in zip(runs, labels):
            groups.setdefault(r.tags.get(tag) or "unknown", []).append(label)
        if len(groups) > 1:
            detail = "; ".join(f"{k[:12]}: {', '.join(v)}" for k, v in groups.items())
            out.append(f"runs were measured on DIFFERENT {what} ({tag}): {detail}. Their numbers are not "
                       f"comparable{'; no paired test across golden sets' if tag == 'golden_sha256' else ''}.")
    return out


def build_comparison(runs: Sequence[RunView], metrics: Sequence[str] | None = None,
                     segments: Sequence[str] | None = None, primary: str | None = None,
                     alpha: float = 0.05, n_resamples: int | None = None, seed: int | None = None,
                     labels: Sequence[str] | None = None, family: str = "runs") -> Comparison:
    """Compare ``runs`` with ``runs[0]`` (the baseline). ``labels``: row names (default: short run names).
    ``n_resamples`` / ``seed`` of the paired tests: default :func:`rag_experiments.stats.paired.test_settings`.
    ``family``: what Holm corrects together (:data:`FAMILIES`)."""
    if family not in FAMILIES:
        raise UserError(f"--family: {family!r} is not one of {', '.join(FAMILIES)}",
                        hint="runs (Holm across the runs, per column) or all (every test of the table)")
    n_resamples, seed = test_settings(n_resamples, seed)
    if not runs:
        raise UserError("no runs to compare", hint="give run ids, --sweep PARENT_ID, --last-sweep or --tag KEY=VALUE")
    if metrics is None or primary is None:  # what the baseline was configured to report
        from .configured import comparison_defaults

        configured, objective = comparison_defaults(runs)
        metrics = configured if metrics is None else metrics
        primary = objective if primary is None else primary
    metrics = list(dict.fromkeys(metrics))
    if primary not in metrics:
        metrics.insert(0, primary)
    known = set().union(*[set(r.metrics) for r in runs])
    for r in runs:
        if r.per_case is not None:
            known |= set(r.per_case.columns)
    missing = [m for m in metrics if m not in known]
    if missing:
        raise UserError(f"--metrics: no run logged {', '.join(missing)}",
                        hint="e.g. recall_at_5, recall_at_20, mrr_at_10, ndcg_at_10, hit_at_5")
    segs = resolve_segments(segments, runs, primary)

    columns = [Column(MetricKey.parse(m), metric_title(m)) for m in metrics]
    columns += [Column(MetricKey.parse(primary).on(s), s.title) for s in segs]
    # label coverage is part of every comparison (tracking.coverage): judged@k after the metrics
    columns += [Column(MetricKey.parse(j), metric_title(j)) for j in judged_columns(runs) if j not in metrics]
    labels = list(labels) if labels is not None else short_labels(runs)
    if len(labels) != len(runs):
        raise ValueError("one label per run")
    base = runs[0]
    warnings = _digest_warnings(runs, labels)
    notes: list[str] = []

    raw: dict[str, list[Cell]] = {c.key.mlflow_name: [] for c in columns}
    # the baseline's value per column once (it may be a bootstrap from the per-case table), not per run
    base_values = {c.key.mlflow_name: value_and_interval(base, c.key, seed=seed)[0] for c in columns}
    pairings: dict[int, Pairing] = {}  # per run: the win/tie/loss below pairs the same cases again
    for i, r in enumerate(runs):
        same_golden = r.golden is not None and r.golden == base.golden
        pairing = None
        for c in columns:
            value, interval = value_and_interval(r, c.key, seed=seed)
            delta = p = power = None
            n = 0
            if r is not base and value is not None:
                bval = base_values[c.key.mlflow_name]
                delta = None if bval is None else value - bval
                if same_golden and base.per_case is not None and r.per_case is not None:
                    pairing = pairing or pairings.setdefault(i, Pairing(base.per_case, r.per_case))
                    a, b = pairing.values(c.key.column, c.key.segment)
                    n = len(a)
                    if n:
                        delta = float(b.mean() - a.mean())
                        p = paired_permutation_test(a, b, n_resamples=n_resamples, seed=seed)
                        power = estimate(a, b, alpha)
            raw[c.key.mlflow_name].append(Cell(value, interval, delta, p, None, n, power))
    raw = holm_cells(raw, family)

    rows = []
    for i, (r, label) in enumerate(zip(runs, labels)):
        flags = []
        if i and r.golden != base.golden:
            flags.append("golden")
        if i and r.corpus != base.corpus:
            flags.append("corpus")
        wtl = None
        if i and "golden" not in flags and base.per_case is not None and r.per_case is not None:
            pairing = pairings.get(i) or Pairing(base.per_case, r.per_case)
            a, b = pairing.values(primary)
            if len(a):
                wtl = win_tie_loss(a, b)
                if len(a) != len(base.per_case) or len(a) != len(r.per_case):
                    notes.append(f"{label}: paired over the {len(a)} cases both runs scored "
                                 f"(baseline {len(base.per_case)}, this run {len(r.per_case)})")
        if i and (base.per_case is None or r.per_case is None):
            notes.append(f"{label}: no per-case table (per_case.json) on "
                         f"{'the baseline' if base.per_case is None else 'this run'}: no paired test")
        rows.append(Row(r, label, i == 0, {name: cells[i] for name, cells in raw.items()}, wtl, tuple(flags)))
    sampled = any(SAMPLED_MARK in r.metrics for r in runs)  # a label sample's coverage differs by design
    warnings += [gap.line() + f" (no LLM key: label them yourself with {gap.command} --by-hand)"
                 + ("; scored on a label sample, the sampled-labels note below is the unbiased comparison" if sampled
                    else "")
                 for gap in coverage_gaps(rows, columns, alpha)]
    # people's labels on a case sample: corrected values, Δ
    notes += judge_corrected_lines(runs, labels, [c.key.mlflow_name for c in columns if c.key.segment is None])
    # labels judged on a random sample of cases (golden label --sample): the paired IPW difference
    notes += sampled_lines(runs, labels)
    return Comparison(rows, columns, primary, alpha, warnings, notes, family)


def holm_cells(raw: dict[str, list[Cell]], family: str) -> dict[str, list[Cell]]:
    """Each non-baseline cell's ``p_adj``: Holm across the runs compared with the baseline, separately
    for each column (``family="runs"``), or across every cell of the table at once (``"all"``)."""
    groups = [[(name, i) for i in range(1, len(cells))] for name, cells in raw.items()]
    if family == "all":
        groups = [[key for group in groups for key in group]]
    out = {name: list(cells) for name, cells in raw.items()}
    for group in groups:
        adj = holm([math.nan if raw[name][i].p is None else raw[name][i].p for name, i in group])
        for (name, i), q in zip(group, adj):
            out[name][i] = replace(raw[name][i], p_adj=None if math.isnan(q) else q)
    return out


def coverage_gaps(rows: Sequence[Row], columns: Sequence[Column], alpha: float) -> list:
    """Rows whose judged@k differs significantly (Holm-adjusted) from the baseline's."""
    judged = [c for c in columns if c.key.segment is None and c.key.mlflow_name.startswith(JUDGED_PREFIX)]
    if not judged or len(rows) < 2:
        return []
    out = []
    for row in rows[1:]:
        for col in judged:
            cell, base = row.cells[col.key.mlflow_name], rows[0].cells[col.key.mlflow_name]
            if cell.p_adj is not None and cell.p_adj < alpha and cell.value is not None and base.value is not None:
                k = int(col.key.mlflow_name[len(JUDGED_PREFIX):])
                out.append(CoverageGap(row.label, col.key.mlflow_name, base.value, cell.value, cell.delta or 0.0,
                                       cell.p_adj, fix_command([rows[0].run, row.run], k)))
                break  # one line a run
    return out


# -- the one differing parameter ------------------------------------------------------------------
def differing_params(runs: Sequence[RunView]) -> list[str]:
    """Flattened params whose values differ between runs (where and how a run logs ignored)."""
    keys = sorted(set().union(*[set(r.params) for r in runs]))
    keys = [k for k in keys if not any(k == p or k.startswith(p) for p in IGNORED_PARAM_PREFIXES)]
    return [k for k in keys if len({r.params.get(k) for r in runs}) > 1]


