"""``rag-exp gate``: does today's run of the promoted config still match the champion?

    rag-exp gate --run-now --markdown-summary "$GITHUB_STEP_SUMMARY"    # the nightly job
    rag-exp gate --run RUN_ID
    rag-exp gate                                                         # the newest FINISHED run

Compares the run with the champion's recorded run (registry alias ``champion`` of
``rag-retriever-NAME``; else the committed ``experiments/promoted/NAME.record.json``) by the
paired randomization test over cases. When the golden set grew since the champion's run (its
version is a prefix of today's file), the test runs on the champion version's cases and labels
(today's run rescored from its stored ranked lists) and the cases added since are reported
beside it, the new production cases one by one. Exit 1 on a significant regression on the
primary metric or on the ``exact`` segment, or when the two cannot be compared (a run evaluated at
another level, ``eval.level``; a golden version that is not an ancestor; another corpus); 0 otherwise. The verdict is logged as tags on the
run (``gate=pass|fail``, ``gate_reason``, ``gate_decided_on``, ...). With a dev/test split in the golden set
(``rag-exp golden split``) each check is also printed on the dev and on the test cases, saying which side
each number is from; the verdict reads every case unless ``--decide-on test`` (the held-out cases only).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import UserError

NIGHTLY_RUN_NAME = "nightly"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "gate", help="check the current run of the promoted config against the champion (exit 1 on regression)",
        description=__doc__.split("\n\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="usage examples:\n" + __doc__.split("\n\n")[1])
    src = p.add_mutually_exclusive_group()
    src.add_argument("--run", metavar="RUN_ID", help="the run to check (default: the newest FINISHED run)")
    src.add_argument("--run-now", action="store_true",
                     help=f"run `python run.py experiment=promoted run_name={NIGHTLY_RUN_NAME}` first and check it")
    p.add_argument("--name", default="default", help="champion name (default: default)")
    p.add_argument("--metric", help="primary metric (default: the one the champion was promoted on)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default: 0.05)")
    p.add_argument("--decide-on", choices=("all", "test"), default="all",
                   help="the cases the verdict reads when the golden set has a dev/test split (rag-exp golden "
                   "split): all (default: every case, as without a split) or test (the held-out test cases only). "
                   "Either way, with a split, each check's values are printed on dev and on test")
    p.add_argument("--markdown-summary", metavar="FILE", help="append a Markdown report to FILE "
                   "(e.g. $GITHUB_STEP_SUMMARY)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Hydra override for --run-now, repeatable (refused without --run-now)")
    p.add_argument("--resamples", type=int, default=None,
                   help="random sign flips per test (default: $RAG_EXP_RESAMPLES, else 10000)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the randomization test (default: $RAG_EXP_SEED, else 13)")
    p.set_defaults(func=cmd_gate)


def experiment_override(root: Path, preset: str) -> str:
    """``experiment=X`` when the primary config's defaults list has an experiment slot (the
    packaged config.yaml has one; a project.yaml includes it), else ``+experiment=X``."""
    import yaml

    from ..conf_source import PACKAGED_CONF, PROJECT_CONFIG, config_source

    source = config_source(root)
    files = [source.primary / f"{source.name}.yaml"]
    if source.name == PROJECT_CONFIG:
        files.append(PACKAGED_CONF / "config.yaml")
    for path in files:
        try:
            defaults = (yaml.safe_load(path.read_text()) or {}).get("defaults") or []
        except (OSError, yaml.YAMLError):
            defaults = []
        for entry in defaults:
            keys = entry.keys() if isinstance(entry, dict) else [entry]
            if any(str(k).split()[-1] == "experiment" or str(k).startswith("experiment") for k in keys):
                return f"experiment={preset}"
    return f"+experiment={preset}"


def run_now(name: str, overrides: list[str]) -> str:
    """Run the promoted preset through Hydra in a subprocess; return the new run's id."""
    from ..paths import project_root
    from ..tracking.champion import preset_name
    from ..tracking.runs import search, tag_filter

    root = project_root()
    preset = preset_name(name)
    # the project's own record (where promote writes it), never a preset of the package
    if not (root / "conf" / "experiment" / f"{preset}.yaml").exists():
        raise UserError(f"{root / 'conf/experiment' / (preset + '.yaml')} does not exist",
                        hint="promote a run first: rag-exp promote (run the gate from the project folder, "
                        "or set RAG_EXP_HOME)")
    # what `rag-exp run` runs, in the project folder: an installed tool has no run.py
    cmd = [sys.executable, "-m", "rag_experiments.hydra_app", experiment_override(root, preset),
           f"run_name={NIGHTLY_RUN_NAME}", *overrides]
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    started = int(time.time() * 1000) - 1000
    proc = subprocess.run(cmd, cwd=root)
    if proc.returncode != 0:
        raise UserError(f"the {NIGHTLY_RUN_NAME} run failed (exit code {proc.returncode}); see its output above")
    found = [r for r in search(tag_filter("mlflow.runName", NIGHTLY_RUN_NAME), per_case=False, order="DESC",
                               max_results=20) if r.start_time >= started and r.status == "FINISHED"]
    if not found:
        raise UserError(f"the {NIGHTLY_RUN_NAME} run finished but no new FINISHED run named "
                        f"{NIGHTLY_RUN_NAME!r} is in the store", hint="is tracking.enabled false in the preset?")
    return found[0].id


