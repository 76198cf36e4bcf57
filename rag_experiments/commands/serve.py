"""rag-exp serve: the champion over HTTP (``mlflow models serve``), from a fresh clone as written.

Two things made the documented ``.venv/bin/mlflow models serve ...`` fail on a fresh clone: the
registry was empty until some command re-populated it from the committed champion record
(``experiments/promoted/<name>.record.json``), and ``--env-manager local`` execs ``uvicorn`` from
PATH, which holds ``.venv/bin`` only in an activated venv. This command does both first (the
registry mirrors the record; the interpreter's own bin folder leads PATH; the project's tracking
URI is exported), then replaces itself with the MLflow server process, so signals and the exit
code are the server's own.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser(
        "serve", help="serve the champion over HTTP (mlflow models serve), registry populated first",
        description="Serve models:/rag-retriever-<name>@champion with MLflow's scoring server (what `mlflow models "
        "serve --env-manager local` runs), behind a guard: only JSON requests, errors as JSON without stack traces "
        "or the request quoted back. "
        "The registry is re-populated from the committed champion record when it does not mirror it, and the "
        "venv's bin folder is put on PATH (the server execs uvicorn from there). POST "
        '{"inputs": ["a question", ...], "params": {"k": 5}} to /invocations (at most 100 queries a call). '
        "The served model never ingests: run `rag-exp ingest` (or `make run`) first.")
    p.add_argument("--name", default="default", help="the champion's name (rag-retriever-<name>; default: default)")
    p.add_argument("-p", "--port", type=int, default=5001, help="port to listen on (default 5001)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("-w", "--workers", type=int, default=1, help="server worker processes (default 1)")
    p.add_argument("--print-command", action="store_true",
                   help="populate the registry, print the server command and its environment, do not start it")
    p.set_defaults(func=cmd_serve)


def server_command(name: str, host: str, port: int, workers: int) -> tuple[list[str], dict[str, str]]:
    """The server's argv and environment for the champion ``name``: uvicorn running MLflow's
    scoring server behind the guard of :mod:`rag_experiments.serving.http_guard` (what
    ``mlflow models serve --env-manager local`` runs, minus stack traces and echoed input)."""
    from ..tracking.champion import ALIAS, model_name
    from ..paths import tracking_uri
    from ..serving.http_app_env import MODEL_ENV

    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]).rstrip(os.pathsep),
           "MLFLOW_TRACKING_URI": tracking_uri(), MODEL_ENV: f"models:/{model_name(name)}@{ALIAS}"}
    argv = [sys.executable, "-m", "uvicorn", "--host", host, "--port", str(port), "--workers", str(workers),
            "rag_experiments.serving.http_app:app"]
    return argv, env


def cmd_serve(args: argparse.Namespace) -> int:
    from ..errors import UserError
    from ..serving.http_app_env import MODEL_ENV
    from ..serving.model_logging import champion_model

    if not 0 < args.port < 65536:
        raise UserError(f"--port {args.port}: must be between 1 and 65535")
    if args.workers < 1:
        raise UserError(f"--workers {args.workers}: must be >= 1")
    config, manifest = champion_model(args.name)  # re-populates the registry from the record if needed
    argv, env = server_command(args.name, args.host, args.port, args.workers)
    print(f"serving {env[MODEL_ENV]} (version {manifest.get('version')}) on http://{args.host}:{args.port}"
          "/invocations", flush=True)
    if args.print_command:
        print(" ".join(argv))
        print(f"{MODEL_ENV}={env[MODEL_ENV]}")
        print(f"PATH={env['PATH']}")
        print(f"MLFLOW_TRACKING_URI={env['MLFLOW_TRACKING_URI']}")
        return 0
    os.execvpe(argv[0], argv, env)
    return 0  # not reached
