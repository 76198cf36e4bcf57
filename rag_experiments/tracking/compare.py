"""Side-by-side comparison of runs on one golden set: values, intervals, paired deltas.

One row per run, one column per metric plus one per segment (the primary metric on that
segment: a query kind such as ``exact``, or ``doc_type.<type>``). Each cell shows the logged
value with its 95% bootstrap interval (the run's ``<metric>.ci_low`` / ``.ci_high``). Every run
but the baseline also shows, per cell, the paired delta against the baseline (candidate minus
baseline, over cases aligned by ``case_id``) and the p-value of the paired randomization test
(:func:`rag_experiments.stats.paired.paired_permutation_test`), Holm-corrected across the runs
compared in that column, plus win/tie/loss counts on the primary metric.

The baseline is the first run given (with ``--sweep``/``--last-sweep``: the first sweep point
to start), or ``--baseline``. Runs measured on a different golden set (``golden_sha256`` tag)
than the baseline get no p-value (their cases do not pair); a different golden set or corpus
(``corpus_digest``) anywhere in the selection is warned about loudly and marks the table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..errors import UserError
from ..stats.bootstrap import bootstrap_interval
from ..stats.paired import WinTieLoss, holm, paired_permutation_test, win_tie_loss
from .runs import RunView

WARN = "⚠"
#: params that never explain a difference in results (where and how a run was logged)
IGNORED_PARAM_PREFIXES = ("run_name", "progress", "tracking.", "db.", "hydra.")


def metric_title(metric: str) -> str:
    """recall_at_5 -> recall@5 (MLflow names cannot contain '@'; tables can)."""
    return metric.replace("_at_", "@")


@dataclass(frozen=True)
class Segment:
    """A slice of the cases: ``column`` (``kind`` or ``doc_type``) equals ``value``."""

    column: str
    value: str

    @property
    def suffix(self) -> str:
        return self.value if self.column == "kind" else f"doc_type.{self.value}"

    @property
    def title(self) -> str:
        return self.value if self.column == "kind" else f"doc_type={self.value}"


@dataclass(frozen=True)
class Column:
    key: str  # the logged metric name: recall_at_5 or recall_at_5.exact
    metric: str
    segment: Segment | None
    title: str


@dataclass(frozen=True)
class Cell:
    value: float | None
    interval: tuple[float, float] | None
    delta: float | None = None
    p: float | None = None  # raw paired-test p-value
    p_adj: float | None = None  # Holm-adjusted across the runs in this column
    n_paired: int = 0


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

    @property
    def baseline(self) -> Row:
        return self.rows[0]

    @property
    def comparable(self) -> bool:
        return not any(r.flags for r in self.rows)


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
    names = [n if len(n) <= max_len else n[: max_len - 1] + "…" for n in names]
    seen: dict[str, int] = {}
    for n in names:
        seen[n] = seen.get(n, 0) + 1
    return [f"{n} ({r.id[:6]})" if seen[n] > 1 else n for n, r in zip(names, runs)]


def run_labels(runs: Sequence[RunView]) -> list[str]:
    """Rows named by the params that differ between the runs (``rrf_k=30 keyword_weight=0.5``):
    the last part of a dotted key when that is unambiguous, the full key otherwise. Runs with no
    differing param (or no params) fall back to :func:`short_labels`."""
    diff = differing_params(runs) if len(runs) > 1 else []
    if not diff:
        return short_labels(runs)
    tails = [k.rsplit(".", 1)[-1] for k in diff]
    names = {k: (t if tails.count(t) == 1 else k) for k, t in zip(diff, tails)}
    labels = [" ".join(f"{names[k]}={r.params[k]}" for k in diff if k in r.params) for r in runs]
    fallback = short_labels(runs)
    labels = [lab or fb for lab, fb in zip(labels, fallback)]
    seen: dict[str, int] = {}
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
    return [f"{lab} ({r.id[:6]})" if seen[lab] > 1 else lab for lab, r in zip(labels, runs)]


# -- segments -------------------------------------------------------------------------------------
def _segment_values(runs: Sequence[RunView], column: str) -> list[str]:
    found: list[str] = []
    for r in runs:
        if r.per_case is not None and column in r.per_case:
            for v in r.per_case[column].dropna().astype(str):
                if v not in found:
                    found.append(v)
    return found


def _logged_segments(runs: Sequence[RunView], primary: str) -> tuple[list[str], list[str]]:
    kinds, dtypes = [], []
    prefix = primary + "."
    for r in runs:
        for key in r.metrics:
            if not key.startswith(prefix) or key.endswith((".ci_low", ".ci_high")):
                continue
            rest = key[len(prefix):]
            target, value = (dtypes, rest[len("doc_type."):]) if rest.startswith("doc_type.") else (kinds, rest)
            if value not in target:
                target.append(value)
    return kinds, dtypes


def resolve_segments(names: Sequence[str] | None, runs: Sequence[RunView], primary: str) -> list[Segment]:
    """Segment names to segments: a query kind (``exact``), ``doc_type.<t>`` or a bare doc type.

    ``None``: every query kind the runs have (per-case tables, else logged metric names).
    """
    kinds = _segment_values(runs, "kind")
    dtypes = _segment_values(runs, "doc_type")
    lk, ld = _logged_segments(runs, primary)
    kinds += [k for k in lk if k not in kinds]
    dtypes += [d for d in ld if d not in dtypes]
    if names is None:
        return [Segment("kind", k) for k in sorted(kinds)]
    out = []
    for name in names:
        name = name.strip()
        if not name:
            continue
        if name.startswith("doc_type.") or name.startswith("doc_type="):
            out.append(Segment("doc_type", name[len("doc_type."):]))
        elif name in kinds:
            out.append(Segment("kind", name))
        elif name in dtypes:
            out.append(Segment("doc_type", name))
        else:
            raise UserError(f"--segments: no run has a segment {name!r}",
                            hint=f"query kinds: {', '.join(kinds) or 'none'}; doc types: {', '.join(dtypes) or 'none'}")
    return out


def _slice(per_case: pd.DataFrame, segment: Segment | None) -> pd.DataFrame:
    if segment is None:
        return per_case
    if segment.column not in per_case:
        return per_case.iloc[0:0]
    return per_case[per_case[segment.column].astype(str) == segment.value]


# -- values ---------------------------------------------------------------------------------------
def value_and_interval(run: RunView, column: Column, samples: int = 1000,
                       seed: int = 13) -> tuple[float | None, tuple[float, float] | None]:
    """The logged value and interval; recomputed from the per-case table when not logged."""
    value = run.metric(column.key)
    interval = run.interval(column.key)
    if (value is None or interval is None) and run.per_case is not None and column.metric in run.per_case:
        vals = _slice(run.per_case, column.segment)[column.metric].to_numpy(dtype=float)
        if len(vals):
            value = float(vals.mean()) if value is None else value
            interval = bootstrap_interval(vals, samples, seed) if interval is None else interval
    return value, interval


def paired_values(base: pd.DataFrame, other: pd.DataFrame, metric: str,
                  segment: Segment | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-case values of ``metric`` of two runs on their common cases (inner join on case_id)."""
    if metric not in base or metric not in other:
        return np.array([]), np.array([])
    left = _slice(base, segment)[["case_id", metric]]
    right = other[["case_id", metric]]
    for name, df in (("baseline", left), ("candidate", right)):
        if df["case_id"].duplicated().any():
            raise UserError(f"{name} per-case table has duplicate case ids; cannot pair cases")
    joined = left.merge(right, on="case_id", suffixes=("_a", "_b"))
    return joined[f"{metric}_a"].to_numpy(dtype=float), joined[f"{metric}_b"].to_numpy(dtype=float)


