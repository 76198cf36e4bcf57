"""``rag-exp golden generate``: its arguments and what it runs. Questions written by the LLM for a
stratified sample of chunks (:mod:`rag_experiments.golden.generate`, with the leakage bar of
:mod:`rag_experiments.golden.leakage`), or questions that need two passages (``--multi``,
:mod:`rag_experiments.golden.generate_multi`)."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from ..errors import UserError
from .llm_job import (
    check_llm_args as _check_llm_args,
    console as _console,
    corpus_language as _corpus_language,
    counter_line as _counter_line,
    finish_llm_job as _finish_llm_job,
    open_session as _open_session,
    resolve_llm as _resolve_llm,
    run_llm_job as _run_llm_job,
    say as _say,
)


def add_parser(sub: Any, golden_arg: Callable, llm_args: Callable, overrides_arg: Callable) -> None:
    """The ``generate`` subcommand (``golden_arg`` etc.: the ``golden`` command's shared argument groups)."""
    sp = sub.add_parser(
        "generate", help="generate question cases from a stratified sample of chunks (LLM)",
        description="Sample chunks (stratified over doc type x token-count bucket, boilerplate "
        "skipped), ask the model for a paraphrase and an exact-identifier question per chunk, "
        "validate strictly, append `case` records. Resumable: outcomes are checkpointed in "
        "<golden stem>.generate.log.jsonl; a rerun never asks again for a finished chunk. "
        "Shows a cost estimate and asks before spending.")
    golden_arg(sp)
    sp.add_argument("-n", "--n", type=int, default=150, help="chunks to sample (default: 150)")
    sp.add_argument("--seed", type=int, default=13, help="sampling seed (default: 13)")
    sp.add_argument("--dry-run", action="store_true", help="show the sample and the estimate, call nothing")
    sp.add_argument("--leakage-bar", action="append", default=[], metavar="KIND=VALUE",
                    help="content-word overlap with the evidence above which a question is rewritten once in a "
                    "user's words (second prompt), then dropped if still above; repeatable; VALUE a share 0..1 or "
                    "off (default: paraphrase=0.5, exact=0.75, the identifier's own words not counted)")
    sp.add_argument("--multi", type=int, default=None, metavar="N",
                    help="instead: write questions that need two passages (kind multi, evidence groups) from N pairs "
                    "of chunks that belong together (two sections of one document, or two documents sharing a rare "
                    "identifier); resumable (<golden stem>.generate-multi.log.jsonl); --leakage-bar multi=VALUE drops "
                    "questions over it")
    llm_args(sp)
    overrides_arg(sp)
    sp.set_defaults(func=cmd_generate)


def cmd_generate(args: argparse.Namespace) -> int:
    from ..golden.generate import leakage_lines, parse_bars, plan_generation, run_generation

    _check_llm_args(args)
    bars = parse_bars(args.leakage_bar)
    console = _console()
    price = _resolve_llm(args)
    session = _open_session(args.overrides)
    try:
        chunks = session.chunks()
        language = _corpus_language(session)  # the prompts ask for questions in it (not english)
    finally:
        session.close()
    if args.multi is not None:
        return _generate_multi(args, console, chunks, bars.get("multi"), price, language)
    plan = plan_generation(chunks, args.golden, n=args.n, seed=args.seed, model=args.model, batch=args.batch,
                           retry_failed=args.retry_malformed, price=price, provider=args.provider, bars=bars,
                           language=language)
    s = plan.sample
    _say(console, f"{len(chunks)} chunks; skipped as boilerplate: {_counter_line(s.skipped)}")
    _say(console, f"sampled {len(s.chunks)} over {len(s.strata)} strata (doc type x tokens): "
                  + ", ".join(f"{d}/{b} {t}/{e}" for (d, b), (e, t) in s.strata.items()))
    _say(console, f"already done (checkpoint {plan.checkpoint_path}): {plan.already_done}; "
                  f"in open batches: {plan.in_open_batches}; to send: {len(plan.pending)}")
    _say(console, "leakage bar (content-word overlap with the evidence; over it: one rewrite, then dropped): "
                  + (", ".join(f"{k} {v:g}" for k, v in sorted(plan.bars.items())) or "off")
                  + (f"; rewrites left from earlier runs: {plan.rewrites_pending}" if plan.rewrites_pending else ""))
    if plan.rewrite_estimate is not None and plan.pending:
        _say(console, f"  rewrites at most (every question over its bar): {plan.rewrite_estimate.describe()}")
    report = _run_llm_job(args, console, plan, run_generation, "generating", price)
    if isinstance(report, int):
        return report
    _say(console, f"Chunks answered: {report.processed}, API errors (retried on rerun): {report.api_errors}; "
                  f"cases appended: {report.cases_appended} (+{report.cases_reconciled} from the checkpoint), "
                  f"already present: {report.cases_already_present}")
    if report.leakage:
        _say(console, f"Leakage bar, per kind (all generation of this golden set; rewrites this run: "
                      f"{report.rewrites_processed}):")
        for line in leakage_lines(report.leakage):
            _say(console, "  " + line, soft_wrap=True)
    return _finish_llm_job(args, console, report, "Validation")


def _generate_multi(args: argparse.Namespace, console, chunks, bar, price, language: str) -> int:
    """golden generate --multi N (rag_experiments.golden.generate_multi)."""
    from ..golden.generate_multi import plan_multi, run_multi

    if args.multi < 1:
        raise UserError(f"--multi must be >= 1 (pairs of chunks), got {args.multi}")
    plan = plan_multi(chunks, args.golden, n=args.multi, seed=args.seed, model=args.model, batch=args.batch,
                      retry_failed=args.retry_malformed, price=price, provider=args.provider, bar=bar,
                      language=language)
    _say(console, f"{len(chunks)} chunks; {len(plan.pairs)} pairs that belong together: "
                  + (", ".join(f"{k} {v}" for k, v in sorted(plan.by_kind.items())) or "none"))
    _say(console, f"already done (checkpoint {plan.checkpoint_path}): {plan.already_done}; "
                  f"in open batches: {plan.in_open_batches}; to send: {len(plan.pending)}")
    report = _run_llm_job(args, console, plan, run_multi, "generating", price)
    if isinstance(report, int):
        return report
    _say(console, f"Pairs answered: {report.processed}, API errors (retried on rerun): {report.api_errors}; "
                  f"multi cases appended: {report.cases_appended} (+{report.cases_reconciled} from the checkpoint), "
                  f"already present: {report.cases_already_present}")
    return _finish_llm_job(args, console, report, "Validation")
