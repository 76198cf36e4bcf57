"""One-line mutants of the statistics code, and which of them the fast tests kill (issue 56).

    .venv/bin/python tools/mutation_pass.py                      # HEAD: every mutant, a summary, the survivors
    .venv/bin/python tools/mutation_pass.py --ref 74a95d2^       # the code and tests of another commit
    .venv/bin/python tools/mutation_pass.py --only ppi.py --list # the mutants of one file, not run
    .venv/bin/python tools/mutation_pass.py --match "ipw.py:218: * -> /"   # one mutant again

A mutant is the source with one small change on one line: a comparison operator flipped (< to <=, ==
to !=), an arithmetic operator swapped (+ to -, * to /), an integer constant moved by one, a few
named float constants changed (0.95 to 0.9, 0.975 to 0.95, 0.5 to 0.4), min and max swapped, and
and or swapped, True and False swapped, the first two arguments of a call swapped, ``x[idx]`` read
as ``x[:len(idx)]`` (the first n instead of the sample index), and the issue's two by name
(``ppi_paired`` on the first n cases; the bootstrap's 95% interval computed at 90%). Lines inside
``raise`` statements and docstrings are left alone (they word an error, not a number), and so are
float constants below 1e-6 (tolerances), parameters' default values (a caller's choice: seed=13)
and subscripts that are type annotations.

Each mutant is run on a copy of the repository at ``--ref`` (``git archive``; the shared working tree
is never written), against the fast tests of tests/stats and tests/evaluation that exercise the
mutated module (:data:`RELEVANT`; the ranx and MLflow-store tests left out: slow, and they add nothing
a hand-worked value does not), with ``-x``, so a killed mutant stops at its first failure. A few
hundred mutants per file are too many for two loaded cores: ``--per-file`` draws a seeded sample of
each file's (30 by default; 0 for all), the named ones always in it.
A mutant is *killed* when a test fails (or the run passes the ``--timeout``), *survived* when every
test passes. The file is restored byte for byte after each mutant (try/finally), and the pass starts
with the unmutated copy, which must pass.

Speed: the parent imports the heavy third-party modules once and forks one child per mutant (the
child imports the package from the copy, so it sees the mutant); Python writes no bytecode, so a
mutant written in the same second as the original is never read from a stale ``.pyc``.

Not a CI test: a few hundred mutants take tens of minutes on two cores.
"""

from __future__ import annotations

import argparse
import ast
import io
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("rag_experiments/stats/*.py", "rag_experiments/evaluation/metrics.py",
           "rag_experiments/evaluation/measures.py", "rag_experiments/evaluation/intervals.py")
TESTS = ("tests/stats", "tests/evaluation")
#: slow or store-backed tests (ranx's agreement at 100k permutations, a run logged to MLflow): left out
DESELECT = ("test_p_values_agree_with_ranx_fisher", "test_judge_corrected_run.py", "test_agrees_with_ranx",
            "test_precision_is_logged_and_agrees_with_ir_measures_and_ranx")
#: the test files of each module: those of tests/stats and tests/evaluation that import it, directly or
#: through the module that calls it (collecting every test module for each mutant cost ~20 s a mutant)
RELEVANT = {"bootstrap": ["tests/stats/test_bootstrap.py", "tests/evaluation/test_intervals.py", "tests/stats/test_paired.py"],
            "intervals": ["tests/evaluation/test_intervals.py"],
            "paired": ["tests/stats/test_paired.py", "tests/stats/test_power.py", "tests/stats/test_maxt.py"],
            "power": ["tests/stats/test_power.py"], "ppi": ["tests/stats/test_ppi.py"],
            "ipw": ["tests/stats/test_ipw.py", "tests/evaluation/test_sampled_difference.py"],
            "maxt": ["tests/stats/test_maxt.py"],
            "kfold_selection": ["tests/stats/test_kfold_selection.py",  # and the line that prints it (no store):
                                "tests/tracking/test_held_out.py::test_without_a_split_the_kfold_estimate_shows_the_"
                                "selections_optimism"],
            "metrics": ["tests/evaluation/test_metrics.py", "tests/evaluation/test_evidence_groups.py",
                        "tests/evaluation/test_crediting.py", "tests/evaluation/test_incomplete_judgements.py"],
            "measures": ["tests/evaluation/test_metrics.py", "tests/evaluation/test_incomplete_judgements.py"]}