class _Pairing:
    """:func:`paired_values` for one (baseline, candidate) pair and many columns: the cases are
    joined once, not once per metric and segment (a 100-point sweep summary made ~700 joins)."""

    def __init__(self, base: pd.DataFrame, other: pd.DataFrame) -> None:
        for name, df in (("baseline", base), ("candidate", other)):
            if df["case_id"].duplicated().any():
                raise UserError(f"{name} per-case table has duplicate case ids; cannot pair cases")
        joined = (base[["case_id"]].assign(_ia=np.arange(len(base)))
                  .merge(other[["case_id"]].assign(_ib=np.arange(len(other))), on="case_id"))
        self.base, self.other = base, other
        self.ia, self.ib = joined["_ia"].to_numpy(), joined["_ib"].to_numpy()

    def values(self, metric: str, segment: Segment | None = None) -> tuple[np.ndarray, np.ndarray]:
        if metric not in self.base or metric not in self.other:
            return np.array([]), np.array([])
        ia, ib = self.ia, self.ib
        if segment is not None:
            if segment.column not in self.base:
                return np.array([]), np.array([])
            keep = self.base[segment.column].astype(str).to_numpy()[ia] == segment.value
            ia, ib = ia[keep], ib[keep]
        return (self.base[metric].to_numpy(dtype=float)[ia], self.other[metric].to_numpy(dtype=float)[ib])


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
                     alpha: float = 0.05, n_resamples: int = 10000, seed: int = 13,
                     labels: Sequence[str] | None = None) -> Comparison:
    """Compare ``runs`` with ``runs[0]`` (the baseline). ``labels``: row names (default: short run names)."""
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
    columns = [Column(m, m, None, metric_title(m)) for m in metrics]
    columns += [Column(f"{primary}.{s.suffix}", primary, s, s.title) for s in segs]
    labels = list(labels) if labels is not None else short_labels(runs)
    if len(labels) != len(runs):
        raise ValueError("one label per run")
    base = runs[0]
    warnings = _digest_warnings(runs, labels)
    notes: list[str] = []

    raw: dict[str, list[Cell]] = {c.key: [] for c in columns}
    # the baseline's value per column once (it may be a bootstrap from the per-case table), not per run
    base_values = {c.key: value_and_interval(base, c, seed=seed)[0] for c in columns}
    pairings: dict[str, _Pairing] = {}
    for r in runs:
        same_golden = r.golden is not None and r.golden == base.golden
        for c in columns:
            value, interval = value_and_interval(r, c, seed=seed)
            delta = p = None
            n = 0
            if r is not base and value is not None:
                bval = base_values[c.key]
                delta = None if bval is None else value - bval
                if same_golden and base.per_case is not None and r.per_case is not None:
                    if r.id not in pairings:
                        pairings[r.id] = _Pairing(base.per_case, r.per_case)
                    a, b = pairings[r.id].values(c.metric, c.segment)
                    n = len(a)
                    if n:
                        delta = float(b.mean() - a.mean())
                        p = paired_permutation_test(a, b, n_resamples=n_resamples, seed=seed)
            raw[c.key].append(Cell(value, interval, delta, p, None, n))
    # Holm across the runs compared with the baseline, separately for each column
    for c in columns:
        cells = raw[c.key]
        adj = holm([math.nan if cell.p is None else cell.p for cell in cells[1:]])
        raw[c.key] = [cells[0]] + [
            Cell(cell.value, cell.interval, cell.delta, cell.p, None if math.isnan(q) else q, cell.n_paired)
            for cell, q in zip(cells[1:], adj)]

    rows = []
    for i, (r, label) in enumerate(zip(runs, labels)):
        flags = []
        if i and r.golden != base.golden:
            flags.append("golden")
        if i and r.corpus != base.corpus:
            flags.append("corpus")
        wtl = None
        if i and "golden" not in flags and base.per_case is not None and r.per_case is not None:
            a, b = paired_values(base.per_case, r.per_case, primary)
            if len(a):
                wtl = win_tie_loss(a, b)
                if len(a) != len(base.per_case) or len(a) != len(r.per_case):
                    notes.append(f"{label}: paired over the {len(a)} cases both runs scored "
                                 f"(baseline {len(base.per_case)}, this run {len(r.per_case)})")
        if i and (base.per_case is None or r.per_case is None):
            notes.append(f"{label}: no per-case table (per_case.json) on "
                         f"{'the baseline' if base.per_case is None else 'this run'}: no paired test")
        rows.append(Row(r, label, i == 0, {c.key: raw[c.key][i] for c in columns}, wtl, tuple(flags)))
    return Comparison(rows, columns, primary, alpha, warnings, notes)


