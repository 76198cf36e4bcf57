"""Comparison plots of several runs (PNG files, or MLflow artifacts of ``rag-exp compare --log-plots``).

* recall@k for k = 1..20: the mean of the per-case ``recall_curve`` of every run, one chart;
* the primary metric per segment (all, each query kind, each doc type), one bar per run, with
  the 95% bootstrap interval as whiskers;
* when the runs differ in exactly one parameter: the primary metric against that parameter,
  with intervals, on an axis cut to the spread, the best point starred, the points tied with it
  hollow and the champion's value as a dashed line (and each query kind as a thinner line).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..evaluation.metric_key import MetricKey, Segment, metric_title
from .compare import Comparison, differing_params, known_segments, value_and_interval
from .champion import current_champion
from .ownership import owner_tags
from .plots import curve_interval, pyplot
from .runs import RunView, client
from .verdict import verdicts

MAX_PLOTTED = 10


def _colors(n: int) -> list:
    plt = pyplot()
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


def _legend_below(ax, n: int, offset: float = -0.16) -> None:
    labels = ax.get_legend_handles_labels()[1]
    ncol = min(n, 4 if max((len(t) for t in labels), default=0) <= 24 else 2)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, offset), ncol=ncol, frameon=False, fontsize=9)


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def _with_whiskers(pairs) -> tuple[list[float], np.ndarray]:
    """Values of (run, metric key) pairs (NaN when missing) and their interval's reach below and above."""
    found = [value_and_interval(run, key) for run, key in pairs]
    return ([np.nan if v is None else v for v, _ in found],
            np.array([(0.0, 0.0) if v is None or iv is None else (max(0.0, v - iv[0]), max(0.0, iv[1] - v))
                      for v, iv in found]).T)


def recall_curves_figure(runs: Sequence[RunView], labels: Sequence[str], title: str | None = None):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 5.0))
    ks = None
    for i, (run, label, color) in enumerate(zip(runs, labels, _colors(len(runs)))):
        curves = np.array(run.per_case["recall_curve"].tolist(), dtype=float)
        ks = np.arange(1, curves.shape[1] + 1)
        ax.plot(ks, curves.mean(axis=0), marker=MARKERS[i % len(MARKERS)], ms=5 if i == 0 else 4,
                lw=2.6 if i == 0 else 1.5, color=color, alpha=0.9, zorder=3 if i == 0 else 2,
                label=f"{label} (baseline)" if i == 0 and len(runs) > 1 else label)
        # each run's 95% bootstrap band: two curves whose bands overlap at a k are not told apart there
        ax.fill_between(ks, *curve_interval(curves), color=color, alpha=0.12, lw=0, zorder=1)
    n = len(runs[0].per_case) if runs and runs[0].per_case is not None else 0
    ax.set_xlabel("k (chunks retrieved)")
    ax.set_ylabel("mean recall@k")
    ax.set_ylim(0, 1.02)
    if ks is not None:
        ax.set_xticks(ks)
        ax.set_xlim(0.5, ks[-1] + 0.5)
    ax.grid(alpha=0.3)
    ax.set_title(title or f"recall@k, {len(runs)} runs ({n} cases; bands: 95% bootstrap intervals)")
    _legend_below(ax, len(runs))
    fig.tight_layout()
    return fig


