"""A sweep's selected point on the held-out cases: chosen on dev, reported on test.

With a frozen split in the golden set (``rag-exp golden split``, :mod:`rag_experiments.golden.split`),
the sweep parent, ``compare --sweep`` and ``promote --sweep`` choose the best point by its mean on the
**dev** cases (the tie rule of :func:`.sweep_parent.best_of`), and report it on the **test** cases,
which took no part in the choice, with a 95% bootstrap interval, beside its dev value (the line
states both values and claims no direction: a given sweep's test value may come out above its dev value). Dev and test values are
computed from each run's per-case table (``per_case.json``): nothing is re-run.

Without a split the tool behaves as before (the best on all cases) and says once that the value is
optimistic, with the selection-adjusted interval (:func:`selection_interval`), and adds the k-fold
estimate of the selection procedure (:func:`kfold_line`, :mod:`rag_experiments.stats.kfold_selection`):
choose on k-1 folds of the cases, measure on the one left out, from the same per-case tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import GoldenSetError
from ..evaluation.metric_key import MetricKey
from ..golden.golden_file import GoldenFile
from ..golden.split import DEFAULT_SEED, DEV, STRATA, TEST, FrozenSplit, current_split, unit
from ..golden.versions import GoldenVersion, prefix_length
from ..paths import project_root
from ..stats.bootstrap import bootstrap_interval
from ..stats.kfold_selection import (DEFAULT_FOLDS, MIN_PER_FOLD, KFoldSelection, out_of_fold_selection,
                                     stratified_folds)
from ..stats.maxt import simultaneous_intervals
from .compare import in_segment, run_labels
from .runs import RunView, local_artifact_dir
from .sweep_parent import best_of
from .versioned import candidate_files


@dataclass(frozen=True)
class Sides:
    """One run's metric on each side of the split (NaN and 0 cases when a side has none)."""

    dev: float
    dev_n: int
    test: float
    test_n: int
    test_interval: tuple[float, float]


def run_project_root(run: RunView) -> Path | None:
    """The project folder the run was measured in, read from where its artifacts went: the local
    store keeps them under ``<project>/mlruns/artifacts`` (:func:`rag_experiments.paths.artifact_root`);
    None for a remote artifact store or another layout."""
    folder = local_artifact_dir(run.artifact_uri or "")
    if folder is None or "mlruns" not in folder.parts:
        return None
    parts = folder.parts
    return Path(*parts[:len(parts) - 1 - parts[::-1].index("mlruns")])


def golden_files(runs: Sequence[RunView]) -> list[Path]:
    """Where the runs' golden file may be: each of :func:`.versioned.candidate_files` (a relative
    ``golden.path`` taken under the current project root) and, for a relative one, the same path
    under the project root each run was measured in (:func:`run_project_root`): a command run from
    another folder finds the file the runs used."""
    here = project_root()
    roots = [here, *(r for r in map(run_project_root, runs) if r is not None)]
    out: list[Path] = []
    for path in candidate_files(runs):
        under = [root / path.relative_to(here) for root in roots] if path.is_relative_to(here) else [path]
        out.extend(p for p in under if p not in out)
    return out


def golden_not_found(runs: Sequence[RunView]) -> str | None:
    """One line naming the runs' golden path and where it was looked for, when no such file exists
    (None when one does): then nothing can be said about a split, so none is claimed missing."""
    files = golden_files(runs)
    if not files or any(p.is_file() for p in files):
        return None
    used = next((r.params["golden.path"] for r in runs if r.params.get("golden.path")), str(files[0]))
    return (f"Golden set {used} (the runs' golden.path) not found: looked in {', '.join(map(str, files))}; "
            f"no dev/test values (run from the project folder or set RAG_EXP_HOME).")