#: a subscript by one of these names is a type annotation (dict[str, float]), not an index
TYPE_NAMES = {"str", "int", "float", "bool", "bytes", "object", "Any", "Hashable", "Term", "Stratum", "Cell"}
OPERATORS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "+": "-", "-": "+",
             "*": "/", "/": "*", "**": "*", "//": "/"}
NAMES = {"min": "max", "max": "min", "and": "or", "or": "and", "True": "False", "False": "True"}
FLOATS = {0.95: "0.9", 0.975: "0.95", 0.5: "0.4", 0.8: "0.9", 2.0: "3.0", 1.0: "2.0", 0.0: "1.0"}
#: the issue's two, by name: (file, text on the line, replacement)
NAMED = (("rag_experiments/stats/ppi.py", "d_all[idx]", "d_all[:len(idx)]"),
         ("rag_experiments/stats/bootstrap.py", "alpha = (1 - level) / 2", "alpha = (1 - 0.9) / 2"))


@dataclass(frozen=True)
class Mutant:
    path: str  # relative to the repository
    line: int  # 1-based
    what: str  # e.g. "< -> <="
    source: str  # the whole mutated file

    def name(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _skipped_lines(tree: ast.AST) -> set[int]:
    """Lines of raise statements and docstrings: an error's wording or prose, never a number."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise):
            out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Module)) and ast.get_docstring(node) is not None:
            doc = node.body[0]
            out.update(range(doc.lineno, (doc.end_lineno or doc.lineno) + 1))
    return out


def _offsets(source: str) -> list[int]:
    starts, pos = [], 0
    for line in source.splitlines(keepends=True):
        starts.append(pos)
        pos += len(line)
    return starts


def _replace(source: str, starts: list[int], start: tuple[int, int], end: tuple[int, int], text: str) -> str:
    a = starts[start[0] - 1] + start[1]
    b = starts[end[0] - 1] + end[1]
    return source[:a] + text + source[b:]


def mutants_of(path: Path, rel: str) -> list[Mutant]:
    source = path.read_text()
    tree = ast.parse(source)
    skip = _skipped_lines(tree)
    starts = _offsets(source)
    found: list[tuple[int, str, str]] = []  # (line, what, mutated source)

    def add(line: int, what: str, mutated: str) -> None:
        if line in skip or mutated == source:
            return
        try:
            compile(mutated, rel, "exec")
        except SyntaxError:
            return
        found.append((line, what, mutated))

    for file, text, new in NAMED:  # first: a generic mutant that makes the same source keeps this name
        if file == rel and text in source:
            line = source[:source.index(text)].count("\n") + 1
            found.append((line, f"named: {text} -> {new}", source.replace(text, new, 1)))
    # default values of parameters (samples=1000, seed=13): a caller's choice, not the computation
    defaults = {(d.lineno, d.col_offset) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))
                for d in [*n.args.defaults, *(k for k in n.args.kw_defaults if k is not None)]}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        line = tok.start[0]
        if tok.start in defaults:
            continue
        if tok.type == tokenize.OP and tok.string in OPERATORS:
            add(line, f"{tok.string} -> {OPERATORS[tok.string]}",
                _replace(source, starts, tok.start, tok.end, OPERATORS[tok.string]))
        elif tok.type == tokenize.NAME and tok.string in NAMES:
            add(line, f"{tok.string} -> {NAMES[tok.string]}", _replace(source, starts, tok.start, tok.end, NAMES[tok.string]))
        elif tok.type == tokenize.NUMBER:
            text = tok.string.replace("_", "")
            try:
                value = int(text, 0)
                new = str(value - 1 if value > 0 else value + 1)
            except ValueError:
                try:
                    value = float(text)
                except ValueError:
                    continue  # complex
                if 0 < abs(value) < 1e-6:
                    continue  # a tolerance
                new = FLOATS.get(value)
                if new is None:
                    continue
            add(line, f"{tok.string} -> {new}", _replace(source, starts, tok.start, tok.end, new))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args[:2]):
            a, b = node.args[0], node.args[1]
            ta, tb = ast.get_source_segment(source, a), ast.get_source_segment(source, b)
            if ta is None or tb is None or ta == tb:
                continue
            mutated = _replace(source, starts, (b.lineno, b.col_offset), (b.end_lineno, b.end_col_offset), ta)
            mutated = _replace(mutated, _offsets(mutated), (a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset), tb)
            add(node.lineno, f"swap arguments {ta}, {tb}", mutated)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) and node.slice.id not in TYPE_NAMES:
            index = node.slice.id
            add(node.lineno, f"[{index}] -> [:len({index})]",
                _replace(source, starts, (node.slice.lineno, node.slice.col_offset),
                         (node.slice.end_lineno, node.slice.end_col_offset), f":len({index})"))
    seen: set[str] = set()
    out = []
    for line, what, mutated in found:
        if mutated not in seen:
            seen.add(mutated)
            out.append(Mutant(rel, line, what, mutated))
    return out


def checkout(ref: str, into: Path) -> None:
    """The tree of ``ref`` in ``into`` (git archive: nothing of the shared working tree is touched)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)


