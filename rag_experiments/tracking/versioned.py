"""Runs measured on different versions of one golden set, made comparable.

The golden file is append-only, so when the versions two runs recorded are both prefixes of the
current file (:func:`rag_experiments.golden.versions.locate`), the older version is an ancestor
of the newer one and the runs compare **on the older version's cases, with its labels**:

* the shared cases are the older version's scorable cases that are still active in the newest
  version (a case retired in between leaves the shared set);
* a run on the older version keeps its logged per-case rows (scored with those labels);
* a run on a newer version is **rescored** from its stored ranked lists (``run.trec``) against
  the older version: an evaluation over stored lists, no retrieval;
* each run becomes a :class:`RunView` "rebased" onto the older version (per-case table and
  metrics recomputed on the shared cases, ``golden_sha256`` = the older version), so the paired
  test, the comparison table, promotion and the gate work on them unchanged.

Beside the paired comparison, :class:`VersionGap` reports what changed in between: the cases
added since (the newer run's metrics on them, by kind), and how many shared cases had a label
superseded, a label added or a span re-anchored, and how many were retired. Versions that are
not on one chain (another file, a rewritten history) stay not comparable, with the reason.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import pandas as pd
from rich.table import Table

from ..errors import GoldenSetError
from ..evaluation.evaluate import aggregate
from ..evaluation.metric_key import MEASURES, MetricKey, metric_title
from ..evaluation.rescore import params_from_flat, rescore
from ..evaluation.runfile import ARTIFACT as RUN_FILE
from ..evaluation.runfile import parse_run_file
from ..golden.records import Anchor, Case, Judgement, Retire
from ..golden.resolve import GoldenSet
from ..golden.versions import LINES_ARTIFACT, GoldenVersion, NotAnAncestor, first_difference, locate
from ..paths import project_root
from ..terminal import console as make_console
from .compare_render import fmt
from .runs import RunView, client

KIND_ORDER = ("production", "exact", "paraphrase")
LOGGED_DECIMALS = 10  # pandas' to_json default (double_precision), which mlflow.log_table uses


@dataclass(frozen=True)
class VersionGap:
    """What lies between the older and the newer golden version of the runs compared."""

    path: Path
    older: GoldenVersion
    newer: GoldenVersion
    shared: tuple[str, ...]  # case ids compared, with the older version's labels
    added: pd.DataFrame = field(repr=False)  # case_id, query, kind, doc_type of cases added since
    retired: tuple[str, ...] = ()  # older cases retired in between: out of the shared set
    superseded: tuple[str, ...] = ()  # shared cases with a label superseded in between
    relabelled: tuple[str, ...] = ()  # shared cases with a new (not superseding) judgement
    reanchored: tuple[str, ...] = ()  # shared cases with a span re-anchored in between
    unscored: tuple[str, ...] = ()  # older cases some run has no score for (e.g. stale there)


@dataclass(frozen=True)
class Alignment:
    runs: list[RunView]  # rebased onto the older version when ``gap`` is set, else as given
    gap: VersionGap | None = None
    reason: str | None = None  # why the runs are not comparable (None: they are)
    rescored: tuple[str, ...] = ()  # ids of runs rescored from their stored ranked lists


# -- finding the chain ----------------------------------------------------------------------------
def candidate_files(runs: Sequence[RunView]) -> list[Path]:
    """Golden files the runs used: their ``golden.path`` param (relative to the project root).
    Only a run that recorded none, or whose file is gone, falls back to
    ``experiments/golden/<golden_set tag>``: a default file no run used must not be searched, or
    its unrelated state ("has only N records") would be reported as if it concerned these runs."""
    root = project_root()
    out: list[Path] = []

    def add(raw: str) -> None:
        p = Path(raw).expanduser()
        p = p if p.is_absolute() else root / p
        if p not in out:
            out.append(p)

    for r in runs:
        used = r.params.get("golden.path")
        if used:
            add(used)
    for r in runs:
        used = r.params.get("golden.path")
        p = Path(used).expanduser() if used else None
        if p is not None and not p.is_absolute():
            p = root / p
        if (p is None or not p.is_file()) and r.tags.get("golden_set"):
            add(f"experiments/golden/{r.tags['golden_set']}")
    return out


def first_differing_lines(runs: Sequence[RunView], files: Sequence[Path], c=None) -> list[str]:
    """For each run whose golden version is not a prefix of a file in use, the first line of that
    file that differs from it, from the run's stored line hashes (runs logged before they were
    stored say nothing here; the NotAnAncestor message then bounds the line from above)."""
    c = c or client()
    out: list[str] = []
    for r in runs:
        try:
            if LINES_ARTIFACT not in {f.path for f in c.list_artifacts(r.id)}:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                recorded = Path(c.download_artifacts(r.id, LINES_ARTIFACT, tmp)).read_text(encoding="utf-8")
        except Exception:  # noqa: BLE001 - a champion known only from its committed record
            continue
        for path in files:
            if not path.is_file():
                continue
            n = first_difference(path, recorded)
            if n is not None:
                out.append(f"{path}:{n} is the first line that differs from the version run {r.id[:12]} "
                           f"({r.label}) was scored on")
    return out


def find_chain(versions: Sequence[GoldenVersion], files: Sequence[Path]) -> tuple[Path, dict[str, GoldenSet]]:
    """The first file holding every version as a prefix, and each version's golden set (by sha256)."""
    errors: list[str] = []
    for path in files:
        if not path.is_file():
            errors.append(f"{path}: no such file")
            continue
        located: dict[str, GoldenSet] = {}
        try:
            for v in versions:
                if v.sha256 not in located:
                    located[v.sha256] = locate(path, v)
        except NotAnAncestor as exc:
            errors.append(str(exc))
            continue
        except GoldenSetError as exc:
            errors.append(f"{path}: {exc}")
            continue
        return path, located
    raise NotAnAncestor("; ".join(errors) if errors else "no golden file recorded by the runs (golden.path)")