def split_for(runs: Sequence[RunView]) -> FrozenSplit | None:
    """The split in force in the golden file the runs used (their ``golden.path``, :func:`golden_files`),
    when their golden version (``golden_sha256`` and its line count) is a prefix of that file (a split
    appended after the runs counts: it changes no case or label); None without one."""
    for path in golden_files(runs):
        if not path.is_file():
            continue
        try:
            records = GoldenFile(path).read_records()
            for r in runs:
                version = GoldenVersion.from_tags(r.tags)
                if version is not None:
                    prefix_length(path, version)  # NotAnAncestor (a GoldenSetError) when it is not on this chain
        except GoldenSetError:
            continue
        return current_split(records)
    return None


def sides(run: RunView, key: MetricKey, split: FrozenSplit, samples: int = 1000, seed: int = 13) -> Sides | None:
    """``key``'s mean over the run's dev cases and test cases, the test mean with its bootstrap interval."""
    pc = run.per_case
    if pc is None or key.column not in pc:
        return None
    keep = np.ones(len(pc), dtype=bool) if key.segment is None else in_segment(pc, key.segment)
    values = pc[key.column].to_numpy(dtype=float)[keep]
    side = np.array(split.sides(pc["case_id"].astype(str).to_numpy()[keep]))
    dev, test = values[side == DEV], values[side == TEST]
    interval = bootstrap_interval(test, samples, seed) if len(test) else (float("nan"), float("nan"))
    return Sides(float(dev.mean()) if len(dev) else float("nan"), len(dev),
                 float(test.mean()) if len(test) else float("nan"), len(test), interval)


def best_on_dev(runs: Sequence[RunView], objective: str, split: FrozenSplit, maximize: bool = True) -> RunView | None:
    """The run with the best dev mean of ``objective`` (ties: :func:`.sweep_parent.best_of`); runs
    without a per-case table or dev cases are left out."""
    key = MetricKey.parse(objective)
    scored = {r.id: s.dev for r in runs if (s := sides(r, key, split)) is not None and s.dev_n}
    return best_of([r for r in runs if r.id in scored], lambda r: scored[r.id], maximize)


def lines(best: RunView, n_points: int, objective: str, split: FrozenSplit | None, label: str | None = None,
          markdown: bool = False, family: Sequence[RunView] = (), folds: int = DEFAULT_FOLDS,
          maximize: bool | None = None) -> list[str]:
    """What the reader should know about the selected point's value: its dev and test values (which
    side each is from), or, without a split, that its value is optimistic, and with ``family`` (every
    point, per-case tables loaded) by how much it could be: its interval counting every point tried,
    and the ``folds``-fold out-of-fold estimate of the selection (:func:`kfold_line`)."""
    name = label or best.name
    b = "**" if markdown else ""
    code = "`" if markdown else ""
    if split is None:
        missing = golden_not_found([best, *family])
        if missing:
            return [missing]
        wide = selection_interval(best, family, objective)
        by_how_much = ("" if wide is None else f"; counting the {n_points} points tried, its 95% interval is "
                       f"[{wide[0]:.3f}, {wide[1]:.3f}] (max-T simultaneous interval, stats.maxt)")
        return [f"No held-out split in the golden set: {code}{name}{code} was chosen as the best of {n_points} "
                f"points on the same cases its {objective} is reported on, so that value is optimistic"
                f"{by_how_much} (`rag-exp golden split` freezes a dev/test split; then the choice is made on dev "
                f"and reported on test)."] + [line for line in [kfold_line(best, family, objective, folds, maximize,
                                                                           markdown)] if line]
    s = sides(best, MetricKey.parse(objective), split)
    if s is None:
        return [f"{code}{name}{code} has no per-case table: no dev/test values."]
    lo, hi = s.test_interval
    # no direction claimed: choosing on dev tends to flatter the dev value, but a given sweep's test value
    # can come out above it (Cranfield: dev 0.412, test 0.434); the numbers say which way it went
    return [f"Selected on {b}dev{b} ({s.dev_n} cases) among {n_points} points: {code}{name}{code} {objective} "
            f"dev {s.dev:.4f} (the value it was chosen on); {b}test{b} ({s.test_n} held-out cases, not "
            f"used to choose): {b}{s.test:.4f}{b} [{lo:.3f}, {hi:.3f}] (split {split.id})."]


