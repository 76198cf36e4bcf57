"""What a sweep's parent run carries, so the first row a user looks at holds the result.

Pure functions over plain values (override strings, child RunViews); the Hydra callback
(:mod:`.hydra_callback`) calls them and writes to MLflow:

* name: what was swept (``fusion.rrf_k=30,60,90``; ``experiment=rrf_sweep: ...`` for presets);
* params: the swept keys with their value lists, plus every param all children share;
* metrics: the best child's headline metrics and its objective on each segment, all of that one
  run (:func:`best_point_metrics`); the best child carries the tag ``sweep.best=true``;
* tags: the best child's id and overrides; the run description (``mlflow.note.content``, shown
  on the run's Overview) is a Markdown summary and comparison table that MLflow renders.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

from ..evaluation.metric_key import MetricKey, metric_title
from .runs import RunView

#: MLflow's limit on a tag value (the run description is a tag)
NOTE_LIMIT = 8000
#: the points nearest the best whose values and Δ from it the description bounds under unjudged hits
#: (each reads its ranked lists: a few, not the whole sweep)
BOUNDED_RIVALS = 2
#: params that say where/how a run was logged, not what it measured
_LOGISTIC_PARAMS = ("run_name", "progress", "tracking.", "db.")


def sweep_spec(task_overrides: Sequence[str], sweeper_params: Mapping[str, Any] | None) -> dict[str, str]:
    """Swept key -> its value list as written: command-line sweeps (``fusion.rrf_k=30,60,90``,
    ``range(5,105,5)``) first, then the sweeper's ``params`` (presets, Optuna search spaces)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    spec: dict[str, str] = {}
    for o in OverridesParser.create().parse_overrides(list(task_overrides)):
        if o.is_sweep_override() and o.input_line:
            spec[o.key_or_group] = o.input_line.split("=", 1)[1]
    for key, value in (sweeper_params or {}).items():
        spec.setdefault(str(key), str(value))
    return spec


def experiment_preset(task_overrides: Sequence[str]) -> str | None:
    for o in task_overrides:
        if o.startswith("experiment="):
            return o.split("=", 1)[1]
    return None


def parent_name(spec: Mapping[str, str], preset: str | None) -> str:
    swept = " ".join(f"{k}={v}" for k, v in spec.items())
    if preset:
        swept = f"experiment={preset}" + (f": {swept}" if swept else "")
    return (swept or "sweep")[:250]


def shared_params(children: Sequence[RunView], exclude: Sequence[str] = ()) -> dict[str, str]:
    """Params every child logged with the same value (the sweep's fixed configuration)."""
    if not children:
        return {}
    first = children[0].params
    out = {}
    for key, value in first.items():
        if key in exclude or any(key == p or key.startswith(p) for p in _LOGISTIC_PARAMS):
            continue
        if all(c.params.get(key) == value for c in children[1:]):
            out[key] = value
    return out


def best_child(children: Sequence[RunView], objective: str, maximize: bool = True) -> RunView | None:
    scored = [c for c in children if c.status == "FINISHED" and _finite(c.metrics.get(objective))]
    return best_of(scored, lambda c: c.metrics[objective], maximize)


#: values closer than this are equal for the tie rule (two means of the same per-case values summed
#: in another order differ by ~1e-16)
TIE_TOLERANCE = 1e-12


def best_of(runs: Sequence[RunView], value: Callable[[RunView], float], maximize: bool = True) -> RunView | None:
    """The one tie rule of the sweep parent, ``compare``, ``promote`` and the gate: the run with the
    best ``value`` (highest, or lowest when not ``maximize``); runs within :data:`TIE_TOLERANCE` of it
    are tied, and the tie goes to the **earliest point** (:func:`order_key`). With ``rrf_k=60`` and
    ``90`` equal, every command names 60. None when ``runs`` is empty."""
    runs = list(runs)
    if not runs:
        return None
    values = [float(value(r)) for r in runs]
    top = max(values) if maximize else min(values)
    tied = [r for r, v in zip(runs, values) if abs(v - top) <= TIE_TOLERANCE]
    return min(tied, key=order_key(tied))