# -- like with like -------------------------------------------------------------------------------
#: where a run records its evaluation level (``eval.level``: chunk | document); runs logged before the
#: tag existed carry it as the param, and runs older still were scored at chunk level (the default)
LEVEL_TAG = "eval_level"


def eval_level(run: RunView) -> str:
    """The run's evaluation level: tag ``eval_level``, else param ``eval.level``, else ``chunk``."""
    return run.tags.get(LEVEL_TAG) or run.params.get("eval.level") or "chunk"


@dataclass(frozen=True)
class Unlike:
    """Why two runs cannot be paired case by case: one line naming both runs, and what to do."""

    line: str
    hint: str


def _named(run: RunView) -> str:
    return f"run {run.id[:12]} ({run.label})"


def not_comparable(runs: Sequence[RunView], c=None) -> Unlike | None:
    """The first run that cannot be paired with ``runs[0]`` (the baseline, or the champion), as one
    line naming both: evaluated at another level (``eval.level``: a document-level score is not a
    chunk-level one), or scored on a golden version that is not on one chain with the baseline's
    (another golden set, or a rewritten history). None when every run pairs with the baseline.
    compare, promote and the gate all refuse on this line. A run that recorded no golden version is
    left to :func:`align` (it says so)."""
    runs = list(runs)
    if len(runs) < 2:
        return None
    base = runs[0]
    level = eval_level(base)
    for r in runs[1:]:
        if eval_level(r) != level:
            return Unlike(
                f"NOT COMPARABLE: {_named(base)} was evaluated at {level} level and {_named(r)} at "
                f"{eval_level(r)} level (eval.level): scores at two levels do not pair",
                f"pair runs of one level: select them with --tag {LEVEL_TAG}={level}, or run the config again "
                f"with eval.level={level}")
    base_version = GoldenVersion.from_tags(base.tags)
    if base_version is None:
        return None
    for r in runs[1:]:
        version = GoldenVersion.from_tags(r.tags)
        if version is None or version.sha256 == base_version.sha256:
            continue
        files = candidate_files([base, r])
        try:
            find_chain([base_version, version], files)
        except NotAnAncestor as exc:
            where = first_differing_lines([base, r], files, c)
            return Unlike(
                f"NOT COMPARABLE: {_named(base)} was scored on golden version {base_version.describe()} and "
                f"{_named(r)} on {version.describe()}, which are not on one chain: "
                + ("; ".join(where) + ". " if where else "") + str(exc),
                "pair runs scored on one golden file (each version a prefix of it): run the older config again "
                "on today's golden set")
    return None


