"""Promotion, the act: a candidate that passed the checks becomes the champion.

The decision (candidates, paired checks, the exact-segment guard, coverage) is
:mod:`rag_experiments.tracking.promote`, which the nightly gate reuses; this module acts on it:
the committed files (``experiments/promoted/<stem>.yaml``, named for the registered model
``rag-retriever-<stem>``: tracking.champion.file_stem; the ``promoted`` preset, the record and
the champion's ranked lists) and a new version of ``rag-retriever-<name>`` in the model registry
(the run's retriever logged as a pyfunc model: :mod:`rag_experiments.serving.model_logging`).
It sits above serving in the layer order (a promotion logs the served model); the decision below it
knows nothing of serving.

On success the run is tagged ``champion=true`` and two committed files are written, relative to
:func:`rag_experiments.paths.project_root`: ``experiments/promoted/<name>.yaml`` (the run's
resolved config under a comment header saying what it replaced and by how much) and
``conf/experiment/promoted.yaml`` (``promoted_<name>.yaml`` for other names: a ``@package
_global_`` preset with the same values, for ``python run.py experiment=promoted``), plus
``experiments/promoted/<name>.record.json`` (the champion's metrics and per-case scores, so the
nightly gate still has a baseline in CI when the registry lives in a throwaway store).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from .errors import UserError
from .evaluation.metric_key import MEASURES, MetricKey, Segment
from .evaluation.runfile import ARTIFACT
from .paths import project_root
from .tracking.champion import (
    ALIAS,
    PRESET_DROP,
    PROMOTED_DIR,
    current_champion,
    legacy_files,
    model_name,
    preset_config,
    preset_name,
    promoted_file,
    record_path,
)
from .tracking.champion_mark import hand_over
from .tracking.champion_newest import RANKED_SUFFIX, eval_params, ranked_path, refresh_ui, write_ranked
from .golden.split import DEV, TEST
from .tracking import held_out, split_decision
from .tracking.configured import headline_metrics
from .tracking.mlflow_run import flatten
from .tracking.promote import (
    GUARD_SEGMENT,
    Decision,
    candidate_runs,
    decide,
    dirty_tree_reason,
    pick_best,
    refuse_dirty_tree,
    same_level,
    selection_check,
)
from .tracking.runs import RunView, artifact_bytes, client, get_run, load_config_text

PRESET_DIR = Path("conf/experiment")  # the promoted preset, under the project root


# -- files ----------------------------------------------------------------------------------------
def _yaml(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False, allow_unicode=True)


def _metric_line(run: RunView, key: str) -> str | None:
    v = run.metric(key)
    if v is None:
        return None
    iv = run.interval(key)
    return f"{key} = {v:.4f}" + (f" [{iv[0]:.3f}, {iv[1]:.3f}]" if iv else "")


def replaced_summary(decision: Decision) -> list[str]:
    if decision.champion is None:
        return ["replaced: nothing (first champion)"]
    old = decision.champion.run
    lines = [f"replaced: run {old.id} ({old.label})"
             + (f", registry version {decision.champion.version}" if decision.champion.version else "")]
    for chk in decision.checks:
        if chk.champion is None or chk.candidate is None:
            continue
        delta = chk.candidate - chk.champion if chk.delta is None else chk.delta
        lines.append(f"  {chk.key}: {chk.champion:.4f} -> {chk.candidate:.4f} ({delta:+.4f}"
                     + (f", paired p={chk.p:.4f}, W/T/L {chk.wtl}" if chk.p is not None else "") + ")"
                     + (f"; the champion on the newest golden version: {chk.champion_newest:.4f}"
                        if chk.champion_newest is not None else ""))
    if not decision.checks:
        m = decision.metric
        a, b = old.metric(m), decision.candidate.metric(m)
        if a is not None and b is not None:
            lines.append(f"  {m}: {a:.4f} -> {b:.4f} ({b - a:+.4f}, not paired: {'; '.join(decision.warnings)})")
    return lines


def header(decision: Decision, name: str, version: str | None, forced: bool, when: str) -> list[str]:
    run = decision.candidate
    lines = [f"Promoted retriever config '{name}' (registered model {model_name(name)}"
             + (f" version {version}" if version else "") + f", alias {ALIAS})",
             f"run: {run.id} ({run.label}), experiment {run.experiment_id}",
             f"promoted: {when} on {decision.metric}" + (" -- FORCED past the gate" if forced else ""),
             f"golden_sha256: {run.golden}", f"corpus_digest: {run.corpus}",
             "metrics:"]

    guard = MetricKey.parse(decision.metric).on(Segment("kind", GUARD_SEGMENT)).mlflow_name
    keys = list(dict.fromkeys([decision.metric, *headline_metrics(run), guard]))
    lines += [f"  {line}" for k in keys if (line := _metric_line(run, k))]
    lines += replaced_summary(decision)
    if forced:
        lines += [f"gate refused: {r}" for r in decision.reasons + decision.warnings]
    return lines


def write_files(decision: Decision, name: str, config_text: str, version: str | None, forced: bool,
                when: str) -> list[Path]:
    config = yaml.safe_load(config_text) or {}
    if not isinstance(config, dict):
        raise UserError(f"run {decision.candidate.id}: config.yaml is not a mapping")
    root = project_root()
    head = header(decision, name, version, forced, when)
    comment = "".join(f"# {line}\n" for line in head)
    promoted = promoted_file(name, ".yaml", for_writing=True)  # named for the model (champion.file_stem)
    promoted.parent.mkdir(parents=True, exist_ok=True)
    promoted.write_text(comment + "# Generated by `rag-exp promote`; promote again instead of editing.\n\n"
                        + _yaml({k: v for k, v in config.items() if k != "hydra"}))
    preset = root / PRESET_DIR / f"{preset_name(name)}.yaml"
    preset.parent.mkdir(parents=True, exist_ok=True)
    preset.write_text(
        "# @package _global_\n"
        f"# The promoted retriever '{name}': "
        + ("the config of run" if dirty_tree_reason(decision.candidate) else "reproduces run")
        + f" {decision.candidate.id} (promoted {when})"
        + (" -- logged from a DIRTY git tree, promoted with --force: the code may differ"
           if dirty_tree_reason(decision.candidate) else "") + ".\n"
        f"#   rag-exp run experiment={preset_name(name)}   (or python run.py experiment={preset_name(name)})\n"
        f"# Generated by `rag-exp promote` from {PROMOTED_DIR / promoted.name}; do not edit by hand.\n"
        f"# Dropped (environment, not retriever): {', '.join(PRESET_DROP)}.\n"
        + _yaml(preset_config(config)))
    old_names = legacy_files(name, (".yaml", ".record.json", RANKED_SUFFIX))  # before files were named for the model
    record = record_path(name, for_writing=True)
    pc = decision.candidate.per_case
    keep = [c for c in (pc.columns if pc is not None else [])
            if c in ("case_id", "kind", "doc_type", "n_relevant") or MetricKey.parse(c).metric in MEASURES]
    record.write_text(json.dumps({
        "name": name, "model": model_name(name), "version": version, "run_id": decision.candidate.id,
        "run_name": decision.candidate.name, "experiment_id": decision.candidate.experiment_id,
        "start_time": decision.candidate.start_time, "promoted": when, "forced": forced,
        "primary_metric": decision.metric,
        "tags": {k: v for k, v in decision.candidate.tags.items() if not k.startswith("mlflow.")},
        "metrics": decision.candidate.metrics,
        "per_case": json.loads(pc[keep].to_json(orient="split", index=False)) if pc is not None else None,
    }, indent=1, sort_keys=True) + "\n")
    ranked = keep_ranked_lists(decision.candidate, name, config)
    for path in old_names:  # replaced by the files just written under the model's name
        path.unlink(missing_ok=True)
    return [promoted, preset, record] + ([ranked] if ranked is not None else [])


def keep_ranked_lists(run: RunView, name: str, config: dict, c=None) -> Path | None:
    """The run's ranked lists (``run.trec``, to the depth its metrics read) committed beside its
    record (:func:`.champion_newest.write_ranked`), so the champion can be rescored on a newer golden
    version in a store that never saw the run; None (and an old file removed) when it logged none."""
    data = artifact_bytes(run.id, ARTIFACT, c or client(), run.artifact_uri)
    if data is None:
        ranked_path(name, for_writing=True).unlink(missing_ok=True)  # the old champion's lists would be read as this one's
        return None
    flat = {k: str(v) for k, v in flatten({"eval": config.get("eval") or {}}).items()}
    return write_ranked(name, data.decode("utf-8"), eval_params(flat).depth_needed)


# -- registry -------------------------------------------------------------------------------------
def register(run: RunView, name: str, metric: str, forced: bool, c=None, config_text: str | None = None) -> str:
    """A new version of ``rag-retriever-<name>``: the run's retriever logged as an MLflow pyfunc
    model (see :mod:`rag_experiments.serving.model_logging`); alias champion."""
    from .serving.model_logging import register_champion

    c = c or client()
    return register_champion(run, name, metric, forced, config_text or load_config_text(run.id, c), c)


@dataclass(frozen=True)
class Promotion:
    decision: Decision
    promoted: bool
    forced: bool
    version: str | None = None
    files: list[Path] = field(default_factory=list)
    already_champion: bool = False
    held_out: list[str] = field(default_factory=list)  # the best point on dev and test, or why its value is optimistic


def promote(metric: str, sweep: str | None = None, name: str = "default", force: bool = False,
            alpha: float = 0.05, experiment: str | None = None, dry_run: bool = False, n_resamples: int = 10000,
            seed: int = 13, c=None, decide_on: str = "all") -> Promotion:
    """``decide_on``: with a dev/test split and ``sweep``, ``all`` (the max-T test over every point on every
    case: valid whatever was chosen, and the more powerful) or ``test`` (one paired test on the held-out
    test cases only); see docs/how-to/sweeps.md for the measured price of each."""
    from .serving.model_logging import champion_lock

    if decide_on not in ("all", "test"):
        raise UserError(f"--decide-on must be all or test, got {decide_on!r}")
    with champion_lock(name):  # the champion read, the decision and the registration are one step
        return _promote(metric, sweep, name, force, alpha, experiment, dry_run, n_resamples, seed, c, decide_on)


def _promote(metric: str, sweep: str | None, name: str, force: bool, alpha: float, experiment: str | None,
             dry_run: bool, n_resamples: int, seed: int, c, decide_on: str = "all") -> Promotion:
    c = c or client()
    model_name(name)  # validate early
    runs = candidate_runs(metric, sweep, experiment, c)
    if not dry_run:  # the committed record is the champion until a promotion beats it
        from .serving.model_logging import sync_with_record

        sync_with_record(name, c)
        refresh_champion_row(name, c)
    champion = current_champion(name, c)
    pool = same_level(runs, champion)
    # a frozen dev/test split: a sweep's best is chosen on dev and reported on test (tracking.held_out)
    split = held_out.split_for(pool) if sweep and len(pool) > 1 else None
    # the best is chosen among the pool, a sweep's points or every run of the store: the test against the
    # champion counts every one tried (tracking.promote.Selection). Without --sweep it did not, so a plain
    # promote took the best of 13 runs with one uncorrected test and would promote the point promote
    # --sweep had just refused (a new user on nginx's documentation, 2026-12-07)
    choosing = champion is not None and len(pool) > 1
    loaded = [get_run(r.id, c=c) for r in pool] if split is not None or choosing else []
    best = (held_out.best_on_dev(loaded, metric, split) if split is not None else None) or pick_best(pool, metric)
    best = next((r for r in loaded if r.id == best.id), None) or get_run(best.id, c=c)  # with its per-case table
    # a sweep's best was chosen among its points: the test counts every one (tracking.promote.Selection)
    family = (loaded if sweep else [r for r in loaded if r.id != champion.run.id]) if choosing else []
    tried = "sweep points" if sweep else (f"runs of experiment {experiment!r}" if experiment else "runs in the store")
    held = held_out.lines(best, len(pool), metric, split, family=loaded) if sweep and len(pool) > 1 else []
    if decide_on == "test" and sweep and split is None:
        raise UserError("--decide-on test: the golden set of this sweep has no dev/test split "
                        "(or its golden file was not found: the line above says where it looked)",
                        hint="rag-exp golden split freezes one; or drop --decide-on")
    if split is not None and champion is not None and decide_on == "test":  # the test cases alone decide
        decision = decide_on_test(champion, best, loaded, metric, split, alpha, n_resamples, seed)
        held = [split_decision.promote_line(best, decision.compared or (champion.run, best), metric, split,
                                            decision.checks[0].p if decision.checks else None)]
    else:
        decision = decide(champion, best, metric, alpha, "beat", GUARD_SEGMENT, n_resamples, seed, family,
                          tried=tried)
    decision = refuse_dirty_tree(decision)
    if champion is not None and champion.run.id == best.id:
        return Promotion(decision, False, False, champion.version, already_champion=True, held_out=held)
    if dry_run or not (decision.ok or force):
        return Promotion(decision, False, False, held_out=held)
    forced = not decision.ok
    config_text = load_config_text(best.id, c)
    version = register(best, name, metric, forced, c, config_text)
    when = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    previous = champion.run.id if champion is not None and champion.source == "registry" else None
    hand_over(c, model_name(name), best.id, previous)
    c.set_tag(best.id, "promoted_at", when)
    if forced:
        c.set_tag(best.id, "promoted_forced", "true")
    if dirty_tree_reason(best):
        c.set_tag(best.id, "promoted_dirty_tree", "true")  # only reachable with --force
    files = write_files(decision, name, config_text, version, forced, when)
    refresh_champion_row(name, c)
    return Promotion(decision, True, forced, version, files, held_out=held)


def decide_on_test(champion, best: RunView, points: list[RunView], metric: str, split, alpha: float,
                   n_resamples: int, seed: int) -> Decision:
    """``promote --sweep`` with a dev/test split: ``best`` was chosen on the dev cases, so the paired
    checks against the champion run on the held-out test cases only (one uncorrected test is honest
    there: nothing was chosen on them). The max-T test over every point (:class:`.tracking.promote.Selection`)
    is computed on the dev cases, where the choice was made, and shown, not decided on."""
    test = split_decision.side_ids([best, champion.run], split, TEST)
    decision = decide(champion, best, metric, alpha, "beat", GUARD_SEGMENT, n_resamples, seed, cases=test)
    dev = split_decision.side_ids(points, split, DEV)
    chosen = selection_check(split_decision.on_cases(champion.run, dev),
                             [split_decision.on_cases(r, dev) for r in points], best.id, metric, n_resamples, seed)
    if chosen is None:
        return decision
    line = (f"on dev, where it was chosen: {chosen.line(MetricKey.parse(metric).title, alpha)}; shown, not decided "
            f"on: the decision reads {decision.decided_on}")
    return replace(decision, selection=chosen, notes=[line, *decision.notes])


def refresh_champion_row(name: str, c=None) -> None:
    """The champion's row in the runs list says its value on the newest golden version
    (:func:`rag_experiments.tracking.champion_newest.refresh_ui`); a failure there never fails a promotion."""
    try:
        refresh_ui(name, c)
    except Exception as exc:  # noqa: BLE001 - a label in the UI; promote's own output says the same
        print(f"warning: the champion's row was not tagged with its value on the newest golden version: {exc}",
              file=sys.stderr)