def newest_run(exclude: set[str]) -> str:
    from ..tracking.promote import say_killed_skipped
    from ..tracking.runs import search

    finished = search("attributes.status = 'FINISHED'", per_case=False, order="DESC", max_results=200)
    newest = finished[0].start_time if finished else 0
    # runs whose process died after the newest finished one: the user may expect one of those
    say_killed_skipped([r for r in search("attributes.status = 'KILLED'", per_case=False, order="DESC",
                                          max_results=200) if r.start_time >= newest])
    for r in finished:
        if r.id not in exclude and r.tags.get("sweep") != "parent" and r.tags.get("comparison") != "true" \
                and r.tags.get("golden_sha256"):
            return r.id
    raise UserError("no FINISHED run to check", hint="give --run RUN_ID or --run-now")


def champion_objective(run) -> str:
    """The objective the champion's run was configured with (its ``objective`` param)."""
    from ..tracking.configured import configured_objective

    return configured_objective([run], what="--metric (the champion records no primary metric)")


def explorer_lines(cmp, c) -> list[str]:
    """The case explorer of the current run against the champion, logged to the current run
    (``explorer/cases_vs_<champion>.html``), and the line that links it; a failure is that line, never
    the gate's verdict."""
    from ..tracking.explorer import compare_lines

    try:
        return compare_lines(cmp, c)
    except Exception as exc:  # noqa: BLE001 - a page to look at; the verdict above stands
        return [f"no case explorer for the current run vs the champion: {exc}"]


