"""Import graph check for the package: no cycle, no module importing another's private name.

    python tools/import_check.py        # exit 1 and print what it found

Edges are every ``import`` a module runs, function-level ones included (not those under
``if TYPE_CHECKING:``, which never run: annotations only). A private import is
``from m import _name`` or ``m._name`` where ``m`` is another package module.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = "rag_experiments"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(mod: str, node: ast.ImportFrom, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".")[: len(mod.split(".")) - node.level + (1 if is_pkg else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def scan() -> tuple[dict[str, set[str]], list[str]]:
    files = {module_name(p): p for p in (ROOT / PKG).rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    private: list[str] = []
    for mod, path in files.items():
        aliases: dict[str, str] = {}  # local name -> package module it is bound to
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):  # annotation-only imports never run: not an edge
            if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
                node.body = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in files:
                        graph[mod].add(a.name)
                        aliases[a.asname or a.name] = a.name
            elif isinstance(node, ast.ImportFrom):
                target = resolve(mod, node, path.name == "__init__.py")
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    if sub in files:  # from package import module
                        graph[mod].add(sub)
                        aliases[a.asname or a.name] = sub
                    elif target in files:
                        graph[mod].add(target)
                        if a.name.startswith("_") and not a.name.startswith("__") and target != mod:
                            private.append(f"{mod}: from {target} import {a.name}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and aliases.get(node.value.id, mod) != mod):
                private.append(f"{mod}: {aliases[node.value.id]}.{node.attr}")
    for m in graph:
        graph[m].discard(m)
        graph[m] = {t for t in graph[m] if not m.startswith(t + ".")}  # a module needs its package
    return graph, private


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state, stack = [], {}, []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                found.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return found


def main() -> int:
    graph, private = scan()
    cyc = cycles(graph)
    print(f"{len(graph)} modules, {sum(map(len, graph.values()))} import edges (function-level included)")
    for c in cyc:
        print("cycle: " + " -> ".join(c))
    for p in private:
        print("private import: " + p)
    print(f"{len(cyc)} cycle(s), {len(private)} private import(s)")
    return 1 if cyc or private else 0


if __name__ == "__main__":
    sys.exit(main())
