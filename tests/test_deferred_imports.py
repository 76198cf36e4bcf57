"""Imports sit at the top of their module unless a measured start-up cost says otherwise (issue 46,
item 3): tools/deferred_imports.py gives every import inside a function its reason (a start-up path,
a heavy or optional package, a platform module, a conditional import) and fails on one without."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import deferred_imports  # noqa: E402 - the checker under test lives in tools/


def test_every_import_inside_a_function_has_a_reason():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "deferred_imports.py")], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "import(s) inside functions:" in done.stdout and "none" not in done.stdout.split(":", 1)[1]


def _reasons(tmp_path, monkeypatch, source: str, module: str = "rag_experiments.scratch") -> list[str]:
    """The checker's reasons for a scratch module put in a copy of the package's module table."""
    path = tmp_path / "rag_experiments" / "scratch.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    real = dict(deferred_imports.files())
    monkeypatch.setattr(deferred_imports, "files", lambda: {**real, module: path})
    deferred_imports.heavy_closure.cache_clear()
    tree = ast.parse(path.read_text())
    out = []
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        nodes = [n for n in deferred_imports._own_statements(fn) if isinstance(n, (ast.Import, ast.ImportFrom))]
        for node in sorted(nodes, key=lambda n: n.lineno):
            out.append(deferred_imports.reason(deferred_imports.Deferred(module, node, fn, node in fn.body)))
    deferred_imports.heavy_closure.cache_clear()
    return out


def test_a_cheap_import_has_no_reason_and_a_heavy_one_has(tmp_path, monkeypatch):
    reasons = _reasons(tmp_path, monkeypatch, """
        def f():
            import json
            import mlflow
            from .paths import project_root
            import torch
            try:
                import bm25s
            except ImportError:
                pass
    """)
    assert reasons[0] == ""  # stdlib: belongs at the top
    assert reasons[1].startswith("heavy (mlflow")  # 1 s to import, not loaded by the module anyway
    assert reasons[2] == ""  # the package's own, nothing heavy behind it
    assert reasons[3] == "optional"  # an extra's package
    assert reasons[4] == "conditional"  # under try: a probe


def test_a_heavy_package_the_module_loads_anyway_is_no_reason(tmp_path, monkeypatch):
    reasons = _reasons(tmp_path, monkeypatch, """
        import pandas as pd

        def f():
            import pandas
    """)
    assert reasons == [""]


def test_an_unmeasured_package_must_be_measured_first(tmp_path, monkeypatch):
    reasons = _reasons(tmp_path, monkeypatch, """
        def f():
            import some_new_package
    """)
    assert reasons[0].startswith("UNMEASURED")
