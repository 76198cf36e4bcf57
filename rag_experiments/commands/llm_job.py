"""What the LLM-backed golden commands share (generate, label, label --decide): the configured
corpus and llm node, the provider/model/price resolution, the cost confirmation and the job runner,
and the console, the retriever session and the usage lines they print.

Its own module so that commands/golden.py and commands/decide_labels.py both import it and not
each other (tools/import_check.py: no import cycle, no private import across modules)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import ConfigError, UserError


def configured_corpus(overrides: list[str] | None = None) -> str:
    """The corpus folder the configuration names ('demo' for the packaged default)."""
    from ..conf_source import config_source

    if config_source().name == "config" and not any(o.startswith(("corpus", "+corpus")) for o in overrides or []):
        return "demo"
    from ..configured_paths import configured_paths

    return configured_paths(overrides)["corpus"]  # composed once per configuration (remembered)


def say(console: Any, *objects: Any, **kwargs: Any) -> None:
    """Print without markup: paths, queries and API messages may contain [brackets]."""
    console.print(*objects, markup=False, **kwargs)


def price_of(args: argparse.Namespace) -> Any:
    from ..llm import parse_price

    return parse_price(args.price or None, "--price")


def configured_llm(overrides: list[str] | None = None) -> Any:
    """The ``llm`` node of the configuration (``--set llm.provider=openai``, a project's
    conf/project.yaml): what --provider / --base-url / --price default to. Composed only when
    something can differ from the packaged default."""
    from ..conf_source import config_source
    from ..llm import LLMParams

    if config_source().name == "config" and not any(o.lstrip("+~").split("=")[0].split(".")[0] == "llm"
                                                    for o in overrides or []):
        return LLMParams()
    from ..session import compose_settings

    return compose_settings(list(overrides or []))[0].llm


def resolve_llm(args: argparse.Namespace) -> Any:
    """Fill args.provider / base_url / model from the flags, else the configured ``llm`` node (its
    base URL and price only when its provider is the one used), else the provider's defaults;
    return the price (None: unknown). Refuses --batch with a provider that has no batches."""
    from ..golden.llm_jobs import check_batch_provider
    from ..llm import DEFAULT_MODEL, check_base_url

    price = price_of(args)
    conf = configured_llm(getattr(args, "overrides", None)) if None in (args.provider, args.base_url, price) \
        else None
    provider = args.provider or (conf.provider if conf else "anthropic")
    same = conf is not None and conf.provider == provider
    args.provider = provider
    args.base_url = check_base_url(args.base_url or (conf.base_url if same else None), "--base-url")
    if price is None and same:
        price = conf.price_override
    if not args.model:
        if provider != "anthropic":
            raise ConfigError(f"--model: provider {provider} has no default model",
                              hint="pass the name your server serves, e.g. --model Qwen/Qwen2.5-7B-Instruct (vLLM) "
                              "or --model llama3.1:8b (Ollama)")
        args.model = DEFAULT_MODEL
    check_batch_provider(args.batch, provider)
    return price


def confirm(console: Any, estimate: Any, yes: bool) -> bool:
    say(console, f"Estimate: {estimate.describe()}")
    if yes:
        return True
    if not sys.stdin.isatty():
        raise UserError("not confirming the cost without a terminal", hint="pass --yes to proceed non-interactively")
    answer = input("Proceed? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        say(console, "cancelled; nothing was sent")
        return False
    return True


def llm_client(args: argparse.Namespace) -> Any:
    from ..llm import make_client

    return make_client(max_retries=args.max_retries, timeout=args.timeout, provider=args.provider,
                       base_url=args.base_url)


def progress_bar(total: int, label: str) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    progress = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    task = progress.add_task(label, total=total)
    return progress, (lambda entry: progress.advance(task))


def counter_line(counter: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counter.items())) or "none"


def run_llm_job(args: argparse.Namespace, console, plan, runner, verb: str, price):
    """What generate and label share: dry-run estimate, cost confirmation, client, progress bar,
    the run itself. Returns the runner's report, or an exit code (dry run 0, declined 1)."""
    if args.provider != "anthropic" or args.base_url:
        from ..redaction import redact_text

        where = f" at {redact_text(args.base_url)}" if args.base_url else ""
        say(console, f"LLM: provider {args.provider}{where}, model {args.model}")
    unpriced = plan.pending and plan.estimate.usd is None
    if args.dry_run:
        say(console, f"Estimate: {plan.estimate.describe()}")
        if unpriced:
            say(console, "  note: no price for this model: a real run needs --price IN,OUT (0,0 for your own server)")
        return 0
    if unpriced:  # never send without a cost, and never assume it is zero
        raise ConfigError(f"--price: no price for model {args.model!r} (provider {args.provider}): the cost of "
                          f"{len(plan.pending)} requests cannot be estimated",
                          hint="pass --price IN,OUT in USD per million input,output tokens (--price 0,0 for a model "
                          "on your own server); nothing was sent")
    client = None
    if plan.pending or plan.in_open_batches or getattr(plan, "rewrites_pending", 0):  # left by a confirmed run
        if plan.pending and not confirm(console, plan.estimate, args.yes):
            return 1
        client = llm_client(args)
    progress, tick = progress_bar(len(plan.pending) + plan.in_open_batches, verb)
    with progress:
        return runner(plan, client, concurrency=args.concurrency, on_progress=tick,
                      poll_interval=args.poll_interval, poll_timeout=args.poll_timeout, price=price)


# -- the console, the session, the job's last lines (golden generate and label) ---------------
def console() -> Any:
    from rich.console import Console

    return Console(highlight=False)


def open_session(overrides: list[str]) -> Any:
    from ..session import open_retriever  # lazy: the database is only needed here

    return open_retriever(overrides or None)


def check_llm_args(args: argparse.Namespace) -> None:
    if args.concurrency < 1:
        raise ConfigError(f"--concurrency must be >= 1, got {args.concurrency}")
    if args.max_retries < 0:
        raise ConfigError(f"--max-retries must be >= 0, got {args.max_retries}")


def usage_line(report: Any, model: str, provider: str = "anthropic") -> str:
    u = report.usage + report.batch_usage
    cost = "unknown (no price for this model; pass --price)" if report.cost_usd is None else f"${report.cost_usd:.4f}"
    via = f" (provider {provider})" if provider != "anthropic" else ""
    return (f"Usage: {u.requests} responses, {u.input_tokens:,} input + {u.output_tokens:,} output tokens "
            f"on {model}{via}; cost {cost}")


def corpus_language(session) -> str:
    """The session's corpus.language (english for a session without settings)."""
    settings = getattr(session, "settings", None)
    return settings.corpus.language if settings is not None else "english"


def finish_llm_job(args: argparse.Namespace, console, report, problems_title: str) -> int:
    say(console, f"{problems_title}: {counter_line(dict(report.problems))}")
    if report.torn_checkpoint_lines:
        say(console, f"  note: {report.torn_checkpoint_lines} torn checkpoint line(s) ignored (a run killed "
                     "mid-write); those items were asked again")
    for err in report.errors[:5]:
        say(console, f"  error: {err}")
    say(console, usage_line(report, args.model, args.provider))
    return 0 if not report.api_errors else 3
