"""The objective over time: the gate's nightly runs and the promotions of one champion name.

Points, oldest first: every run the gate checked (tag ``gate``; ``gate_model`` names the
champion, runs from before that tag count for ``default``) at its start time, and every
promotion of ``rag-retriever-<name>`` (tag ``champion_of``) at its ``promoted_at`` time.

Each point shows the metric as logged (on its own golden version), and against the previous
point the delta **on their common cases**: the same logged cases when both used one golden
version, else the older version's shared cases with its labels (:func:`.versioned.align`:
the newer run rescored from its stored ranked lists). Chaining those deltas gives a series that
a growing golden set does not bend (``chained``): it starts at the first point's value and moves
only by what changed on cases both neighbours had. A pair that is not comparable (a version not
on the chain, another corpus) restarts the chain at the logged value and says why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Sequence

import pandas as pd
from rich.table import Table

from ..evaluation.metric_key import metric_title
from .champion import model_name, read_record, record_path
from .compare_render import fmt
from .mlflow_run import setup
from .runs import RunView, client, get_run, search, tag_filter
from .versioned import align

KIND_NIGHTLY = "nightly"
KIND_PROMOTION = "promotion"


@dataclass(frozen=True)
class Point:
    when: int  # ms since the epoch
    kind: str  # nightly | promotion
    run: RunView
    value: float | None  # the metric as logged, on the run's own golden version
    n_cases: int | None
    records: str  # golden version: record count ("?" for runs logged before it was recorded)
    shared: int | None = None  # cases in common with the previous point
    delta: float | None = None  # this - previous on those cases
    chained: float | None = None
    note: str = ""
    verdict: str = ""  # the gate's pass/fail for nightly points


def _promoted_ms(run: RunView) -> int:
    raw = run.tags.get("promoted_at")
    try:
        return int(datetime.fromisoformat(raw).astimezone(timezone.utc).timestamp() * 1000) if raw else run.start_time
    except ValueError:
        return run.start_time


def _record_point(name: str) -> tuple[int, str, RunView] | None:
    """The champion of the committed record (experiments/promoted/NAME.record.json) as a promotion."""
    champion = read_record(name)
    if champion is None:
        return None
    raw = json.loads(record_path(name).read_text()).get("promoted")
    run = replace(champion.run, tags={**champion.run.tags, "promoted_at": raw or ""})
    return _promoted_ms(run), KIND_PROMOTION, run


def collect(name: str, metric: str, last: int | None = None, c=None) -> list[tuple[int, str, RunView]]:
    """(time, kind, run) of the nightly gate runs and the promotions of ``name``, oldest first."""
    c = c or client()
    model = model_name(name)
    out = []
    for r in search(tag_filter("champion_of", model), per_case=False, c=c):
        if r.tags.get("champion_source") == "record":
            continue  # a stand-in the registry was re-populated with: the record's own point below is it
        out.append((_promoted_ms(r), KIND_PROMOTION, r))
    promoted = {r.id for _, _, r in out}
    record = _record_point(name)
    if record is not None and record[2].id not in promoted:
        out.append(record)  # a fresh store in CI: the committed record is the only trace of the promotion
    for r in search("tags.gate != ''", per_case=False, c=c):
        # a gate run made with --set overrides is not the promoted config: a point of the trend it is not (a
        # new user's trial showed 0.546 -> 0.473 -> 0.037 from two such runs); cmd_history says how many
        if r.tags.get("gate_model", model_name("default")) == model and not r.tags.get("gate_overrides"):
            out.append((r.start_time, KIND_NIGHTLY, r))
    out.sort(key=lambda x: (x[0], x[1]))
    return out[-last:] if last else out


def _pair_delta(prev: RunView, this: RunView, metric: str, c) -> tuple[int | None, float | None, str]:
    """(common cases, delta on them, note) between two consecutive points."""
    if prev.corpus != this.corpus:
        return None, None, "another corpus: chain restarted"
    a = get_run(prev.id, c=c) if prev.per_case is None else prev
    b = get_run(this.id, c=c) if this.per_case is None else this
    alignment = align([a, b], c)
    if alignment.reason:
        return None, None, alignment.reason.split(": ", 1)[-1][:160] + " (chain restarted)"
    ra, rb = alignment.runs
    if ra.per_case is None or rb.per_case is None or metric not in ra.per_case or metric not in rb.per_case:
        return None, None, "no per-case table: chain restarted"
    joined = ra.per_case[["case_id", metric]].merge(rb.per_case[["case_id", metric]], on="case_id")
    if joined.empty:
        return 0, None, "no common cases: chain restarted"
    delta = float(joined[f"{metric}_y"].mean() - joined[f"{metric}_x"].mean())
    note = ""
    if alignment.gap is not None:
        g = alignment.gap
        note = (f"golden {g.older.records}->{g.newer.records} records: +{len(g.added)} cases, "
                f"{len(g.superseded)} superseded, {len(g.reanchored)} re-anchored, {len(g.retired)} retired")
    return len(joined), delta, note


def build_history(name: str = "default", metric: str = "recall_at_5", last: int | None = None, c=None) -> list[Point]:
    c = c or client()
    points: list[Point] = []
    prev: RunView | None = None
    for when, kind, run in collect(name, metric, last, c):
        value = run.metric(metric)
        n = run.metric("n_cases")
        records = run.tags.get("golden_records", "?")
        shared = delta = chained = None
        note = ""
        if prev is None:
            chained = value
        elif prev.id == run.id:
            shared, delta, note = (int(n) if n is not None else None), 0.0, "same run"
        else:
            shared, delta, note = _pair_delta(prev, run, metric, c)
        if prev is not None:
            last_chain = points[-1].chained
            chained = (last_chain + delta) if (delta is not None and last_chain is not None) else value
        points.append(Point(when, kind, run, value, None if n is None else int(n), records, shared, delta, chained,
                            note, run.tags.get("gate", "") if kind == KIND_NIGHTLY else ""))
        prev = run
    return points


# -- rendering ------------------------------------------------------------------------------------
def _ts(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M")


HEAD = ["when (UTC)", "event", "run", "golden records", "n", "{m}", "shared with prev", "Δ on shared", "chained {m}",
        "note"]


def rows(points: Sequence[Point], metric: str) -> list[list[str]]:
    out = []
    for p in points:
        event = p.kind + (f" ({p.verdict})" if p.verdict else "")
        out.append([_ts(p.when), event, p.run.id[:8], p.records, "" if p.n_cases is None else str(p.n_cases),
                    fmt(p.value), "" if p.shared is None else str(p.shared), fmt(p.delta, True), fmt(p.chained), p.note])
    return out


def headers(metric: str) -> list[str]:
    return [h.format(m=metric_title(metric)) for h in HEAD]


def markdown(points: Sequence[Point], metric: str) -> str:
    head = headers(metric)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows(points, metric):
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in r) + " |")
    return "\n".join(lines) + "\n"


def rich_table(points: Sequence[Point], metric: str, title: str):
    table = Table(title=title, caption="Δ: this point minus the previous one on the cases both have (older golden "
                  "version's cases and labels when the versions differ); chained: the first value moved by those "
                  "deltas only", caption_justify="left")
    for h in headers(metric):
        table.add_column(h, justify="left" if h in ("when (UTC)", "event", "run", "note") else "right")
    for r in rows(points, metric):
        table.add_row(*r)
    return table


def trend_markdown(points: Sequence[Point], metric: str, name: str, last: int = 10) -> str:
    """For a job summary: the latest point, the trend over the last points, and the table."""
    t = metric_title(metric)
    if not points:
        return f"### {t} over time ({name})\n\nNo nightly gate run or promotion yet.\n"
    p = points[-1]
    recent = list(points[-last:])
    moves = [q.delta for q in recent[1:] if q.delta is not None]
    trend = (f"{sum(moves):+.3f} over the last {len(recent)} points (chained, on common cases)"
             if moves else "no comparable earlier point")
    lines = [f"### {t} over time (`{name}`)", "",
             f"**Latest:** {fmt(p.value)} ({p.kind}{', ' + p.verdict if p.verdict else ''}, {_ts(p.when)} UTC, run "
             f"`{p.run.id[:12]}`, {p.n_cases or '?'} cases, golden {p.records} records)"
             + (f"; Δ vs previous on {p.shared} shared cases: {fmt(p.delta, True)}" if p.delta is not None else ""),
             "", f"**Trend:** {trend}.", "", markdown(recent, metric)]
    return "\n".join(lines)


def figure(points: Sequence[Point], metric: str, name: str):
    from .plots import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    t = metric_title(metric)
    xs = [datetime.fromtimestamp(p.when / 1000, timezone.utc) for p in points]
    for kind, verdict, marker, color, label in (
            (KIND_NIGHTLY, "pass", "o", "tab:blue", "nightly, gate passed"),
            (KIND_NIGHTLY, "fail", "X", "tab:red", "nightly, gate failed"),
            (KIND_PROMOTION, "", "*", "tab:orange", "promotion")):
        sel = [(x, p.value) for x, p in zip(xs, points)
               if p.kind == kind and (p.verdict or "pass" if kind == KIND_NIGHTLY else "") == verdict
               and p.value is not None]
        if sel:
            ax.scatter([s[0] for s in sel], [s[1] for s in sel], marker=marker, s=80 if marker == "*" else 36,
                       color=color, zorder=3, label=f"{label} (as logged, own golden version)")
    chained = [(x, p.chained) for x, p in zip(xs, points) if p.chained is not None]
    if chained:
        ax.plot([c[0] for c in chained], [c[1] for c in chained], ls="--", color="black", lw=1.2,
                label="chained on common cases")
    for i in range(1, len(points)):
        if points[i].records != points[i - 1].records:
            ax.axvline(xs[i], color="grey", ls=":", lw=1)
            ax.annotate(f"golden {points[i].records}", (xs[i], 1.0), xycoords=("data", "axes fraction"),
                        rotation=90, va="top", ha="right", fontsize=7, color="grey")
    ax.set_ylabel(t)
    ax.set_title(f"{t} over time: nightly gate runs and promotions ({name})")
    ax.legend(fontsize=8, loc="lower left")
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig


def _experiment_exists(c, experiment_id: str) -> bool:
    try:
        return c.get_experiment(experiment_id).lifecycle_stage == "active"
    except Exception:  # noqa: BLE001 - MlflowException: no such experiment in this store
        return False


def _project_experiment() -> str:
    return setup(None, "rag-experiments")


def log_history(points: Sequence[Point], metric: str, name: str, c=None) -> str:
    """Log the table, the plot and the series as metrics (step = point, timestamp = its time) to a
    run named ``history <name>`` (tag ``history=true``); return its id."""
    from mlflow.entities import Metric

    from .plots import pyplot

    c = c or client()
    # the experiment of a point that is in this store (the committed record's run usually is not: a
    # fresh store in CI), else the project's experiment
    exp = next((p.run.experiment_id for p in points if p.run.experiment_id and _experiment_exists(c, p.run.experiment_id)),
               None) or _project_experiment()
    run = c.create_run(exp, run_name=f"history {name}", tags={"history": "true", "history_metric": metric,
                                                              "history_name": name})
    rid = run.info.run_id
    series = []
    for i, p in enumerate(points):
        if p.value is not None:
            series.append(Metric(f"history.{metric}", p.value, p.when, i))
        if p.chained is not None:
            series.append(Metric(f"history.{metric}.chained", p.chained, p.when, i))
    for lo in range(0, len(series), 900):
        c.log_batch(rid, metrics=series[lo:lo + 900])
    c.log_text(rid, trend_markdown(points, metric, name, last=len(points) or 1), "history/table.md")
    frame = pd.DataFrame([dict(zip(headers(metric), r)) for r in rows(points, metric)])
    c.log_text(rid, frame.to_csv(index=False), "history/points.csv")
    if points:
        plt = pyplot()
        fig = figure(points, metric, name)
        c.log_figure(rid, fig, f"history/{metric}.png")
        plt.close(fig)
    c.set_terminated(rid, status="FINISHED")
    return rid


def runs_with_overrides(name: str, c=None) -> list[RunView]:
    """The gate runs of ``name`` made with --set overrides, left out of the trend (:func:`collect`)."""
    model = model_name(name)
    return [r for r in search("tags.gate_overrides != ''", per_case=False, c=c or client())
            if r.tags.get("gate_model", model_name("default")) == model]
