"""Start-up cost of the commands (issue 44, item 8): what a person waits for beyond the work.

Two measurements, each in child processes (a fresh interpreter: nothing imported yet):

* every ``rag-exp <command> --help`` (and ``rag-exp --help``, and each ``golden`` / ``corpus``
  subcommand's): wall time, median of ``repeats``. argparse registers every command's parser
  first, so a command module with heavy top-level imports slows every other command's help;
* a warm ``rag-exp run`` (the demo's default experiment, ingest and caches already warm): its wall
  time minus the work it reports on its ``time: total ...`` line, with the work in a forked child
  while the parent imports the tracking stack (the default, rag_experiments/overlap.py) and without
  (``RAG_EXP_OVERLAP=0``). The rest is start-up and
  shut-down: Python, Hydra's composition, MLflow's import and store, the plots, interpreter exit.
  Its CPU (user + system of the child, PostgreSQL's not counted) is reported beside it: on a
  loaded machine wall time is mostly waiting for a core, CPU is what the start-up costs.

``python -m rag_experiments.bench_startup`` runs the section alone (``--help`` for its options);
``rag-exp bench`` runs it as its ``startup`` section.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

#: the line every run prints after its summary: ``time: total 2.04s (ingest ...``
_TOTAL = re.compile(r"^time: total ([0-9.]+)s", re.MULTILINE)


def help_commands() -> list[list[str]]:
    """``[]`` (``rag-exp --help``), every command, and every subcommand of a command that has
    them, as argument lists (read from the parser itself: a new command is measured with no edit)."""
    from .commands import register_all  # the CLI's own list of commands, without importing the CLI

    root = argparse.ArgumentParser(prog="rag-exp")
    register_all(root.add_subparsers(dest="command"))
    out: list[list[str]] = [[]]

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:  # noqa: SLF001 - argparse keeps its subparsers only here
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                seen = set()
                for name, child in action.choices.items():
                    if id(child) in seen:  # an alias
                        continue
                    seen.add(id(child))
                    out.append([*prefix, name])
                    if len(prefix) < 1:
                        walk(child, [*prefix, name])

    walk(root, [])
    return out


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def time_command(argv: list[str], *, env: dict | None = None, cwd: str | None = None) -> tuple[float, float, str, int]:
    """Wall s, CPU s (the child's user + system), stdout, exit code of ``python -m rag_experiments.cli ARGV``."""
    cpu, t = _child_cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rag_experiments.cli", *argv], env=env, cwd=cwd,
                          capture_output=True, text=True, check=False)
    return time.perf_counter() - t, _child_cpu() - cpu, proc.stdout, proc.returncode


def help_walls(repeats: int = 3, commands: list[list[str]] | None = None) -> list[tuple[str, float, float, int]]:
    """``(command line, median wall s, median CPU s, exit code)`` of ``--help`` for each command."""
    rows = []
    for cmd in commands if commands is not None else help_commands():
        walls, cpus, rc = [], [], 0
        for _ in range(repeats):
            wall, cpu, _out, rc = time_command([*cmd, "--help"])
            walls.append(wall)
            cpus.append(cpu)
        rows.append((" ".join(["rag-exp", *cmd, "--help"]), statistics.median(walls), statistics.median(cpus), rc))
    return rows


def run_overhead(overrides: list[str] = (), *, env: dict | None = None, repeats: int = 3,
                 cwd: str | None = None) -> dict:
    """A warm ``rag-exp run``: one run to warm ingest and caches, then ``repeats`` timed runs.
    Medians of wall, reported work (``time: total``), overhead (wall - work) and CPU."""
    argv = ["run", "progress=false", *overrides]
    walls, works, cpus = [], [], []
    for i in range(repeats + 1):
        wall, cpu, out, rc = time_command(argv, env=env, cwd=cwd)
        if rc != 0:
            return {"error": f"exit {rc}"}
        m = _TOTAL.search(out)
        if m is None:
            return {"error": "no 'time: total' line in the run's output"}
        if i == 0:
            continue  # the warming run (it may ingest)
        walls.append(wall)
        works.append(float(m.group(1)))
        cpus.append(cpu)
    over = [w - k for w, k in zip(walls, works)]
    return {"wall": statistics.median(walls), "work": statistics.median(works),
            "overhead": statistics.median(over), "cpu": statistics.median(cpus), "walls": walls, "works": works}