# -- stored ranked lists --------------------------------------------------------------------------
# (store, run id) -> a finished run's parsed run.trec. One compare reads each run's lists up to four
# times (rescored on the newest labels, judged@k at the metric's depth, the bounds, the explorer):
# 8 downloads and parses for two runs, 1.7 s of a git-doc compare. A finished run's artifacts do
# not change; a running one's are read again.
_RANKED: dict[tuple[str, str], dict] = {}
_RANKED_MAX = 64


def load_ranked_lists(run: RunView, c=None):
    """The run's ``run.trec`` artifact parsed, or None when the run has none (or is not in the store)."""
    c = c or client()
    key = (str(getattr(c, "tracking_uri", "")), run.id)
    if key in _RANKED:
        return dict(_RANKED[key])  # a copy: a caller's edits never reach the next one
    try:
        if RUN_FILE not in {f.path for f in c.list_artifacts(run.id)}:
            return None
        with tempfile.TemporaryDirectory() as tmp:
            text = Path(c.download_artifacts(run.id, RUN_FILE, tmp)).read_text(encoding="utf-8")
    except Exception:  # noqa: BLE001 - a champion known only from its committed record
        return None
    ranked = parse_run_file(text, f"run {run.id} {RUN_FILE}")
    if run.status == "FINISHED":
        if len(_RANKED) >= _RANKED_MAX:
            _RANKED.clear()
        _RANKED[key] = ranked
        return dict(ranked)
    return ranked


def logged_precision(per_case: pd.DataFrame) -> pd.DataFrame:
    """Per-case metrics rounded as ``per_case.json`` stores them (mlflow.log_table writes JSON with
    10 decimals): a rescored 1/3 must pair with a logged 0.3333333333 as a tie, not a 3e-11 loss
    that a paired test over hundreds of cases would call significant."""
    out = per_case.copy()
    for col in out.columns:
        if MetricKey.parse(str(col)).metric in MEASURES:
            out[col] = out[col].astype(float).round(LOGGED_DECIMALS)
    return out


def quality_metrics(per_case: pd.DataFrame) -> dict[str, float]:
    names = [c for c in per_case.columns if MetricKey.parse(str(c)).metric in MEASURES]
    out = aggregate(per_case, names)
    out["n_cases"] = float(len(per_case))
    return out


# -- the alignment --------------------------------------------------------------------------------
def _changes(older: GoldenSet, newer: GoldenSet, shared: set[str]) -> dict[str, tuple[str, ...]]:
    """Records appended between the two versions, by what they did to the older cases."""
    older_ids = {r.id for r in older.records if isinstance(r, Case)}
    out: dict[str, list[str]] = {"retired": [], "superseded": [], "relabelled": [], "reanchored": []}
    for r in newer.records[len(older.records):]:
        if isinstance(r, Retire) and r.target in older_ids:
            out["retired"].append(r.target)
        elif isinstance(r, Judgement) and r.case_id in shared:
            out["superseded" if r.supersedes else "relabelled"].append(r.case_id)
        elif isinstance(r, Anchor) and r.case_id in shared:
            out["reanchored"].append(r.case_id)
    return {k: tuple(dict.fromkeys(v)) for k, v in out.items()}