def segment_bars_figure(runs: Sequence[RunView], labels: Sequence[str], primary: str,
                        segments: Sequence[Segment], title: str | None = None):
    """Grouped bars: x = segment (all, query kinds, doc types), one bar per run, interval whiskers."""
    plt = pyplot()
    key = MetricKey.parse(primary)
    groups: list[tuple[str, MetricKey]] = [("all", key)] + [(s.value, key.on(s)) for s in segments]
    base = runs[0].per_case

    def n_cases(seg: Segment | None) -> int | None:
        if base is None or (seg is not None and seg.column not in base):
            return None
        return len(base) if seg is None else int((base[seg.column].astype(str) == seg.value).sum())

    names = [name if (n := n_cases(col.segment)) is None else f"{name}\nn={n}" for name, col in groups]
    n_runs, n_groups = len(runs), len(groups)
    width = 0.8 / n_runs
    fig, ax = plt.subplots(figsize=(min(18.0, max(7.5, 1.5 + n_groups * (0.22 * n_runs + 0.45))), 5.4))
    x = np.arange(n_groups)
    for i, (run, label, color) in enumerate(zip(runs, labels, _colors(n_runs))):
        vals, errs = _with_whiskers([(run, col) for _, col in groups])
        ax.bar(x - 0.4 + width * (i + 0.5), vals, width * 0.9, yerr=errs,
               capsize=max(1.5, min(4.0, 16 / n_runs)), color=color, label=label,
               error_kw={"elinewidth": 1.0, "ecolor": "#333333"})
    # separators and second-level labels: overall | query kinds | doc types
    for column, text in (("kind", "query kind"), ("doc_type", "doc type")):
        block = [i for i, (_, c) in enumerate(groups) if c.segment is not None and c.segment.column == column]
        if block:
            ax.axvline(block[0] - 0.5, color="#888888", lw=0.8, ls=":")
            ax.annotate(text, xy=((block[0] + block[-1]) / 2, 1.075), xycoords=("data", "data"),
                        ha="center", va="center", fontsize=9, color="#555555")
    ax.set_xticks(x)
    ax.set_xticklabels(names, fontsize=9)
    ax.set_xlim(-0.6, n_groups - 0.4)
    ax.set_ylim(0, 1.12)
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.set_ylabel(metric_title(primary))
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(title or f"{metric_title(primary)} per segment (whiskers: 95% bootstrap interval)")
    _legend_below(ax, n_runs, offset=-0.2)
    fig.tight_layout()
    return fig


def _as_numbers(values: Sequence[str | None]) -> list[float] | None:
    try:
        return [float(v) for v in values]  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Marks:
    """What the sweep chart marks besides the values: the best run, the runs tied with it (the
    verdict's max-T test, :mod:`.verdict`) with their adjusted p, and the champion's value with
    whether it is comparable (scored on the same golden version)."""

    best_id: str | None = None
    tied: dict[str, float] = field(default_factory=dict)  # run id -> adjusted p vs the best
    champion: tuple[str, float, bool] | None = None  # (label, value, comparable)


def _spread_limits(values: Sequence[float], extra: Sequence[float] = ()) -> tuple[float, float]:
    """A y range that shows the spread of ``values`` (intervals included), not the distance from 0."""
    finite = [v for v in [*values, *extra] if v is not None and np.isfinite(v)]
    if not finite:
        return 0.0, 1.05
    lo, hi = min(finite), max(finite)
    pad = max(0.01, 0.12 * (hi - lo))
    return max(0.0, lo - pad), min(1.05, hi + pad)


