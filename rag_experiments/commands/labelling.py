"""``rag-exp golden label``: its arguments and what they run. The LLM judge on the configured
retriever's top k or a pool of logged runs (:mod:`rag_experiments.golden.label`), a person by hand in
the terminal or through a blind CSV (:mod:`rag_experiments.golden.hand_label`), and ``--decide``
(:mod:`.decide_labels`). Without ``-k`` the labelling depth is the cut-off of the objective the labels
serve (one labelling depth: ``--decide`` labels its metric's top k, compare checks judged@k at its
primary metric's depth)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError, UserError
from .llm_job import (
    check_llm_args,
    configured_corpus,
    console as rich_console,
    corpus_language,
    counter_line,
    finish_llm_job,
    open_session,
    resolve_llm,
    run_llm_job,
    say,
)
from .sheet_args import same_sheet_args

JUDGE_BY_HAND = ("human", "agent")  # the judge.kind of a --by-hand / --import verdict
DEFAULT_DEPTH = 10  # -k when the objective has no cut-off (bpref): the headline MRR@10 and nDCG@10 read the top 10


def add_parser(sub: Any, golden_arg: Callable, llm_args: Callable, overrides_arg: Callable) -> None:
    """The ``label`` subcommand (``golden_arg`` etc.: the ``golden`` command's shared argument groups)."""
    sp = sub.add_parser(
        "label", help="judge the top-k retrieved passages of every case (LLM, or a person with --by-hand; pooling)",
        description="For each case, retrieve the top k, skip hits that evaluation already credits "
        "(overlap >= 50% of an evidence span or of the hit) or that overlap a span already judged for "
        "it by the same rule, and ask the judge "
        "YES / PART / NO. Appends `judgement` records. Resumable via <golden stem>.label.log.jsonl. "
        "With --by-hand a person judges the same pairs, no LLM and no key: in the terminal (question, "
        "passage with its document, offsets and context; y / p / n / s(kip) / q(uit) and Enter; stdin may be "
        "a pipe; each verdict is appended at once, so quitting or a kill loses nothing and a rerun offers only "
        "what is left), or through a blind CSV (--export, then --import). The labels are `judge.kind: human` "
        "with --labeller's name (`agent` with --judge-kind agent: an AI agent labelling, a machine judge); "
        "a passage repeated in another document (the same text) is offered, or sent to the judge, once and "
        "the verdict written for both (applied_from), and a passage whose text already has a verdict for the "
        "question (a person's, the judge's or an agent's) gets that verdict, with the original judge, and is "
        "never offered or sent again. With --sample N (or --budget USD) only a random sample "
        "is judged (whole cases by default, or pairs within rank strata), the design recorded with each "
        "judgement; runs scored on it log recall@k estimates with intervals (ipw_recall_at_k).")
    golden_arg(sp)
    sp.add_argument("-k", type=int, default=None, help="hits per case to judge (default: the labelling depth, the "
                    "cut-off of the objective the labels serve: the pooled runs' with --pool/--sweep, else the "
                    "configured one; recall_at_5 -> 5, ndcg_at_10 -> 10); with --pool/--sweep: each run's top k "
                    "enters the pool")
    pool = sp.add_mutually_exclusive_group()
    pool.add_argument("--pool", nargs="+", metavar="RUN_ID", default=None,
                      help="judge the pool of these runs (the union of each one's top k from its stored ranked "
                      "lists, deduplicated by span) instead of retrieving")
    pool.add_argument("--sweep", metavar="PARENT_ID", default=None, help="pool every finished point of this sweep")
    sp.add_argument("--per-run-depth", nargs="+", metavar="RUN_ID=N", default=None,
                    help="with --pool/--sweep: pool these runs to their own depth N instead of -k (TREC's "
                    "depth per run when the budget is tight: a priority run deeper, a cheap one shallower)")
    sp.add_argument("--dry-run", action="store_true", help="show the pairs to judge and the estimate, call nothing")
    sampled = sp.add_argument_group(
        "sampled labelling (judge a random sample of the pairs; runs scored on it get estimates with intervals)")
    size = sampled.add_mutually_exclusive_group()
    size.add_argument("--sample", type=int, metavar="N", default=None,
                      help="judge about N of the pairs, drawn at random (--sample-unit); each judgement records "
                      "the design; rerunning with the same seed judges nothing twice, a larger N extends the sample")
    size.add_argument("--budget", type=float, metavar="USD", default=None,
                      help="judge as many sampled pairs as the cost estimate allows for USD (LLM judge only)")
    sampled.add_argument("--sample-unit", choices=("case", "pair"), default="case",
                         help="case (default): draw whole cases, every pair of each drawn case judged (exactly "
                         "unbiased, intervals that hold); pair: draw pairs within rank strata (--strata; fewer "
                         "labels per case, but recall's intervals undercover when cases have few relevant "
                         "passages: measured by tools/sampled_labels.py)")
    sampled.add_argument("--seed", type=int, default=13, help="the sample's seed (default: 13)")
    sampled.add_argument("--strata", default=None, metavar="RANKS",
                         help="with --sample-unit pair: rank strata, contiguous from 1 (default: 1-5,6-10,11-20; the "
                         "last takes every rank past it); a pooled pair's rank is its best in the pool")
    hand = sp.add_argument_group("by hand (a person judges; no LLM, no API key)")
    hand.add_argument("--by-hand", action="store_true",
                      help="label the pairs yourself in the terminal: y=YES p=PART n=NO s=skip q=quit, then Enter")
    hand.add_argument("--labeller", metavar="NAME", default=None,
                      help="who labels, recorded in each judgement (default: the OS user)")
    hand.add_argument("--judge-kind", choices=JUDGE_BY_HAND, default="human",
                      help="what --labeller is, recorded as judge.kind: human (a person, the default) or agent (an "
                      "AI agent or a script: a machine judge, unvalidated until a person's spot-check agrees)")
    csv_io = hand.add_mutually_exclusive_group()
    csv_io.add_argument("--export", type=Path, metavar="FILE.csv", default=None,
                        help="write the pairs to label to a new CSV (pair_id, case, question, document, offsets, "
                        "context, passage; no system, rank or score) with an empty verdict column, for a "
                        "spreadsheet or a colleague")
    csv_io.add_argument("--import", dest="import_csv", type=Path, metavar="FILE.csv", default=None,
                        help="record the filled verdict column of an exported CSV (YES / PART / NO or y / p / n; "
                        "empty = skip); every row is checked first; importing twice labels nothing twice; a row whose "
                        "verdict differs from the one recorded for its passage is listed, not recorded (see --supersede)")
    hand.add_argument("--supersede", metavar="REASON", default=None,
                      help="with --import: record the rows whose verdict differs from the one recorded as corrections, "
                      "judgements that supersede the recorded ones (and the copies given that verdict), with this "
                      "reason (the golden set is append-only: the old verdicts stay in the file, superseded)")
    dec = sp.add_argument_group("deciding between two runs (rag_experiments.golden.decide)")
    dec.add_argument("--decide", nargs="*", metavar="A B", default=None,
                     help="label only the passages unjudged in either run's cut-off (two run ids or names; none "
                     "with --sweep PARENT: the sweep's best point against the points max-T cannot tell from it), "
                     "the one expected to settle the decision most first (what its verdict can move the paired Δ, "
                     "for MRR its expected change with the passages above and below it relevant at their estimated rates, "
                     "times how unsure the verdict still is; and, for one passage per rank band and side drawn at "
                     "random, what its label teaches about the rest: the why column says so; with --stop certain, "
                     "by what it can move alone), and stop when the decision is settled (--stop); prints labels done, left, Δ with its bounds and the decision at each step; "
                     "with --by-hand, --export (in that order, with a why column) or the LLM")
    dec.add_argument("--stop", choices=("confident", "certain"), default="confident",
                     help="with --decide: confident (default): settled when the same decision comes out in at least "
                     "--stop-level of 2,000 seeded draws of the unjudged verdicts (a first look with 400 while far "
                     "below the level), each relevant at the rate the "
                     "judged passages of its rank band and side show, moved by how many of the question's terms it "
                     "holds and scaled by its question's factor (the pool's last 10%% is labelled, not modelled); "
                     "certain: "
                     "only when every verdict the unjudged passages could get gives the same decision (needs far "
                     "more labels)")
    dec.add_argument("--stop-level", type=float, metavar="P", default=0.99,
                     help="with --stop confident: the probability of the same decision that settles it (0.5 to "
                     "below 1; default 0.99: at 0.95, 2 of 10 random label orders of a pair at p=0.058 were "
                     "declared settled the wrong way)")
    dec.add_argument("--decide-metric", metavar="METRIC", default=None,
                     help="the metric decided on (recall_at_K, mrr_at_K, ndcg_at_K, hit_at_K; default: run A's "
                     "objective, else recall_at_5); its K is the labelling depth")
    dec.add_argument("--max-labels", type=int, metavar="N", default=None,
                     help="with --decide: stop after N labels (the budget, 1 or more), settled or not")
    llm_args(sp)
    overrides_arg(sp)
    sp.set_defaults(func=cmd_label)
    sp.set_defaults(func=cmd_label)


def _pool_hits(args: argparse.Namespace, docs=None):
    """(retrieve(query) -> the pool's hits, the pool's definition, the runs' corpus.language) of
    --pool / --sweep (rag_experiments.tracking.pool): no retrieval, no database."""
    from ..corpus.loader import load_corpus
    from ..golden.resolve import load_golden
    from ..tracking.pool import parse_depths, pool_language, pool_runs, pooled_hits

    runs = pool_runs(args.pool or (), args.sweep)
    if args.k is None:
        from ..tracking.configured import objective

        _default_depth(args, objective(runs[0]), "the pooled runs' objective")
    depths = parse_depths(args.per_run_depth or (), runs)
    docs = docs if docs is not None else load_corpus(configured_corpus(args.overrides))
    hits, definition = pooled_hits(runs, args.k, docs, depths)
    by_query = {c.query: hits.get(c.case_id, []) for c in load_golden(args.golden).cases}
    if args.sweep:
        definition["sweep"] = args.sweep
    return (lambda q: by_query.get(q, [])), definition, pool_language(runs)


def _default_depth(args: argparse.Namespace, objective: str | None, whose: str) -> None:
    """Without -k: label to the cut-off of the objective the labels serve (one labelling depth, as
    --decide labels its metric's top k and compare checks judged@k at its primary metric's)."""
    from ..evaluation.bounds import metric_parts
    from ..evaluation.metric_key import MetricKey

    try:
        args.k = metric_parts(MetricKey.parse(objective or "").column)[1]
    except ValueError:
        args.k, objective = DEFAULT_DEPTH, f"{objective} (no cut-off)" if objective else "no objective"
    say(rich_console(), f"labelling depth {args.k}: the cut-off of {objective}, {whose} (-k to change it)")


def _session_depth(args: argparse.Namespace, session) -> None:
    if args.k is None:
        _default_depth(args, session.settings.objective, "the configured objective")


def _pool_plan(args: argparse.Namespace, price, spec=None):
    """The labelling plan of a pool of runs (rag_experiments.tracking.pool): no retrieval."""
    from ..golden.label import plan_labelling

    retrieve, definition, language = _pool_hits(args)  # the judge is told the runs' corpus.language
    return plan_labelling(args.golden, retrieve, k=10**9, model=args.model, batch=args.batch,
                          retry_failed=args.retry_malformed, price=price, pool=definition, provider=args.provider,
                          sample=spec, source=definition, language=language)


def _label_by_hand(args: argparse.Namespace) -> int:
    """`golden label --by-hand` / `--export` / `--import` (rag_experiments.golden.hand_label)."""
    from ..corpus.loader import load_corpus
    from ..golden import hand_label as hl
    from ..golden.sheet_import import import_csv
    from ..golden.golden_file import GoldenFile

    console = rich_console()
    labeller = (args.labeller or "").strip() or hl.default_labeller()
    docs = load_corpus(configured_corpus(args.overrides))
    if args.import_csv is not None:
        report = import_csv(args.golden, args.import_csv, docs, labeller=labeller, judge_kind=args.judge_kind,
                            supersede=args.supersede)
        say(console, report.summary(args.import_csv) + f"; labeller {labeller}")
        for line in report.disagreement_lines():
            say(console, "  " + line)
        fixable = [d for d in report.disagree if not d.own_evidence]  # --supersede records these
        if fixable:
            again = same_sheet_args(args)
            say(console, f"{len(fixable)} verdict(s) differ from the recorded ones and were not recorded (the recorded "
                "verdict stays until a judgement supersedes it); to record them as corrections: rag-exp golden label "
                f"{' '.join(again)} --import {shlex.quote(str(args.import_csv))} --supersede 'REASON'"
                + (" (a --set with a secret is masked as ***: put the value back)" if again.masked else ""),
                soft_wrap=True)
        return 0
    spec = _sample_spec(args)
    if args.pool or args.sweep:
        retrieve, definition, _ = _pool_hits(args, docs)
        plan = hl.plan_hand_labelling(args.golden, retrieve, k=10**9, pool=definition, sample=spec,
                                      source=definition)
    else:
        session = open_session(args.overrides)
        _session_depth(args, session)
        try:  # an external passage that could not be placed in the corpus has no span to judge: skipped
            plan = hl.plan_hand_labelling(args.golden, lambda q: [h for h in session.search(q, args.k)
                                                                  if h["doc_hash"]], k=args.k, sample=spec,
                                          source=_sample_source(args))
        finally:
            session.close()
    if plan.sample is not None:
        say(console, plan.sample.describe(), soft_wrap=True)
    say(console, f"{plan.cases} cases: {len(plan.offers)} passage(s) to label by hand ({plan.pairs} (case, passage) "
                 f"pairs with near-duplicates); skipped: {counter_line(plan.skipped)}")
    if args.dry_run:
        return 0
    text = {d.doc_id: d.text for d in docs}.get
    if args.export is not None:
        n = hl.export_csv(plan, args.export, text)
        if plan.applied:
            hl.append_held(GoldenFile(args.golden), list(plan.applied))
            say(console, f"{len(plan.applied)} pair(s) repeat a passage already judged (by a person, the judge "
                         "or an agent): given that verdict")
        # the import needs the same corpus (the --set overrides) and records who labelled: a command that
        # dropped them would fail on the corpus, or credit the verdicts to whoever runs it. A secret in an
        # override (a db.url password, a key) is masked: terminal output ends up in CI logs
        again = same_sheet_args(args)
        shown = again.masked
        say(console, f"wrote {n} passage(s) to {args.export}: fill in the verdict column (YES / PART / NO, empty to "
                     f"skip), then: rag-exp golden label {' '.join(again)} --import {shlex.quote(str(args.export))}"
                     + (" (a --set with a secret is masked as ***: put the value back)" if shown else ""),
            soft_wrap=True)
        return 0
    report = hl.run_terminal(plan, labeller=labeller, doc_text=text, console=console, judge_kind=args.judge_kind)
    say(console, report.summary())
    say(console, report.timing_line())
    return 130 if report.interrupted else 0


def _sample_spec(args: argparse.Namespace):
    """--sample / --budget / --seed / --strata as a SampleSpec (None: judge every pair)."""
    from ..golden.label import DEFAULT_STRATA, SampleSpec

    if args.sample is None and args.budget is None:
        if args.strata is not None:
            raise UserError("--strata goes with --sample N or --budget USD", hint="add --sample N")
        return None
    if args.budget is not None and (args.by_hand or args.export is not None):
        raise UserError("--budget prices LLM requests; a person's labels have no price",
                        hint="use --sample N with --by-hand")
    if args.strata is not None and args.sample_unit != "pair":
        raise UserError("--strata are rank ranges of pairs: they go with --sample-unit pair",
                        hint="add --sample-unit pair, or drop --strata (whole cases are drawn)")
    return SampleSpec(n=args.sample, budget=args.budget, seed=args.seed, strata=args.strata or DEFAULT_STRATA,
                      unit=args.sample_unit)


def _sample_source(args: argparse.Namespace) -> dict:
    """What a sample of the configured retriever's top k was drawn from (part of its id)."""
    return {"retrieve": list(args.overrides or []), "k": args.k}


def cmd_label(args: argparse.Namespace) -> int:
    from ..golden.label import plan_labelling, run_labelling

    if args.k is not None and args.k < 1:
        raise ConfigError(f"-k must be >= 1, got {args.k}")
    if args.import_csv is not None and (args.sample is not None or args.budget is not None):
        raise UserError("--import records the sheet's verdicts with the design they were exported with; "
                        "--sample / --budget go with --export", hint="drop --sample / --budget")
    if args.supersede is not None and (args.import_csv is None or not args.supersede.strip()):
        raise UserError("--supersede REASON goes with --import FILE.csv and needs a reason (it is recorded with "
                        "each correction)", hint="e.g. --import sheet.csv --supersede 'misread the passage'")
    if args.per_run_depth and not (args.pool or args.sweep):
        raise UserError("--per-run-depth needs a pool", hint="add --pool RUN_ID ... or --sweep PARENT_ID")
    if args.decide is not None:  # the pool is the runs' cut-offs; the order and the stop are golden.decide's
        if len(args.decide) != (0 if args.sweep else 2):
            raise UserError(f"--decide {' '.join(args.decide)}: give two runs (--decide A B), or none with --sweep "
                            "PARENT", hint="e.g. --decide champion candidate, or --decide --sweep PARENT_ID")
        if args.pool or args.sample is not None or args.budget is not None or args.import_csv:
            raise UserError("--decide picks its own passages: it goes without --pool, --sample, --budget "
                            "and --import", hint="import a --decide export with --import alone, then --decide again")
        if not 0.5 <= args.stop_level < 1:
            raise UserError(f"--stop-level {args.stop_level}: a probability from 0.5 to below 1",
                            hint="e.g. --stop-level 0.99")
        if args.max_labels is not None and args.max_labels < 1:  # an export would slice [:-3] or [:0]: all rows
            raise UserError(f"--max-labels {args.max_labels}: a number of labels, 1 or more",
                            hint="e.g. --max-labels 60, or leave it out to label until the decision is settled")
        from ..golden.hand_label import default_labeller
        from . import decide_labels

        labeller = (args.labeller or "").strip() or default_labeller()
        return decide_labels.label_decide(args, rich_console(), say, labeller)
    if args.by_hand or args.export is not None or args.import_csv is not None:
        return _label_by_hand(args)
    if args.judge_kind != "human":
        raise UserError("--judge-kind goes with --by-hand or --import (the LLM judge records judge.kind llm)",
                        hint="add --by-hand to label the pairs yourself")
    if args.labeller:
        raise UserError("--labeller goes with --by-hand (the LLM judge records its model, not a name)",
                        hint="add --by-hand to label the pairs yourself")
    check_llm_args(args)
    console = rich_console()
    price = resolve_llm(args)
    spec = _sample_spec(args)
    if args.pool or args.sweep:
        plan = _pool_plan(args, price, spec)
    else:
        session = open_session(args.overrides)
        _session_depth(args, session)
        try:
            # an external passage that could not be placed in the corpus has no span to judge: skipped
            plan = plan_labelling(args.golden, lambda q: [h for h in session.search(q, args.k) if h["doc_hash"]],
                                  k=args.k, model=args.model, batch=args.batch,
                                  retry_failed=args.retry_malformed, price=price, provider=args.provider,
                                  sample=spec, source=_sample_source(args),
                                  language=corpus_language(session))
        finally:
            session.close()
    if plan.sample is not None:
        say(console, plan.sample.describe() + (f"; budget ${plan.sample.budget:.2f}" if plan.sample.budget else ""),
            soft_wrap=True)
    say(console, f"{plan.cases} cases, {len(plan.jobs)} (case, passage) pairs to judge; skipped: "
                 f"{counter_line(plan.skipped)}")
    say(console, f"already judged (checkpoint {plan.checkpoint_path}): {plan.already_done}; "
                 f"in open batches: {plan.in_open_batches}; to send: {len(plan.pending)}")
    report = run_llm_job(args, console, plan, run_labelling, "judging", price)
    if isinstance(report, int):
        return report
    say(console, f"Pairs judged: {report.processed}, API errors (retried on rerun): {report.api_errors}; "
                 f"judgements appended: {report.judgements_appended} (+{report.judgements_reconciled} from the "
                 f"checkpoint)" + (f"; {report.judgements_applied} earlier verdict(s) copied to the same text "
                                    "in other documents (applied_from), not sent" if report.judgements_applied else ""))
    return finish_llm_job(args, console, report, "Outcomes")