def align(runs: Sequence[RunView], c=None) -> Alignment:
    """Rebase ``runs`` onto the oldest golden version among them (see the module docstring)."""
    runs = list(runs)
    versions = [GoldenVersion.from_tags(r.tags) for r in runs]
    missing = [r for r, v in zip(runs, versions) if v is None]
    if missing:
        return Alignment(runs, reason=f"run {missing[0].id[:12]} recorded no golden-set version (tag golden_sha256)")
    if len({v.sha256 for v in versions}) == 1:
        return Alignment(runs)
    files = candidate_files(runs)
    try:
        path, located = find_chain(versions, files)
    except NotAnAncestor as exc:
        where = first_differing_lines(runs, files, c)
        return Alignment(runs, reason="NOT COMPARABLE: the golden-set versions are not on one chain: "
                         + ("; ".join(where) + ". " if where else "") + str(exc))
    by_size = sorted(located.values(), key=lambda g: len(g.records))
    older, newer = by_size[0], by_size[-1]
    active = {case.case_id for case in newer.cases}
    base_ids = [case.case_id for case in older.scorable if case.case_id in active]
    old_version = GoldenVersion.of(older)

    frames: list[pd.DataFrame] = []
    rescored: list[str] = []
    for r in runs:
        if r.golden == older.digest:
            if r.per_case is None:
                return Alignment(runs, reason=f"run {r.id[:12]} has no per-case table (per_case.json)")
            df = r.per_case[r.per_case["case_id"].isin(base_ids)]
        else:
            ranked = load_ranked_lists(r, c)
            if ranked is None:
                return Alignment(runs, reason=(
                    f"NOT COMPARABLE: run {r.id[:12]} ({r.label}) was measured on golden version "
                    f"{GoldenVersion.from_tags(r.tags).describe()} and has no stored ranked lists ({RUN_FILE}): "
                    f"it cannot be rescored on the older version {old_version.describe()}; re-run its config"))
            result, _ = rescore(older, ranked, params_from_flat(r.params), base_ids)
            df = result.per_case
            rescored.append(r.id)
        frames.append(df)
    common = set(base_ids)
    for df in frames:
        common &= set(df["case_id"]) if len(df) else set()
    shared = tuple(cid for cid in base_ids if cid in common)
    rebased = []
    for r, df in zip(runs, frames):
        df = logged_precision(df[df["case_id"].isin(common)].reset_index(drop=True))
        tags = {**r.tags, **old_version.tags(), "golden_rebased_from": r.golden or ""}
        rebased.append(replace(r, per_case=df, metrics=quality_metrics(df), tags=tags))
    older_case_ids = {case.case_id for case in older.cases}
    added = pd.DataFrame([{"case_id": case.case_id, "query": case.query, "kind": case.kind, "doc_type": case.doc_type}
                          for case in newer.cases if case.case_id not in older_case_ids],
                         columns=["case_id", "query", "kind", "doc_type"])
    gap = VersionGap(path=path, older=old_version, newer=GoldenVersion.of(newer), shared=shared, added=added,
                     unscored=tuple(cid for cid in base_ids if cid not in common),
                     **_changes(older, newer, set(shared)))
    return Alignment(rebased, gap, None, tuple(rescored))


# -- the newer run on the added cases -------------------------------------------------------------
def added_rows(run: RunView, gap: VersionGap) -> pd.DataFrame:
    """The run's own per-case rows (its version's labels) for the cases added since the older version."""
    if run.per_case is None or gap.added.empty:
        return pd.DataFrame(columns=["case_id", "query", "kind"])
    return run.per_case[run.per_case["case_id"].isin(set(gap.added["case_id"]))].reset_index(drop=True)