def sweep_lines(cmp, objective: str, maximize: bool = True, markdown: bool = False,
                folds: int = DEFAULT_FOLDS) -> list[str]:
    """``compare --sweep``'s lines for a sweep's comparison ``cmp``: its best point (on dev with a
    split, else on all cases: the sweep parent's choice) on dev and test, or why its value is optimistic
    and its ``folds``-fold out-of-fold estimate."""
    runs = [row.run for row in cmp.rows]
    split = split_for(runs)
    scored = [r for r in runs if r.metrics.get(objective) is not None]
    best = (best_on_dev(runs, objective, split, maximize) if split is not None else None) or \
        best_of(scored, lambda r: r.metrics[objective], maximize)
    if best is None or len(runs) < 2:
        return []
    label = next((row.label for row in cmp.rows if row.run.id == best.id), None)
    return lines(best, len(runs), objective, split, label, markdown, family=runs, folds=folds, maximize=maximize)


def dev_objective(per_case, objective: str, golden_path) -> float | None:
    """The objective over the dev cases of the golden set's split (what a sweeper such as Optuna
    maximises, so it chooses on dev like the sweep parent); None without a split or dev cases."""
    try:
        split = current_split(GoldenFile(golden_path).read_records())
    except GoldenSetError:
        return None
    key = MetricKey.parse(objective)
    if split is None or per_case is None or key.column not in per_case:
        return None
    keep = np.ones(len(per_case), dtype=bool) if key.segment is None else in_segment(per_case, key.segment)
    dev = np.array(split.sides(per_case["case_id"].astype(str).to_numpy())) == DEV
    values = per_case[key.column].to_numpy(dtype=float)[keep & dev]
    return float(values.mean()) if len(values) else None


def shared_cases(family: Sequence[RunView], objective: str) -> tuple[list[RunView], list[str], np.ndarray] | None:
    """The points of ``family`` whose per-case table holds ``objective`` (its segment's cases), the case
    ids all of them share (sorted), and their values (cases x points); None without such a case."""
    key = MetricKey.parse(objective)
    columns: dict[str, dict[str, float]] = {}
    runs = []
    for r in family:
        pc = r.per_case
        if pc is None or key.column not in pc or r.id in columns:
            continue
        keep = np.ones(len(pc), dtype=bool) if key.segment is None else in_segment(pc, key.segment)
        columns[r.id] = dict(zip(pc["case_id"].astype(str).to_numpy()[keep], pc[key.column].to_numpy(float)[keep]))
        runs.append(r)
    common = sorted(set.intersection(*(set(v) for v in columns.values()))) if columns else []
    if not common:
        return None
    return runs, common, np.array([[columns[r.id][c] for r in runs] for c in common])


def selection_interval(best: RunView, family: Sequence[RunView], objective: str) -> tuple[float, float] | None:
    """The best point's 95% interval that holds for every point of ``family`` at once, on the cases
    all of them share (:func:`rag_experiments.stats.maxt.simultaneous_intervals`); None without per-case
    tables for at least two points."""
    shared = shared_cases(family, objective)
    if shared is None:
        return None
    runs, _, matrix = shared
    ids = [r.id for r in runs]
    if best.id not in ids or len(ids) < 2:
        return None
    return simultaneous_intervals(matrix)[ids.index(best.id)]