def cmd_gate(args: argparse.Namespace) -> int:
    from ..terminal import console
    from ..tracking.compare import build_comparison
    from ..tracking.compare_render import decision_markdown, decision_table, print_comparison
    from ..tracking.configured import comparison_defaults
    from ..golden.split import TEST
    from ..tracking.champion import current_champion, model_name, record_path
    from ..tracking.held_out import golden_not_found, split_for
    from ..tracking.split_decision import side_ids, side_lines
    from ..tracking.promote import GUARD_SEGMENT, decide
    from ..tracking.runs import client, get_run
    from ..tracking.versioned import gap_markdown, gap_tags, print_gap

    if not 0 < args.alpha < 1:
        raise UserError(f"--alpha must be in (0, 1), got {args.alpha}")
    if args.overrides and not args.run_now:  # they configure the run --run-now starts; alone they did nothing
        raise UserError(f"--set {args.overrides[0]}: overrides apply to the run --run-now starts; without --run-now "
                        "nothing runs", hint="add --run-now, or drop --set to check an existing run")
    from ..stats.paired import test_settings

    args.resamples, args.seed = test_settings(args.resamples, args.seed)
    c = client()
    champion = current_champion(args.name, c, record_fallback=True)
    if champion is None:
        raise UserError(f"no champion: {model_name(args.name)} has no alias 'champion' in the registry and "
                        f"{record_path(args.name)} does not exist", hint="promote a run first: rag-exp promote")
    if args.run_now:
        run_id = run_now(args.name, args.overrides)
    elif args.run:
        run_id = args.run
    else:
        run_id = newest_run({champion.run.id})
    current = get_run(run_id, c=c)
    if current.status != "FINISHED":
        why = current.tags.get("rag_exp.killed_reason")
        raise UserError(f"run {current.id} ({current.label}) is {current.status}" + (f" ({why})" if why else "")
                        + ", not FINISHED: its numbers are incomplete", hint="give --run with a FINISHED run")
    if current.per_case is None:
        raise UserError(f"run {current.id} has no per-case table (per_case.json): the gate needs it",
                        hint="run with tracking.log_per_case=true")
    if current.id == champion.run.id:
        raise UserError(f"run {current.id} is the champion's own run: nothing to check",
                        hint="give --run with a newer run, or --run-now")
    metric = args.metric or champion.metric or champion_objective(champion.run)
    split = split_for([champion.run, current])
    if args.decide_on == "test" and split is None:
        raise UserError("--decide-on test: the golden set of these runs has no dev/test split "
                        f"({golden_not_found([champion.run, current]) or 'no split record'})",
                        hint="rag-exp golden split freezes one; or drop --decide-on")
    test_cases = side_ids([champion.run, current], split, TEST) if args.decide_on == "test" else None
    decision = decide(champion, current, metric, args.alpha, "no_loss", GUARD_SEGMENT, args.resamples, args.seed,
                      cases=test_cases)
    decided_on = decision.decided_on or "every case"
    sides = (side_lines(list(decision.compared or (champion.run, current)), [chk.key for chk in decision.checks],
                        split, ("champion", "current"), decided_on) if split is not None else [])
    passed = decision.ok
    verdict = "pass" if passed else "fail"
    reason = "; ".join(decision.reasons) if not passed else "no significant regression"
    where = "registry" if champion.source == "registry" else f"record {record_path(args.name).name}"

    out = console()
    for w in decision.warnings:
        out.print(f"[bold red]WARNING: {w}[/]")
    title = (f"gate: run {current.id[:12]} ({current.label}) vs champion {champion.run.id[:12]} "
             f"({where}{', version ' + champion.version if champion.version else ''})")
    if decision.checks:
        out.print(decision_table(decision, title + (f" on {decision.decided_on}" if decision.decided_on else ""),
                                 candidate_label="current"))
    for text in sides:  # each check on dev and on test (tracking.split_decision)
        out.print(text, soft_wrap=True, markup=False)
    out.print(f"[bold {'green' if passed else 'red'}]gate {verdict.upper()}[/]: {reason}")
    if decision.unlike is not None:
        out.print(f"  hint: {decision.unlike.hint}")
    columns = list(dict.fromkeys([metric, *comparison_defaults([champion.run, current])[0]]))
    if decision.gap is not None:
        print_gap(decision.gap, [current], columns, console=out)
    elif decision.unlike is None:  # how far unjudged hits could move both values and the Δ (issue 57)
        from ..tracking.coverage import bounds_lines

        for text in bounds_lines([champion.run, current], metric):
            out.print(text, soft_wrap=True, markup=False)
    cmp, explored = None, []
    pair = list(decision.compared or (champion.run, current))  # rebased onto the shared cases when versions differ
    if pair[0].per_case is not None and decision.unlike is None:  # unlike runs get no side-by-side table
        cmp = build_comparison(pair, comparison_defaults(pair)[0], primary=metric, alpha=args.alpha,
                               n_resamples=args.resamples, seed=args.seed,
                               labels=[f"champion {champion.run.id[:8]}", f"current {current.id[:8]}"])
        print_comparison(cmp, console=out)
        explored = explorer_lines(cmp, c)  # the cases behind the W/T/L, side by side (tracking.explorer)
        for text in explored:
            out.print(text, soft_wrap=True, markup=False)

    tags = {"gate": verdict, "gate_reason": reason[:5000], "gate_champion_run": champion.run.id,
            "gate_champion_source": champion.source, "gate_metric": metric, "gate_alpha": f"{args.alpha:g}",
            "gate_model": model_name(args.name), "gate_decided_on": decided_on}
    if champion.version:
        tags["gate_champion_version"] = champion.version
    if args.overrides:  # not the promoted config: history leaves such a run out of the nightly trend
        from ..redaction import redact_text

        tags["gate_overrides"] = " ".join(redact_text(o) for o in args.overrides)[:5000]
    tags.update(gap_tags(decision.gap, current))
    for chk in decision.checks:
        if chk.p is not None:
            tags[f"gate_p.{chk.key}"] = f"{chk.p:.6f}"
            tags[f"gate_delta.{chk.key}"] = f"{chk.delta:+.6f}"
            if chk.power is not None and chk.power.mde is not None and chk.p >= args.alpha:
                tags[f"gate_mde.{chk.key}"] = f"{chk.power.mde:.6f}"  # the smallest |Δ| these cases could detect
            if chk.noise:
                tags[f"gate_noise.{chk.key}"] = chk.noise
    for k, v in tags.items():
        c.set_tag(current.id, k, v)

    if args.markdown_summary:
        md = [f"## Retrieval gate: {'✅ PASS' if passed else '❌ FAIL'}", "",
              f"Run `{current.id}` ({current.label}) against the champion `{champion.run.id}` "
              f"({model_name(args.name)}, {where}{', version ' + champion.version if champion.version else ''}); "
              f"primary metric {metric}, alpha {args.alpha:g}, golden `{(current.golden or 'unknown')[:12]}`.", ""]
        md += [f"> [!WARNING]\n> {w}\n" for w in decision.warnings]
        if not passed:
            md += [f"**Why:** {reason}", ""]
        if decision.checks:
            md += [decision_markdown(decision, candidate_label="current")]
        md += [f"- {text}" for text in [*sides, *explored]] + ([""] if sides or explored else [])
        if decision.gap is not None:
            md += [gap_markdown(decision.gap, current if current.golden == decision.gap.newer.sha256 else None,
                                columns)]
        if cmp is not None:
            md += ["<details><summary>all metrics (champion = baseline)</summary>", "", cmp.to_markdown(),
                   "</details>", ""]
        path = Path(args.markdown_summary)
        with path.open("a", encoding="utf-8") as fh:
            fh.write("\n".join(md) + "\n")
    return 0 if passed else 1