def order_key(runs: Sequence[RunView]) -> Callable[[RunView], tuple]:
    """Which of ``runs`` comes first: when all are points of one sweep (one ``mlflow.parentRunId``,
    each with ``sweep.job_num``), the point Hydra listed first; otherwise the run that started first;
    then the run id (two runs started in the same millisecond)."""
    parents = {r.tags.get("mlflow.parentRunId") for r in runs}
    one_sweep = len(parents) == 1 and None not in parents and all(
        str(r.tags.get(JOB_NUM_TAG, "")).isdigit() for r in runs)
    if one_sweep:
        return lambda r: (int(r.tags[JOB_NUM_TAG]), r.start_time, r.id)
    return lambda r: (0, r.start_time, r.id)


#: the tag a sweep's point carries with its place in Hydra's list of jobs (tracking.execution)
JOB_NUM_TAG = "sweep.job_num"


def _finite(v: float | None) -> bool:
    return v is not None and not math.isnan(v)


def best_per_segment(children: Sequence[RunView], objective: str, maximize: bool = True,
                     spec: Mapping[str, str] | None = None) -> tuple[dict[str, float], dict[str, str]]:
    """The parent's metrics: the objective of the best child, and on each of the objective's
    segments (``recall_at_5.exact``, ...) the best value *any* child reached there, with the
    child that reached it as a tag (``best_run.recall_at_5.exact``: its swept values and id).
    Each metric is then the best of what it names: an exact-segment value read off the parent
    is the best exact value, not the best point's."""
    base = MetricKey.parse(objective).column
    metrics: dict[str, float] = {}
    tags: dict[str, str] = {}
    names = sorted({k for c in children for k in c.metrics
                    if MetricKey.parse(k).column == base and not k.endswith((".ci_low", ".ci_high"))})
    for name in names:
        scored = [c for c in children if c.status == "FINISHED" and _finite(c.metrics.get(name))]
        if not scored:
            continue
        top = best_of(scored, lambda c, name=name: c.metrics[name], maximize)
        metrics[name] = top.metrics[name]
        if name != objective:
            tags[f"best_run.{name}"] = f"{child_overrides(top, spec or {}) or top.name} ({top.id})"[:5000]
    return metrics, tags


#: the tag that marks a sweep's best point (on the child; a column of the runs list)
BEST_TAG = "sweep.best"


def best_point_metrics(best: RunView, objective: str, headline: Sequence[str]) -> dict[str, float]:
    """The parent's metrics: the best point's headline metrics and the objective on each of its
    segments, every value read off that one run (the parent's ``best_run_id`` and
    ``best_run_overrides`` tags name it), so a row of the runs list never mixes two points.
    Which point is best on each segment is the description's verdict, with its paired tests."""
    base = MetricKey.parse(objective).column
    wanted = set(headline) | {objective}
    out = {}
    for name, value in best.metrics.items():
        if name.endswith((".ci_low", ".ci_high")) or not _finite(value):
            continue
        try:
            key = MetricKey.parse(name)
        except ValueError:
            continue
        if name in wanted or key.column == base:
            out[name] = value
    return out


def child_overrides(child: RunView, spec: Mapping[str, str]) -> str:
    """The swept values of one child, ``fusion.rrf_k=5 fusion.keyword_weight=1.0`` (from its run
    name, which Hydra's overrides make; else from its params)."""
    tokens = [t for t in child.name.split() if t.split("=", 1)[0].lstrip("+~") in spec]
    if tokens:
        return " ".join(tokens)
    return " ".join(f"{k}={child.params[k]}" for k in spec if k in child.params)


def best_label(cmp, best: RunView | None) -> str | None:
    """The best point's name in the comparison table (``rrf_k=30``, ``retrieval=hybrid``), so the
    Best line, the verdict lines and the table name it alike; None without a table or a best point."""
    if cmp is None or best is None:
        return None
    return next((row.label for row in cmp.rows if row.run.id == best.id), None)


