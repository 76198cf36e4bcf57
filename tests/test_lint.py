"""The linter `make test` runs: ruff with the checks configured in pyproject.toml ([tool.ruff.lint]:
pyflakes' unused and undefined names, redefinitions, and syntax errors) over the package, the tests
and the tools (issue 46, "Layers": a linter the build runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    ruff = Path(sys.executable).with_name("ruff")  # a test dependency, pinned in pyproject.toml
    done = subprocess.run([str(ruff), "check", "--no-cache", "--output-format", "concise", "."], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_reports_what_it_is_configured_to_find(tmp_path):
    """The configuration is live: an unused import in a file under the repository's rules is reported."""
    ruff = Path(sys.executable).with_name("ruff")
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    done = subprocess.run([str(ruff), "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad)],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 1 and "F401" in done.stdout, done.stdout + done.stderr