# -- rendering ------------------------------------------------------------------------------------
def _fmt(v: float | None) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def _fmt_p(p: float | None) -> str:
    if p is None:
        return "p n/a"
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def value_text(cell: Cell) -> str:
    if cell.value is None:
        return "—"
    if cell.interval is None:
        return _fmt(cell.value)
    return f"{_fmt(cell.value)} [{cell.interval[0]:.2f}, {cell.interval[1]:.2f}]"


def delta_text(cell: Cell, alpha: float) -> tuple[str, int]:
    """'Δ+0.100 p=0.012*' and its sign when significant (+1 better, -1 worse, 0 neither)."""
    if cell.delta is None:
        return "", 0
    sig = cell.p_adj is not None and cell.p_adj < alpha
    direction = (1 if cell.delta > 0 else -1 if cell.delta < 0 else 0) if sig else 0
    return f"Δ{cell.delta:+.3f} {_fmt_p(cell.p_adj)}{'*' if sig else ''}", direction


def legend(cmp: Comparison) -> str:
    base = cmp.baseline
    k = len(cmp.rows) - 1
    return (f"value [95% bootstrap interval]; Δ = run − baseline ({base.label}) over cases paired by case_id; "
            f"p = two-sided paired randomization test, Holm-corrected across the {k} run(s) compared in each "
            f"column; * p < {cmp.alpha:g}; W/T/L = cases won/tied/lost on {metric_title(cmp.primary)}; "
            f"segment columns show {metric_title(cmp.primary)}.")


