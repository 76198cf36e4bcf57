"""A missing extra skips its tests locally and fails them under CI=true (issue 33)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

NEEDS_MISSING = '''
import pytest

nothing = pytest.importorskip("rag_exp_no_such_extra_module")


def test_uses_it():
    assert nothing
'''

NEEDS_MISSING_INSIDE = '''
import pytest


def test_uses_it():
    pytest.importorskip("rag_exp_no_such_extra_module")
'''


def _pytest(tmp_path: Path, body: str, ci: bool) -> subprocess.CompletedProcess:
    (tmp_path / "test_needs_extra.py").write_text(body)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CI", None)
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.ci_extras_plugin",
                           str(tmp_path / "test_needs_extra.py")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_missing_extra_skips_outside_ci(tmp_path):
    for body in (NEEDS_MISSING, NEEDS_MISSING_INSIDE):
        r = _pytest(tmp_path, body, ci=False)
        assert r.returncode in (0, 5) and "1 skipped" in r.stdout, r.stdout + r.stderr  # 5: every test skipped


def test_a_missing_extra_fails_the_run_under_ci(tmp_path):
    for body in (NEEDS_MISSING, NEEDS_MISSING_INSIDE):
        r = _pytest(tmp_path, body, ci=True)
        assert r.returncode != 0, r.stdout + r.stderr
        assert "rag_exp_no_such_extra_module cannot be imported under CI=true" in r.stdout
        assert "skipped" not in r.stdout.splitlines()[-1]


def test_the_suite_installs_the_wrapper():
    import pytest

    from tests import ci_extras

    assert pytest.importorskip is ci_extras.import_or_fail_in_ci