def note(name: str, objective: str, best: RunView | None, overrides: str, n_children: int, n_failed: int,
         table: str | None, extra: Sequence[str] = (), label: str | None = None, held: Sequence[str] = (),
         on_dev: bool = False) -> str:
    """The parent's run description: the verdict in two lines, then the comparison table.
    ``label``: the best point's name in the table (:func:`best_label`); else its overrides. ``held``:
    the best point's dev and test values, or the note that its value is optimistic (:mod:`.held_out`),
    right under the Best line; ``on_dev``: the best was chosen on the dev cases of a split."""
    lines = [f"### Sweep {name}", ""]
    if best is None:
        lines.append(f"No child run logged `{objective}`.")
    elif on_dev:
        lines.append(f"**Best `{objective}` on dev**: `{label or overrides or best.name}` (run `{best.id}`); "
                     f"{best.metrics[objective]:.4f} on all cases.")
    else:
        lines.append(f"**Best `{objective}` = {best.metrics[objective]:.4f}**: `{label or overrides or best.name}` "
                     f"(run `{best.id}`).")
    lines += ["", *held] if held else []
    lines.append("")
    lines.append(f"{n_children} runs" + (f", **{n_failed} failed**" if n_failed else "") + ".")
    lines += [f"{e}" for e in extra]
    head = "\n".join(lines) + "\n\n"
    if not table:
        return head[:NOTE_LIMIT]
    footer = "\nFull table with every run: artifact `comparison/table.md`.\n"
    if len(head) + len(table) <= NOTE_LIMIT:
        return head + table
    # too long for one tag: keep the header, the legend line and as many rows as fit
    rows = table.splitlines()
    out = head
    for line in rows:
        if len(out) + len(line) + 1 + len(footer) > NOTE_LIMIT:
            break
        out += line + "\n"
    return out + footer


#: points the dev/test table shows in the run description (the artifact comparison/dev_test.md has all)
DEV_TEST_ROWS = 20


def dev_test_table(rows: Sequence, objective: str, split_id: str, alpha: float = 0.05,
                   limit: int | None = DEV_TEST_ROWS) -> str:
    """The sweep's points on each side of a frozen split, best on dev first (the chosen point at the
    top): ``dev`` is where the point was chosen (with the dev verdict against the chosen point, max-T over
    all pairs of points), ``test`` the held-out cases no choice looked at, with a 95% interval. ``rows``:
    :class:`.split_decision.DevTestRow`. Markdown that GitHub and MLflow's viewer render."""
    if not rows:
        return ""
    title = metric_title(objective)
    ordered = sorted(rows, key=lambda r: (not r.chosen, -r.dev if r.dev == r.dev else math.inf))
    shown = ordered if limit is None else ordered[:limit]
    dev_n, test_n = max(r.dev_n for r in rows), max(r.test_n for r in rows)
    lines = [f"**{title} on each side of the split** `{split_id}`: **dev** ({dev_n} cases) is where the point "
             f"was chosen; **test** ({test_n} held-out cases) took no part in the choice.", "",
             f"| point | {title} dev (chosen on) | dev verdict vs the chosen point | {title} test (held out) [95%] |",
             "|---|---:|---|---:|"]
    for r in shown:
        if r.chosen:
            verdict = "**chosen** (best on dev)"
        elif r.p_dev is None:
            verdict = "no shared dev case"
        else:
            verdict = (f"worse\\* (max-T p={r.p_dev:.3f})" if r.p_dev < alpha
                       else f"tied (max-T p={r.p_dev:.3f})")
        dev = f"**{r.dev:.4f}**" if r.chosen else f"{r.dev:.4f}"
        lo, hi = r.test_interval
        test = f"{r.test:.4f} [{lo:.3f}, {hi:.3f}]" if r.test_n else "no test case"
        lines.append(f"| `{r.label.replace('|', '/')}` | {dev} | {verdict} | {test} |")
    if len(shown) < len(rows):
        lines.append(f"| … {len(rows) - len(shown)} more: artifact `comparison/dev_test.md` | | | |")
    lines += ["", f"_\\* the point is significantly worse than the chosen one on dev (single-step max-T over "
                  f"every pair of points, α {alpha:g}); the choice reads dev only, test is reported, never chosen on._"]
    return "\n".join(lines) + "\n"