#: terminal layout: a wide cell is "0.705 [0.65, 0.76]" over "Δ+0.020 p=0.569*"; a narrow one
#: stacks value, interval, delta and p (11 characters), and columns that do not fit go to a
#: second table with the run labels repeated, so nothing is cut at 80 columns
_WIDE_CELL, _NARROW_CELL, _LABEL_MAX = 18, 11, 26


def rich_tables(cmp: Comparison, width: int = 180) -> list:
    """The comparison as rich tables that fit ``width`` columns (one when it fits)."""
    n_cols = len(cmp.columns) + 1  # + W/T/L
    flag_w = len(f"{WARN} golden+corpus differ") if any(r.flags for r in cmp.rows) else 0
    label_w = min(_LABEL_MAX, max(flag_w, *(len(r.label) for r in cmp.rows)) + 2)
    fixed = label_w + 3 + 5 + 3 + 1  # run, n (with padding and borders)
    wide = fixed + n_cols * (_WIDE_CELL + 3) <= width
    cell_w = _WIDE_CELL if wide else _NARROW_CELL
    per_table = max(1, (width - fixed) // (cell_w + 3))
    keys = [c.key for c in cmp.columns] + ["W/T/L"]
    chunks = [keys[i:i + per_table] for i in range(0, len(keys), per_table)]
    return [rich_table(cmp, chunk, wide, label_w, first=(i == 0), last=(i == len(chunks) - 1))
            for i, chunk in enumerate(chunks)]


def rich_table(cmp: Comparison, keys: Sequence[str] | None = None, wide: bool = True, label_w: int = _LABEL_MAX,
               first: bool = True, last: bool = True):
    from rich.table import Table
    from rich.text import Text

    keys = list(keys) if keys is not None else [c.key for c in cmp.columns] + ["W/T/L"]
    columns = [c for c in cmp.columns if c.key in keys]
    golden = cmp.baseline.run.golden
    title = (f"{len(cmp.rows)} runs | golden {golden[:12] if golden else 'unknown'} | "
             f"baseline: {cmp.baseline.label}")
    if not cmp.comparable:
        title = f"{WARN} NOT COMPARABLE: different golden set or corpus {WARN} | " + title
    table = Table(title=title if first else None, caption=legend(cmp) if last else None, caption_justify="left",
                  show_lines=True, title_style="bold red" if not cmp.comparable else "bold")
    # labels wrap at spaces (fold inside a long word) instead of being cut to "retri…"
    table.add_column("run", overflow="fold", max_width=label_w)
    table.add_column("n", justify="right", no_wrap=True)
    cell_w = _WIDE_CELL if wide else _NARROW_CELL
    for c in columns:
        table.add_column(c.title, justify="right", overflow="fold", max_width=cell_w)
    if "W/T/L" in keys:
        table.add_column(f"W/T/L {metric_title(cmp.primary)}", justify="right", overflow="fold", max_width=cell_w)
    sep = " " if wide else "\n"
    for row in cmp.rows:
        label = Text(row.label, style="bold" if row.baseline else "")
        if row.flags:
            label.append(f"\n{WARN} {'+'.join(row.flags)} differ{'s' if len(row.flags) == 1 else ''}",
                         style="bold red")
        cells = []
        for c in columns:
            cell = row.cells[c.key]
            value = value_text(cell)
            t = Text(value if wide else value.replace(" [", "\n[").replace(", ", ","))
            if row.baseline:
                t.append("\nbaseline", style="dim")
            else:
                text, direction = delta_text(cell, cmp.alpha)
                if text:
                    t.append("\n" + text.replace(" ", sep, 1), style={1: "bold green", -1: "bold red"}.get(direction, "dim"))
            cells.append(t)
        if "W/T/L" in keys:
            cells.append(Text("" if row.wtl is None else str(row.wtl)))
        n = row.n_cases
        table.add_row(label, "" if n is None else str(n), *cells)
    return table


def markdown_table(cmp: Comparison, rows: Sequence[Row] | None = None) -> str:
    """GitHub-flavoured Markdown: warnings as an alert block, then the table and its legend.

    Plain Markdown only (no ``<br>``/``<sub>``: MLflow's viewer shows HTML as text): a cell is
    ``value [interval] · Δ delta p`` on one line. ``rows``: a subset to show (default: all).
    """
    lines: list[str] = []
    for w in cmp.warnings:
        lines += ["> [!WARNING]", f"> {_md_escape(w)}", ""]
    head = ["run", "n"] + [c.title for c in cmp.columns] + [f"W/T/L {metric_title(cmp.primary)}"]
    lines.append("| " + " | ".join(_md_escape(h) for h in head) + " |")
    lines.append("|" + "---|" + "---:|" * (len(head) - 1))
    for row in (cmp.rows if rows is None else rows):
        label = f"**{_md_escape(row.label)}** (baseline)" if row.baseline else _md_escape(row.label)
        if row.flags:
            label += f" {WARN} {'+'.join(row.flags)} differ{'s' if len(row.flags) == 1 else ''}"
        cells = []
        for c in cmp.columns:
            cell = row.cells[c.key]
            text = value_text(cell)
            if not row.baseline:
                dt, direction = delta_text(cell, cmp.alpha)
                if dt:
                    dt = _md_escape(dt)
                    text += f" · {f'**{dt}**' if direction else dt}"
            cells.append(text)
        n = row.n_cases
        lines.append("| " + " | ".join([label, "" if n is None else str(n), *cells,
                                          "" if row.wtl is None else str(row.wtl)]) + " |")
    lines += ["", f"_{_md_escape(legend(cmp))}_", ""]
    lines += [f"- {_md_escape(n)}" for n in cmp.notes]
    return "\n".join(lines) + "\n"


def _md_escape(text: str) -> str:
    # '*' (the significance mark) would start emphasis ('_' inside words does not); '|' ends a cell
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*").replace("<", "&lt;").replace("\n", " ")


def print_comparison(cmp: Comparison, markdown: bool = False, console: Any = None) -> None:
    import sys

    if markdown:
        sys.stdout.write(markdown_table(cmp))
        for w in cmp.warnings:  # also where a person watching the job log sees it
            print(f"WARNING: {w}", file=sys.stderr)
        return
    from rich.panel import Panel

    from ..report import console as make_console

    out = console or make_console()
    for w in cmp.warnings:
        out.print(Panel(w, title=f"{WARN} WARNING {WARN}", style="bold red"))
    if not cmp.comparable:  # also in the table title, which a narrow table wraps
        out.print(f"[bold red]{WARN} NOT COMPARABLE: different golden set or corpus {WARN}[/]")
    for table in rich_tables(cmp, out.width):
        out.print(table)
    for n in cmp.notes:
        out.print(f"[yellow]note:[/yellow] {n}")


# -- the one differing parameter ------------------------------------------------------------------
def differing_params(runs: Sequence[RunView]) -> list[str]:
    """Flattened params whose values differ between runs (where and how a run logs ignored)."""
    keys = sorted(set().union(*[set(r.params) for r in runs]))
    keys = [k for k in keys if not any(k == p or k.startswith(p) for p in IGNORED_PARAM_PREFIXES)]
    return [k for k in keys if len({r.params.get(k) for r in runs}) > 1]


# -- plots ----------------------------------------------------------------------------------------
def comparison_figures(cmp: Comparison) -> list[tuple[Any, str]]:
    """(figure, artifact path) for every comparison plot that applies to these runs."""
    from . import compare_plots as P

    runs = [r.run for r in cmp.rows]
    figs = []
    # A hundred curves or bar groups are unreadable: past MAX_PLOTTED runs, the per-run charts
    # show the baseline and the best of the rest by the primary metric, and say so.
    shown, note = _runs_to_draw(cmp)
    shown_runs = [r.run for r in shown]
    labels = [r.label for r in shown]
    if all(r.per_case is not None and "recall_curve" in r.per_case for r in shown_runs):
        figs.append((P.recall_curves_figure(shown_runs, labels, title=f"recall@k{note}" if note else None),
                     "comparison/recall_at_k.png"))
    segs = [Segment("kind", v) for v in _segment_values(shown_runs, "kind")]
    segs += [Segment("doc_type", v) for v in _segment_values(shown_runs, "doc_type")]
    figs.append((P.segment_bars_figure(shown_runs, labels, cmp.primary, segs, value_and_interval,
                                       title=f"{metric_title(cmp.primary)} per segment{note}" if note else None),
                 f"comparison/{cmp.primary}_by_segment.png"))
    diff = differing_params(runs)
    if len(runs) > 1 and len(diff) == 1:
        param = diff[0]
        figs.append((P.param_figure(runs, param, cmp.primary, value_and_interval),
                     f"comparison/{cmp.primary}_vs_{param}.png"))
    elif len(runs) > 2 and len(diff) == 2:
        a, b = diff
        figs.append((P.param_heatmap_figure(runs, (a, b), cmp.primary, value_and_interval),
                     f"comparison/{cmp.primary}_over_{a}_x_{b}.png"))
    return figs


MAX_PLOTTED = 10


def _runs_to_draw(cmp: Comparison) -> tuple[list, str]:
    """The rows the per-run charts draw, and a title suffix saying what was left out."""
    rows = list(cmp.rows)
    if len(rows) <= MAX_PLOTTED:
        return rows, ""
    baseline, rest = rows[0], rows[1:]
    col = Column(cmp.primary, cmp.primary, None, "all")

    def score(row) -> float:
        v = value_and_interval(row.run, col)[0]
        return float("-inf") if v is None else v

    best = sorted(rest, key=score, reverse=True)[: MAX_PLOTTED - 1]
    return [baseline, *best], f": baseline + best {len(best)} of {len(rows)} runs by {metric_title(cmp.primary)}"


def save_plots(cmp: Comparison, folder) -> list[str]:
    from pathlib import Path

    from .plots import _plt

    plt = _plt()
    out = []
    for fig, name in comparison_figures(cmp):
        path = Path(folder) / Path(name).name
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(str(path))
    return out


def log_plots(cmp: Comparison, parent: RunView | None = None, c=None) -> tuple[str, list[str]]:
    """Log the plots (and the Markdown table) to the sweep parent, else to a new comparison run.

    The parent is the named sweep, else the parent every run shares. Returns (run id, paths).
    """
    from .plots import _plt
    from .ownership import owner_tags
    from .runs import client

    c = c or client()
    runs = [r.run for r in cmp.rows]
    if parent is None:
        parents = {r.parent_id for r in runs}
        if len(parents) == 1 and None not in parents:
            parent_id = parents.pop()
        else:
            parent_id = None
    else:
        parent_id = parent.id
    if parent_id is None:
        created = c.create_run(runs[0].experiment_id, run_name=f"compare {len(runs)} runs"[:240], tags={
            "comparison": "true", "compared_runs": ",".join(r.id for r in runs)[:5000],
            "baseline_run": runs[0].id, "primary_metric": cmp.primary, **owner_tags()})
        parent_id = created.info.run_id
        c.set_terminated(parent_id, status="FINISHED")
    plt = _plt()
    paths = []
    for fig, name in comparison_figures(cmp):
        c.log_figure(parent_id, fig, name)
        plt.close(fig)
        paths.append(name)
    c.log_text(parent_id, markdown_table(cmp), "comparison/table.md")
    paths.append("comparison/table.md")
    return parent_id, paths
