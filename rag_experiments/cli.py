"""``rag-exp``: the non-Hydra commands (corpus, golden set, compare, promote, triage, ...).

Each command group lives in ``rag_experiments/commands/<group>.py`` and exposes
``register(subparsers)``; this file only assembles them and turns user errors into one clear
message and a non-zero exit (``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import os
import sys

from .commands import register_all
from .errors import UserError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rag-exp",
        description=(
            "Evidence for tuning a RAG retriever. Experiments themselves run through Hydra: "
            "`python run.py` (one config) or `python run.py -m fusion.rrf_k=30,60,90` (a sweep). "
            "These commands manage the database, the corpus, the golden set, and compare, "
            "promote and gate runs logged to MLflow."
        ),
        epilog="Environment: DATABASE_URL (else an embedded PostgreSQL in .rag-exp/), "
        "MLFLOW_TRACKING_URI (else sqlite under ./mlruns), ANTHROPIC_API_KEY (golden generate/label).",
    )
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    register_all(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the console script (tests call main(argv) in their own process)
        from .startup import before_exit, tune_for_command_line

        tune_for_command_line()
        try:
            return _main(None)
        finally:
            before_exit()
    return _main(argv)


def _main(argv: list[str] | None) -> int:
    from .redaction import redact_process_output, redact_text, register_argv

    register_argv(sys.argv[1:] if argv is None else argv)
    if argv is None or "--debug" in (argv or []) or os.environ.get("HYDRA_FULL_ERROR") == "1":
        # the console script, and every traceback a debug run prints: secrets masked on the way out
        redact_process_output()
    raw = sys.argv[1:] if argv is None else list(argv)
    if raw[:1] == ["run"] and not {"-h", "--help"} & set(raw[1:2]):
        # everything after `run` is Hydra's (-m, --cfg job, --multirun ...): argparse would take
        # its flags for rag-exp's own
        from .hydra_app import main as hydra_main

        hydra_main(raw[1:])
        return 0
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    debug = args.debug or os.environ.get("HYDRA_FULL_ERROR") == "1"
    try:
        from .conf_yaml import check_conf_yaml
        from .conf_source import PACKAGED_CONF
        from .paths import project_root

        if (project_root() / "conf").resolve() != PACKAGED_CONF:
            check_conf_yaml(project_root() / "conf")  # a project's broken YAML: one line, not PyYAML's traceback
        if getattr(args, "command", None) == "golden" and hasattr(args, "golden") and args.golden is None:
            from .commands.golden import configured_golden

            args.golden = configured_golden(getattr(args, "overrides", None))
        if getattr(args, "command", None) == "golden" and hasattr(args, "corpus") and args.corpus is None:
            from .commands.golden import configured_corpus

            args.corpus = configured_corpus(getattr(args, "overrides", None))
        result = args.func(args)
    except UserError as exc:
        if debug:
            raise
        print(f"error: {redact_text(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # an ingest's carries the line saying what is kept (ingest_progress)
        print(str(exc) or "interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - only environment failures become one line; bugs re-raise
        message = environment_error(exc)
        if message is None or debug:
            raise
        print(f"error: {message}", file=sys.stderr)
        return 2
    return int(result or 0)


def environment_error(exc: BaseException) -> str | None:
    """One line for a failure of the world around a command (database gone mid-command, API
    unreachable), else None. Imports lazily: neither library is loaded for commands without it."""
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(exc, psycopg.OperationalError):
        first = (str(exc).strip().splitlines() or [""])[0]
        return (f"the database failed during the command ({type(exc).__name__}: {first}); "
                "is the server still running? (rag-exp db status)")
    anthropic, openai = sys.modules.get("anthropic"), sys.modules.get("openai")
    if (anthropic is not None and isinstance(exc, anthropic.APIError)) or (
            openai is not None and isinstance(exc, openai.APIError)):
        from .llm import api_name, describe_api_error, fatal_api_error

        fatal = fatal_api_error(exc)
        return str(fatal) if fatal is not None else f"{api_name(exc)}: {describe_api_error(exc)}"
    return None


if __name__ == "__main__":
    sys.exit(main())