def case_strata(runs: Sequence[RunView], cases: Sequence[str]) -> list[str]:
    """Each case's stratum as the golden split forms it (kind x doc_type, :data:`.split.STRATA`), read from
    the runs' per-case tables (the first table that has the case); "" where a column is missing."""
    stratum: dict[str, str] = {}
    for r in runs:
        pc = r.per_case
        cols = [c for c in STRATA if c in pc]
        ids = pc["case_id"].astype(str).to_numpy()
        parts = [pc[c].astype(str).to_numpy() for c in cols]
        for i, case in enumerate(ids):
            stratum.setdefault(case, "/".join(p[i] for p in parts))
    return [stratum.get(c, "") for c in cases]


def kfold_estimate(runs: Sequence[RunView], cases: Sequence[str], matrix: np.ndarray, folds: int = DEFAULT_FOLDS,
                   maximize: bool = True) -> KFoldSelection:
    """The out-of-fold estimate for :func:`shared_cases`' result: the cases dealt into ``folds`` folds
    (stratified like the golden split, :func:`case_strata`; seeded by the case ids, ``split.unit``), the
    point chosen on each fold's complement with the one tie rule (:func:`.sweep_parent.best_of`)."""
    pos = {r.id: j for j, r in enumerate(runs)}
    fold_of = stratified_folds(case_strata(runs, cases), [unit(DEFAULT_SEED, c) for c in cases], folds)
    return out_of_fold_selection(matrix, fold_of, lambda means: pos[best_of(runs, lambda r: means[pos[r.id]],
                                                                            maximize).id], maximize)


def kfold_line(best: RunView, family: Sequence[RunView], objective: str, folds: int = DEFAULT_FOLDS,
               maximize: bool | None = None, markdown: bool = False) -> str | None:
    """The k-fold estimate of the sweep's selection when no case was held out
    (:func:`rag_experiments.stats.kfold_selection.out_of_fold_selection`): the cases every point scored
    are dealt into ``folds`` folds (stratified like the golden split, seeded by the case ids); each fold's
    point is chosen on the others with the one tie rule (:func:`.sweep_parent.best_of`) and measured on
    it. ``maximize`` None: read from which end of the points ``best`` sits at. None without two points'
    per-case tables; a line saying why when the cases are fewer than 2 per fold."""
    shared = shared_cases(family, objective)
    if shared is None or len(shared[0]) < 2:
        return None
    runs, cases, matrix = shared
    b = "**" if markdown else ""
    code = "`" if markdown else ""
    n = len(cases)
    if n < MIN_PER_FOLD * folds:
        fewer = (f"use `compare --sweep PARENT_ID --folds K` with K at most {n // MIN_PER_FOLD}"
                 if n // MIN_PER_FOLD >= 2 else "too few to choose on some and measure on the others")
        return (f"No k-fold estimate: the {n} cases every point scored are fewer than {MIN_PER_FOLD} per fold "
                f"for {folds} folds ({fewer}).")
    if maximize is None:  # the caller chose ``best`` on all cases: it sits at the top, or at the bottom if minimised
        means = matrix.mean(axis=0)
        ids = [r.id for r in runs]
        top, bottom = (best_of(runs, lambda r: means[ids.index(r.id)], up).id for up in (True, False))
        maximize = not (bottom == best.id != top)
    r = kfold_estimate(runs, cases, matrix, folds, maximize)
    labels = run_labels(runs)
    chose = ", ".join(f"{code}{labels[j]}{code} ×{count}" for j, count in r.stability())
    return (f"{b}k-fold estimate{b} (no split needed): choosing the best of {len(runs)} points on {folds - 1} of "
            f"{folds} folds of the {n} cases (stratified by kind and doc type) and measuring it on the fold left out "
            f"gives {objective} {b}{r.out_of_fold:.4f}{b} [{r.interval[0]:.3f}, {r.interval[1]:.3f}] out of fold, "
            f"against {r.in_sample_best:.4f} for the best on all cases ({code}{labels[r.in_sample_choice]}{code}): "
            f"optimism {r.optimism:+.4f}; the folds chose {chose}.")