def added_by_kind(rows: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """One row per query kind (production, exact, paraphrase first): n and the mean of each metric."""
    metrics = [m for m in dict.fromkeys(metrics) if m in rows]
    if rows.empty:
        return pd.DataFrame(columns=["kind", "n", *metrics])
    g = rows.groupby("kind")
    out = g[metrics].mean()
    out.insert(0, "n", g.size())
    out = out.reset_index()
    order = {k: i for i, k in enumerate(KIND_ORDER)}
    return out.sort_values("kind", key=lambda s: s.map(lambda k: order.get(k, len(order)))).reset_index(drop=True)


def newest_runs(runs: Sequence[RunView], gap: VersionGap) -> list[RunView]:
    return [r for r in runs if r.golden == gap.newer.sha256]


# -- rendering ------------------------------------------------------------------------------------
def gap_summary(gap: VersionGap) -> str:
    return (f"compared on the {len(gap.shared)} shared cases of the older golden version "
            f"({gap.older.describe()}) with its labels; the newer version ({gap.newer.describe()}) "
            f"added {len(gap.added)} case(s)"
            + (f" ({', '.join(f'{n} {k}' for k, n in gap.added['kind'].value_counts().items())})"
               if len(gap.added) else "")
            + f"; in between: {len(gap.superseded)} shared case(s) had a label superseded, "
            f"{len(gap.relabelled)} got a new label, {len(gap.reanchored)} had a span re-anchored, "
            f"{len(gap.retired)} were retired (left the shared set)"
            + (f"; {len(gap.unscored)} older case(s) not scored by every run (left out)" if gap.unscored else ""))


def gap_markdown(gap: VersionGap, run: RunView | None, metrics: Sequence[str], who: str = "current",
                 production_limit: int = 50) -> str:
    """The gap as Markdown: the summary line, the newer run on the added cases by kind, and the
    added production cases one by one."""
    metrics = list(dict.fromkeys(metrics))
    lines = [f"**Golden set grew:** {gap_summary(gap)}.", ""]
    if run is None or gap.added.empty:
        return "\n".join(lines) + "\n"
    rows = added_rows(run, gap)
    by_kind = added_by_kind(rows, metrics)
    if not by_kind.empty:
        cols = [m for m in metrics if m in by_kind]
        lines += [f"Cases added since, scored by {who} `{run.id[:12]}` (its version's labels):", "",
                  "| kind | n | " + " | ".join(metric_title(m) for m in cols) + " |",
                  "|---|---:|" + "---:|" * len(cols)]
        for _, row in by_kind.iterrows():
            lines.append(f"| {row['kind']} | {int(row['n'])} | " + " | ".join(fmt(row[m]) for m in cols) + " |")
        lines.append("")
    prod = rows[rows["kind"] == "production"] if "kind" in rows else rows.iloc[0:0]
    if len(prod):
        first = "first_relevant_rank" if "first_relevant_rank" in prod else None
        cols = [m for m in metrics if m in prod][:3]
        lines += [f"New production cases ({len(prod)}):", "",
                  "| case | query | first relevant rank | " + " | ".join(metric_title(m) for m in cols) + " |",
                  "|---|---|---:|" + "---:|" * len(cols)]
        for _, row in prod.head(production_limit).iterrows():
            rank = row[first] if first else None
            rank_text = "not retrieved" if rank is None or rank != rank else str(int(rank))
            query = str(row.get("query", "")).replace("|", "\\|")
            lines.append(f"| `{row['case_id']}` | {query} | {rank_text} | " + " | ".join(fmt(row[m]) for m in cols)
                         + " |")
        if len(prod) > production_limit:
            lines.append(f"| … | {len(prod) - production_limit} more | | |")
        lines.append("")
    return "\n".join(lines) + "\n"


def print_gap(gap: VersionGap, runs: Sequence[RunView], metrics: Sequence[str], console=None) -> None:
    """The gap on the terminal: the summary, then per newest-version run its added-case table."""
    metrics = list(dict.fromkeys(metrics))
    out = console or make_console()
    out.print(f"[bold]golden set grew:[/] {gap_summary(gap)}")
    for r in newest_runs(runs, gap):
        rows = added_rows(r, gap)
        if rows.empty:
            continue
        cols = [m for m in metrics if m in rows]
        table = Table(title=f"cases added since, run {r.id[:12]} ({r.label}), its version's labels")
        for h in ["kind", "n", *[metric_title(m) for m in cols]]:
            table.add_column(h, justify="left" if h == "kind" else "right")
        for _, row in added_by_kind(rows, cols).iterrows():
            table.add_row(str(row["kind"]), str(int(row["n"])), *[fmt(row[m]) for m in cols])
        out.print(table)
        prod = rows[rows["kind"] == "production"]
        for _, row in prod.iterrows():
            rank = row.get("first_relevant_rank")
            rank_text = "not retrieved" if rank is None or rank != rank else f"rank {int(rank)}"
            out.print(f"  production {row['case_id']}: {row.get('query', '')!r}: {rank_text}")


def gap_tags(gap: VersionGap | None, run: RunView) -> dict[str, str]:
    """Tags recording on which cases a gate verdict was reached."""
    if gap is None:
        return {}
    rows = added_rows(run, gap) if run.golden == gap.newer.sha256 else pd.DataFrame()
    return {"gate_shared_cases": str(len(gap.shared)), "gate_golden_base_records": str(gap.older.records),
            "gate_added_cases": str(len(gap.added)),
            "gate_added_production": str(int((gap.added["kind"] == "production").sum())),
            "gate_superseded_cases": str(len(gap.superseded)), "gate_reanchored_cases": str(len(gap.reanchored)),
            "gate_retired_cases": str(len(gap.retired)),
            **({"gate_added_scored": str(len(rows))} if len(rows) else {})}