def param_figure(runs: Sequence[RunView], param: str, primary: str,
                 kinds: Sequence[str] | None = None, title: str | None = None, marks: Marks | None = None):
    """The primary metric (with its 95% interval) against the one parameter that differs between
    runs, on an axis cut to the spread (a sweep's 0.79 / 0.79 / 0.78 are told apart), the best
    point starred, the points tied with it hollow (``marks``), the champion as a dashed line."""
    plt = pyplot()
    marks = marks or Marks()
    raw = [r.params.get(param) for r in runs]
    numbers = _as_numbers(raw)
    order = sorted(range(len(runs)), key=lambda i: numbers[i]) if numbers is not None else list(range(len(runs)))
    xs = [numbers[i] for i in order] if numbers is not None else list(range(len(order)))
    # all cases above (the marks, on the axis of their spread), each query kind below on its own
    # axis: a kind's values far from the overall ones must not stretch the overall axis back to 0
    fig, (ax, kax) = plt.subplots(2, 1, figsize=(7.5, 7.4), sharex=True, height_ratios=(3, 2))
    col = MetricKey.parse(primary)
    vals, errs = _with_whiskers([(runs[i], col) for i in order])
    categorical = numbers is None
    ax.errorbar(xs, vals, yerr=errs, fmt="-" if not categorical else "none", color="black", lw=1.5,
                capsize=5, label="all cases (95% interval)", zorder=3)
    shown: list[float] = [v - e for v, e in zip(vals, errs[0])] + [v + e for v, e in zip(vals, errs[1])]
    ids = [runs[i].id for i in order]
    for x, v, rid in zip(xs, vals, ids):
        if rid == marks.best_id:
            ax.plot([x], [v], marker="*", ms=18, color="#d4a72c", mec="black", zorder=6, ls="none")
            ax.annotate(f"best {v:.3f}", (x, v), textcoords="offset points", xytext=(10, 4), ha="left",
                        fontsize=9, fontweight="bold")
        elif rid in marks.tied:
            ax.plot([x], [v], marker="o", ms=9, mfc="white", mec="black", mew=2, zorder=5, ls="none")
            ax.annotate(f"tied {v:.3f}, p={marks.tied[rid]:.2f}", (x, v), textcoords="offset points",
                        xytext=(8, -12), ha="left", fontsize=8)
        else:
            ax.plot([x], [v], marker="o", ms=8, color="black", zorder=5, ls="none")
    # the legend's keys for the marks (one each, whatever the number of points)
    if marks.best_id:
        ax.plot([], [], marker="*", ms=12, color="#d4a72c", mec="black", ls="none", label="best point")
    if marks.tied:
        ax.plot([], [], marker="o", ms=8, mfc="white", mec="black", mew=2, ls="none",
                label="tied with the best (max-T p >= alpha)")
    if kinds is None:
        kinds = sorted({str(k) for r in runs if r.per_case is not None and "kind" in r.per_case
                        for k in r.per_case["kind"].dropna()})
    span = (max(xs) - min(xs)) if len(xs) > 1 else 1.0
    kind_values: list[float] = []
    for j, (kind, color) in enumerate(zip(kinds, _colors(len(kinds)))):
        kc = col.on(Segment("kind", kind))
        kv = [np.nan if v is None else v for v in (value_and_interval(runs[i], kc)[0] for i in order)]
        kind_values += kv
        # a small horizontal offset keeps equal values of different kinds visible
        step = 0.12 if categorical else 0.02 * (span or 1.0)
        shift = (j - (len(kinds) - 1) / 2) * step
        kx = [x + shift for x in xs]
        kax.plot(kx, kv, marker=MARKERS[(j + 1) % len(MARKERS)], ms=6, lw=0 if categorical else 1.2, ls="--",
                 color=color, label=f"{kind} only", alpha=0.9, zorder=4)
    if marks.champion is not None:
        label, value, comparable = marks.champion
        ax.axhline(value, color="#cf222e" if comparable else "#8c959f", ls="--", lw=1.5, zorder=2,
                   label=f"champion {label}: {value:.3f}" + ("" if comparable else " (other golden version)"))
        shown.append(value)
    kax.set_xticks(xs)
    if numbers is None:
        kax.set_xticklabels([str(raw[i]) for i in order], rotation=20 if len(order) > 4 else 0)
        kax.set_xlim(-0.5, len(xs) - 0.5)
    else:
        kax.set_xticklabels([f"{x:g}" for x in xs])
        pad = (max(xs) - min(xs)) * 0.06 or 0.5
        kax.set_xlim(min(xs) - pad, max(xs) + pad)
    kax.set_xlabel(param)
    ax.set_ylabel(metric_title(primary) + "\n(axis cut to the spread)")
    ax.set_ylim(*_spread_limits(shown))
    kax.set_ylabel("per query kind")
    kax.set_ylim(*_spread_limits(kind_values))
    for a in (ax, kax):
        a.grid(alpha=0.3)
    ax.set_title(title or f"{metric_title(primary)} vs {param}")
    # the legend below the axes, inside the figure (log_figure saves the figure as drawn, uncropped)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    handles = [h for a in (ax, kax) for h in a.get_legend_handles_labels()[0]]
    names = [n for a in (ax, kax) for n in a.get_legend_handles_labels()[1]]
    fig.legend(handles, names, loc="lower center", ncol=2, frameon=False, fontsize=8)
    return fig