def run_tests(copy: Path, tests: list[str], timeout: float) -> tuple[str, float]:
    """('killed' | 'survived' | 'timeout', seconds): pytest in a forked child, the copy first on sys.path."""
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: import the package fresh from the copy
        try:
            os.chdir(copy)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            import pytest

            args = ["-q", "-x", "-p", "no:randomly", "-p", "no:cacheprovider", "-n", "0", "--no-header",
                    "-W", "ignore", *(f"--deselect={d}" for d in ()), "-k", " and ".join(
                        f"not {d.removesuffix('.py')}" for d in DESELECT), *tests]
            code = pytest.main(args)
        except BaseException:
            code = 3
        os._exit(int(code))
    deadline = t0 + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return ("survived" if code == 0 else "killed"), time.perf_counter() - t0
        if time.perf_counter() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout", time.perf_counter() - t0
        time.sleep(0.05)


def _tests_for(rel: str, copy: Path, tests: list[str]) -> list[str]:
    mine = [t for t in RELEVANT.get(Path(rel).stem, []) if (copy / t.split("::")[0]).exists()]  # a file or a test
    return mine or tests


def sample(mutants: list[Mutant], per_file: int, seed: int) -> list[Mutant]:
    """At most ``per_file`` mutants of each file, drawn at random (seeded), the named ones always."""
    out = []
    for path in dict.fromkeys(m.path for m in mutants):
        mine = [m for m in mutants if m.path == path]
        named = [m for m in mine if m.what.startswith("named:")]
        rest = [m for m in mine if not m.what.startswith("named:")]
        if per_file and len(rest) > per_file:
            rest = random.Random(f"{seed}:{path}").sample(rest, per_file)
        out += sorted(named + rest, key=lambda m: (m.line, m.what))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--ref", default="HEAD", help="the commit whose code and tests are mutated (default: HEAD)")
    ap.add_argument("--only", action="append", default=None, metavar="FILE",
                    help="only these files (a name such as ppi.py or a path), repeatable")
    ap.add_argument("--tests", nargs="+", default=list(TESTS), help="test paths (default: tests/stats tests/evaluation)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant before it counts as killed")
    ap.add_argument("--per-file", type=int, default=30,
                    help="at most this many mutants per file, drawn at random (seeded; 0: all; default 30)")
    ap.add_argument("--seed", type=int, default=56, help="the draw of --per-file (default 56)")
    ap.add_argument("--match", action="append", default=None, metavar="TEXT",
                    help="only the mutants whose name (path:line: what) contains TEXT, repeatable: re-run the "
                    "survivors of a pass after adding tests (applied before --per-file)")
    ap.add_argument("--list", action="store_true", help="list the mutants and stop")
    ap.add_argument("--keep", action="store_true", help="keep the copy (its path is printed)")
    args = ap.parse_args(argv)

    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    copy = Path(tempfile.mkdtemp(prefix="mutation-pass-"))
    try:
        checkout(args.ref, copy)
        files = sorted({p for pattern in TARGETS for p in copy.glob(pattern) if p.name != "__init__.py"})
        if args.only:
            files = [p for p in files if any(str(p.relative_to(copy)).endswith(o) for o in args.only)]
        every = [m for p in files for m in mutants_of(p, str(p.relative_to(copy)))]
        if args.match:
            every = [m for m in every if any(t in m.name() for t in args.match)]
        mutants = sample(every, args.per_file, args.seed)
        print(f"{len(mutants)} mutants (of {len(every)}; at most {args.per_file or 'all'} per file) of {len(files)} files at {args.ref} "
              f"({subprocess.run(['git', '-C', str(ROOT), 'rev-parse', '--short', args.ref], capture_output=True, text=True).stdout.strip()})",
              flush=True)
        if args.list:
            for m in mutants:
                print(" ", m.name())
            return 0
        tests = [t for t in args.tests if (copy / t).exists()]
        sys.path.insert(0, str(copy))
        # the heavy third-party imports once, in the parent; the package itself only in each child
        import numpy  # noqa: F401
        import pandas  # noqa: F401
        import pytest  # noqa: F401
        import scipy.special  # noqa: F401
        import scipy.stats  # noqa: F401
        import psycopg  # noqa: F401 - tests/conftest.py's
        import hypothesis  # noqa: F401

        verdict, seconds = run_tests(copy, tests, args.timeout * 3)
        print(f"unmutated: {verdict} ({seconds:.0f} s)", flush=True)
        if verdict != "survived":
            print("the unmutated copy must pass its tests first", file=sys.stderr)
            return 1
        results: dict[str, list[Mutant]] = {"killed": [], "survived": [], "timeout": []}
        t0 = time.perf_counter()
        for i, m in enumerate(mutants, 1):
            target = copy / m.path
            original = target.read_bytes()
            try:
                target.write_text(m.source)
                verdict, seconds = run_tests(copy, _tests_for(m.path, copy, tests), args.timeout)
            finally:
                target.write_bytes(original)
            results[verdict].append(m)
            print(f"[{i}/{len(mutants)}] {verdict:8s} {seconds:5.1f} s  {m.name()}", flush=True)
        killed = len(results["killed"]) + len(results["timeout"])
        print(f"\n{len(mutants)} mutants at {args.ref}: {killed} killed ({len(results['timeout'])} by the timeout), "
              f"{len(results['survived'])} survived; {time.perf_counter() - t0:.0f} s")
        by_file: dict[str, list[int]] = {}
        for verdict, ms in results.items():
            for m in ms:
                by_file.setdefault(m.path, [0, 0])[verdict == "survived"] += 1
        for path, (k, s) in sorted(by_file.items()):
            print(f"  {path}: {k} killed, {s} survived")
        if results["survived"]:
            print("survivors:")
            for m in results["survived"]:
                print(f"  {m.name()}")
        return 0
    finally:
        if args.keep:
            print(f"copy kept: {copy}")
        else:
            shutil.rmtree(copy, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