def bench_startup(add: Callable[[str, str, str], None], url: str | None = None, overrides: list[str] = (),
                  repeats: int = 3) -> None:
    """The ``startup`` section of ``rag-exp bench``: ``add(section, what, value)`` per row. ``url``:
    the database the run uses (else the configured one); its MLflow store is a temporary one."""
    rows = help_walls(repeats)
    slowest = max(rows, key=lambda r: r[1])
    add("startup", f"--help of {len(rows)} command lines, wall: median of their medians / slowest ({slowest[0]})",
        f"{statistics.median(r[1] for r in rows):.2f}s / {slowest[1]:.2f}s")
    add("startup", "--help, CPU (user + system): median / largest", f"{statistics.median(r[2] for r in rows):.2f}s / "
        f"{max(r[2] for r in rows):.2f}s")
    for line, wall, cpu, rc in rows:
        if line.count(" ") <= 2:  # top-level commands; subcommands only in the summaries above
            add("startup", line + " wall / CPU" + ("" if rc == 0 else f" (exit {rc})"), f"{wall:.2f}s / {cpu:.2f}s")
    from .paths import project_root

    with tempfile.TemporaryDirectory(prefix="rag_bench_startup_") as home:
        env = {**os.environ, "RAG_EXP_HOME": str(project_root()), "MLFLOW_TRACKING_URI": f"sqlite:///{home}/mlflow.db"}
        if url:
            env["DATABASE_URL"] = url
        r = run_overhead(list(overrides), env=env, repeats=repeats, cwd=home)
    if "error" in r:
        add("startup", "rag-exp run (warm)", f"failed: {r['error']}")
        return
    add("startup", f"rag-exp run (warm, MLflow logging and plots on): wall / reported work, median of {repeats}",
        f"{r['wall']:.2f}s / {r['work']:.2f}s")
    add("startup", "rag-exp run (warm): overhead = wall - reported work / the child's CPU (user + system)",
        f"{r['overhead']:.2f}s / {r['cpu']:.2f}s")
    # the same run with the work in this process (rag_experiments/overlap.py switched off): what the
    # forked work saves by importing MLflow, its store and matplotlib on the other core meanwhile
    with tempfile.TemporaryDirectory(prefix="rag_bench_startup_") as home:
        env = {**os.environ, "RAG_EXP_HOME": str(project_root()), "MLFLOW_TRACKING_URI": f"sqlite:///{home}/mlflow.db",
               "RAG_EXP_OVERLAP": "0"}
        if url:
            env["DATABASE_URL"] = url
        serial = run_overhead(list(overrides), env=env, repeats=repeats, cwd=home)
    if "error" not in serial:
        add("startup", "rag-exp run (warm), work in the same process (RAG_EXP_OVERLAP=0): wall / overhead / CPU",
            f"{serial['wall']:.2f}s / {serial['overhead']:.2f}s / {serial['cpu']:.2f}s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rag_experiments.bench_startup", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="timed repetitions per measurement (median reported)")
    ap.add_argument("--no-run", action="store_true", help="only the --help walls")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for the warm run (e.g. db.url=...)")
    args = ap.parse_args(argv)

    def add(section: str, what: str, value: str) -> None:
        print(f"| {section} | {what} | {value} |", flush=True)

    if args.no_run:
        for line, wall, cpu, rc in help_walls(args.repeats):
            add("startup", line + " wall / CPU" + ("" if rc == 0 else f" (exit {rc})"), f"{wall:.2f}s / {cpu:.2f}s")
        return 0
    bench_startup(add, os.environ.get("DATABASE_URL"), args.overrides, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