def sweep_marks(cmp: Comparison, c=None) -> Marks:
    """The best point and its ties on the primary metric (the verdict the parent's description
    gives), and the champion of record's value on it when there is one."""
    primary = [col for col in cmp.columns if col.key.mlflow_name == cmp.primary]
    found = verdicts(replace(cmp, columns=primary)) if primary else []
    by_label = {row.label: row.run.id for row in cmp.rows}
    best_id, tied = None, {}
    if found:
        best_id = found[0].best_run_id
        tied = {by_label[label]: p for label, p in found[0].tied if label in by_label}
    return Marks(best_id, tied, _champion_line(cmp, c))


def _champion_line(cmp: Comparison, c=None) -> tuple[str, float, bool] | None:
    try:
        champ = current_champion(c=c)
    except Exception:  # noqa: BLE001 - no registry, no record: the chart draws no champion line
        return None
    if champ is None:
        return None
    value = champ.run.metrics.get(cmp.primary)
    if value is None:
        return None
    comparable = champ.run.golden == cmp.rows[0].run.golden
    name = champ.run.name or champ.run.id[:8]
    return (name if len(name) <= 28 else name[:27] + "…"), float(value), comparable


def param_heatmap_figure(runs: Sequence[RunView], params: tuple[str, str], primary: str, title: str | None = None):
    """The primary metric over a two-parameter grid (e.g. rrf_k x keyword_weight), one cell per
    run, the value written in each cell and the best cell outlined. Missing cells stay blank."""
    plt = pyplot()
    p_rows, p_cols = params

    def axis(param: str) -> list[str]:
        values = sorted({r.params.get(param) for r in runs}, key=lambda v: (v is None, str(v)))
        nums = _as_numbers(values)
        return [values[i] for i in sorted(range(len(values)), key=lambda i: nums[i])] if nums is not None else values

    rows, cols = axis(p_rows), axis(p_cols)
    grid = np.full((len(rows), len(cols)), np.nan)
    col = MetricKey.parse(primary)
    for r in runs:
        v = value_and_interval(r, col)[0]
        if v is not None:
            grid[rows.index(r.params.get(p_rows)), cols.index(r.params.get(p_cols))] = v
    fig, ax = plt.subplots(figsize=(min(14.0, 2.0 + 0.9 * len(cols)), min(12.0, 1.6 + 0.42 * len(rows))))
    finite = grid[np.isfinite(grid)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    im = ax.imshow(grid, cmap="viridis", aspect="auto", vmin=lo, vmax=hi if hi > lo else lo + 1e-9)
    for i in range(len(rows)):
        for j in range(len(cols)):
            if np.isfinite(grid[i, j]):
                dark = (grid[i, j] - lo) < 0.6 * (hi - lo)
                ax.text(j, i, f"{grid[i, j]:.3f}", ha="center", va="center", fontsize=8,
                        color="white" if dark else "black")
    if finite.size:
        bi, bj = np.unravel_index(np.nanargmax(grid), grid.shape)
        ax.add_patch(plt.Rectangle((bj - 0.5, bi - 0.5), 1, 1, fill=False, edgecolor="red", lw=2.5))
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels([str(c) for c in cols])
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([str(r) for r in rows])
    ax.set_xlabel(p_cols)
    ax.set_ylabel(p_rows)
    fig.colorbar(im, ax=ax, label=metric_title(primary))
    ax.set_title(title or f"{metric_title(primary)} over {p_rows} x {p_cols} (best outlined)")
    fig.tight_layout()
    return fig


# -- which plots --------------------------------------------------------------------------------
def comparison_figures(cmp: Comparison) -> list[tuple[Any, str]]:
    """(figure, artifact path) for every comparison plot that applies to these runs."""
    runs = [r.run for r in cmp.rows]
    figs = []
    # A hundred curves or bar groups are unreadable: past MAX_PLOTTED runs, the per-run charts
    # show the baseline and the best of the rest by the primary metric, and say so.
    shown, note = runs_to_draw(cmp)
    shown_runs = [r.run for r in shown]
    labels = [r.label for r in shown]
    if all(r.per_case is not None and "recall_curve" in r.per_case for r in shown_runs):
        figs.append((recall_curves_figure(shown_runs, labels, title=f"recall@k{note}" if note else None),
                     "comparison/recall_at_k.png"))
    figs.append((segment_bars_figure(shown_runs, labels, cmp.primary, known_segments(shown_runs),
                                     title=f"{metric_title(cmp.primary)} per segment{note}" if note else None),
                 f"comparison/{cmp.primary}_by_segment.png"))
    diff = differing_params(runs)
    if len(runs) > 1 and len(diff) == 1:
        param = diff[0]
        figs.append((param_figure(runs, param, cmp.primary, marks=sweep_marks(cmp)),
                     f"comparison/{cmp.primary}_vs_{param}.png"))
    elif len(runs) > 2 and len(diff) == 2:
        a, b = diff
        figs.append((param_heatmap_figure(runs, (a, b), cmp.primary),
                     f"comparison/{cmp.primary}_over_{a}_x_{b}.png"))
    return figs


def runs_to_draw(cmp: Comparison) -> tuple[list, str]:
    """The rows the per-run charts draw, and a title suffix saying what was left out."""
    rows = list(cmp.rows)
    if len(rows) <= MAX_PLOTTED:
        return rows, ""
    baseline, rest = rows[0], rows[1:]
    col = MetricKey.parse(cmp.primary)

    def score(row) -> float:
        v = value_and_interval(row.run, col)[0]
        return float("-inf") if v is None else v

    best = sorted(rest, key=score, reverse=True)[: MAX_PLOTTED - 1]
    return [baseline, *best], f": baseline + best {len(best)} of {len(rows)} runs by {metric_title(cmp.primary)}"


def _write_figures(cmp: Comparison, write) -> list[str]:
    """``write(figure, artifact path)`` for every figure (closed afterwards); what it returned."""
    plt, out = pyplot(), []
    for fig, name in comparison_figures(cmp):
        out.append(write(fig, name))
        plt.close(fig)
    return out


def save_plots(cmp: Comparison, folder) -> list[str]:
    def save(fig, name: str) -> str:
        path = Path(folder) / Path(name).name
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        return str(path)

    return _write_figures(cmp, save)


def log_plots(cmp: Comparison, parent: RunView | None = None, c=None) -> tuple[str, list[str]]:
    """Log the plots (and the Markdown table) to the sweep parent, else to a new comparison run.

    The parent is the named sweep, else the parent every run shares. Returns (run id, paths).
    """
    c = c or client()
    runs = [r.run for r in cmp.rows]
    parents = {r.parent_id for r in runs}
    shared = parents.pop() if len(parents) == 1 and None not in parents else None
    parent_id = parent.id if parent is not None else shared
    if parent_id is None:
        created = c.create_run(runs[0].experiment_id, run_name=f"compare {len(runs)} runs"[:240], tags={
            "comparison": "true", "compared_runs": ",".join(r.id for r in runs)[:5000],
            "baseline_run": runs[0].id, "primary_metric": cmp.primary, **owner_tags()})
        parent_id = created.info.run_id
        c.set_terminated(parent_id, status="FINISHED")
    paths = _write_figures(cmp, lambda fig, name: c.log_figure(parent_id, fig, name) or name)
    c.log_text(parent_id, cmp.to_markdown(), "comparison/table.md")
    paths.append("comparison/table.md")
    return parent_id, paths
