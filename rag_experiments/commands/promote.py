"""``rag-exp promote``: make the best run the champion, only if it beats the current one.

    rag-exp promote --metric recall_at_5                 # best FINISHED run on the newest golden set
    rag-exp promote --metric recall_at_5 --sweep PARENT_ID --dry-run
    rag-exp promote --metric mrr_at_10 --name faq --force   # past the gate (tagged promoted_forced)
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import UserError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "promote", help="promote the best run to champion (model registry alias), if it beats the champion",
        description="Among FINISHED runs (of --sweep, else of the store or --experiment) on the golden set "
        "of the newest such run, take the best on --metric and compare it with the current champion "
        "(registered model rag-retriever-NAME, alias champion) by a paired randomization test over "
        "cases: it must be significantly better on --metric and not significantly worse on the "
        "'exact' segment. The best was chosen among the sweep's points (--sweep) or the store's runs, so it must "
        "also beat the champion once every one is counted (max-T over all their paired differences, "
        "Westfall-Young; refused otherwise; without --sweep the champion's own run is not counted); ties go to "
        "the earliest point. With a dev/test split in the golden set (rag-exp golden "
        "split) the point is chosen on the dev cases and its held-out test value is printed beside its dev value; "
        "the decision is still the max-T test over every point on every case (valid whatever was chosen, and "
        "the more powerful), unless --decide-on test: then the paired tests against the champion run on the "
        "held-out test cases only (nothing was chosen there, so one uncorrected test is honest; the max-T test "
        "is shown on dev, not decided on). "
        "Only runs evaluated at the champion's level (eval.level: chunk or document) are "
        "candidates; when there is none, the decision refuses, naming both runs and both levels. No champion "
        "yet: promote. Champion on an earlier version of the same golden set "
        "(a prefix of its chain): compare on that version's cases and labels. Champion on another golden "
        "set (not on one chain) or corpus: refuse. "
        "A run logged from a dirty git tree (tag git_dirty=true) is refused too: its commit and config do "
        "not reproduce it. --force promotes anyway (tagged promoted_forced=true, and promoted_dirty_tree=true "
        "for a dirty-tree run). The committed experiments/promoted/NAME.record.json "
        "is the champion until a promotion beats it (the registry is re-populated from it). On success: the run's "
        "retriever logged and registered as an MLflow pyfunc model, alias champion, run tag "
        "champion=true, experiments/promoted/NAME.yaml and conf/experiment/promoted.yaml "
        "(promoted_NAME.yaml for other names). Exit 1 when refused.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--metric", default=None, help="primary metric (default: the objective the runs were "
                   "configured with, e.g. recall_at_5; ndcg_at_10 for experiment=beir)")
    p.add_argument("--sweep", metavar="PARENT_ID", help="choose among this sweep's child runs")
    p.add_argument("--experiment", metavar="NAME", help="choose among this MLflow experiment's runs "
                   "(default: every experiment in the store)")
    p.add_argument("--name", default="default", help="champion name: registered model rag-retriever-NAME "
                   "(default: default; a project made by rag-exp init registers its default champion under "
                   "the project's name, rag-retriever-PROJECT)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default: 0.05)")
    p.add_argument("--decide-on", choices=("all", "test"), default="all",
                   help="with --sweep and a dev/test split: decide by the max-T test over every point on all "
                   "cases (all, default) or by one paired test on the held-out test cases only (test: an "
                   "untouched test, at a third of the power; docs/how-to/sweeps.md has both measured)")
    p.add_argument("--force", action="store_true", help="promote even when the gate refuses")
    p.add_argument("--dry-run", action="store_true", help="show the decision, change nothing")
    p.add_argument("--resamples", type=int, default=None,
                   help="random sign flips per test (default: $RAG_EXP_RESAMPLES, else 10000)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the randomization test (default: $RAG_EXP_SEED, else 13)")
    p.set_defaults(func=cmd_promote)


def cmd_promote(args: argparse.Namespace) -> int:
    from rich.panel import Panel

    from ..terminal import console
    from ..tracking.compare_render import decision_table
    from ..promotion import promote, replaced_summary
    from ..tracking.champion import model_name, preset_name

    if not 0 < args.alpha < 1:
        raise UserError(f"--alpha must be in (0, 1), got {args.alpha}")
    from ..stats.paired import test_settings

    args.resamples, args.seed = test_settings(args.resamples, args.seed)
    out = console()
    if not args.metric:
        from ..tracking.configured import store_objective

        args.metric = store_objective(args.sweep, args.experiment)
    if args.decide_on == "test" and not args.sweep:
        raise UserError("--decide-on test needs --sweep PARENT_ID (the held-out cases are where a sweep's "
                        "choice was not made; one run against the champion: rag-exp gate --decide-on test)")
    result = promote(args.metric, args.sweep, args.name, args.force, args.alpha, args.experiment,
                     args.dry_run, args.resamples, args.seed, decide_on=args.decide_on)
    d = result.decision
    cand = d.candidate
    value = cand.metrics[args.metric]
    line = f"best on {args.metric}: run {cand.id} ({cand.label}) = {value:.4f}"
    primary = next((c for c in d.checks if c.key == args.metric and c.candidate is not None), None)
    if d.decided_on:  # a dev/test split: the table below reads the held-out cases (tracking.split_decision)
        line += f" on all its cases; the decision compares it with the champion on {d.decided_on} only"
    elif d.champion is not None and primary is not None and f"{primary.candidate:.4f}" != f"{value:.4f}":
        # the table pairs the two runs on the cases they share (another golden version): say which
        # value is which here, before the table shows the other one (issue 48, item 1)
        line += (f" on all its cases (golden {str(cand.golden or '?')[:12]}); {primary.candidate:.4f} on the "
                 f"{primary.n} cases it shares with the champion's golden version "
                 f"{str(d.champion.run.golden or '?')[:12]}, the value the table below compares")
    out.print(line, soft_wrap=True)
    for held in result.held_out:  # chosen on dev and reported on test, or why the value is optimistic
        out.print(held, soft_wrap=True, markup=False)
    if d.champion is not None and d.champion.source == "record":
        from ..tracking.champion import record_path

        if args.dry_run:  # nothing was registered: say what the record is, never a registry version
            out.print(f"champion of record: {record_path(args.name)} (run {d.champion.run.id}); "
                      "this dry run registers nothing", soft_wrap=True)
        else:
            out.print(f"champion of record: {record_path(args.name)} (run {d.champion.run.id})"
                      + (f", registered in this store as {model_name(args.name)} version {d.champion.version}"
                         if d.champion.version else ""), soft_wrap=True)
    for w in d.warnings:
        out.print(Panel(w, title="WARNING", style="bold red"))
    if d.champion is not None and d.checks:
        out.print(decision_table(d, f"candidate vs champion {d.champion.run.id[:12]} ({cut_label(d.champion.run.label)})"
                                 + (f" on {d.decided_on}" if d.decided_on else "")))
    if d.gap is not None:
        from ..tracking.versioned import print_gap

        print_gap(d.gap, [cand], [args.metric], console=out)
    elif d.champion is not None:  # how far unjudged hits could move both values and the Δ (issue 57)
        from ..tracking.coverage import bounds_lines

        for text in bounds_lines([d.champion.run, cand], args.metric):
            out.print(text, soft_wrap=True, markup=False)
    explored = explorer_line(d, args.dry_run)
    if explored and not result.already_champion:
        out.print(explored, soft_wrap=True, markup=False)
    if result.already_champion:
        out.print(f"run {cand.id} is already the champion of {model_name(args.name)} "
                  f"(version {result.version}); nothing to do")
        return 0
    if not result.promoted:
        verdict = "would promote" if d.ok else "REFUSED"
        out.print(f"[bold {'green' if d.ok else 'red'}]{verdict}[/]" + (" (dry run)" if args.dry_run else ""))
        for r in d.reasons:
            out.print(f"  - {r}")
        if d.unlike is not None:
            out.print(f"  hint: {d.unlike.hint}")
        if not d.ok and not args.dry_run:
            out.print("  (--force promotes anyway; the run is then tagged promoted_forced=true)")
        return 0 if d.ok else 1
    if result.forced:
        out.print("[bold yellow]FORCED: promoted although the gate refused:[/]")
        for r in d.reasons:
            out.print(f"  - {r}")
    out.print(f"[bold green]promoted[/] run {cand.id} ({cand.label}) as {model_name(args.name)} version "
              f"{result.version}, alias champion")
    for line in replaced_summary(d):
        out.print(line)
    from ..tracking.runs import client
    from ..tracking.ui_links import line as ui_line, model_route

    out.print(ui_line("the champion in the registry", model_route(model_name(args.name), result.version),
                      client().tracking_uri), soft_wrap=True)
    for f in result.files:
        out.print(f"wrote {f}")
    out.print(f"reproduce: rag-exp run experiment={preset_name(args.name)}   (in the repository: python run.py ...)")
    return 0


def explorer_line(d, dry_run: bool) -> str | None:
    """The case explorer of the candidate against the champion (the page compare logs,
    :mod:`rag_experiments.tracking.explorer`), logged to the candidate run as
    ``explorer/cases_vs_<champion>.html``, and the one line that links it; a dry run logs nothing and
    names the command that writes it. None without a champion or a paired table."""
    if d.champion is None or d.unlike is not None or not d.checks:
        return None
    champ, cand = d.compared or (d.champion.run, d.candidate)
    if dry_run:
        return f"the cases side by side: rag-exp explore {champ.id} {cand.id} --out FILE (this dry run logs nothing)"
    from ..tracking.explorer import log_pairs
    from ..tracking.runs import client
    from ..tracking.ui_links import line, run_route

    c = client()
    try:
        (_, path, why), = log_pairs([champ, cand], d.metric, c, [f"champion {champ.id[:8]}", f"candidate {cand.id[:8]}"])
    except Exception as exc:  # noqa: BLE001 - a page to look at; the decision above stands
        path, why = None, str(exc)
    if path is None:
        return f"no case explorer for the candidate vs the champion: {why}"
    # the page shows every shared case; with a split the checks' W/T/L counts the test cases only
    wtl = next((f"behind W/T/L {chk.wtl} " for chk in d.checks if chk.key == d.metric and chk.wtl is not None
                and not d.decided_on), "")
    return line(f"the cases {wtl}of the candidate vs the champion (lost first)",
                run_route(cand.experiment_id, cand.id, path), c.tracking_uri)


def cut_label(label: str, limit: int = 60) -> str:
    """A run label cut at a space, never inside an override (``fusion.keyword_weight=1.`` was)."""
    if len(label) <= limit:
        return label
    head = label[:limit].rsplit(" ", 1)[0] if " " in label[:limit] else label.split(" ", 1)[0]
    return head + " …"
