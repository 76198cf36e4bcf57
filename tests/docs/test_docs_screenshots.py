"""tools/docs_screenshots.py (issue 48's docs before/after): it builds this checkout's site and shoots
the two pages in Debian's Chromium; the built configuration reference has no literal escapes.
Outside CI a missing Chromium skips; in CI (CI=true) it fails, as the other browser tests do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_screenshots_tool_shoots_both_pages_of_this_checkout(tmp_path):
    if not Path("/usr/bin/chromium").exists():
        if os.environ.get("CI") == "true":
            pytest.fail("browser test cannot run in CI: /usr/bin/chromium is missing")
        pytest.skip("/usr/bin/chromium is missing (apt-get install -y chromium)")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "docs_screenshots.py"), "--tree", str(ROOT),
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reference/config/: \\| 0, &gt; in code 0" in done.stdout, done.stdout
    for name in ("6-docs-config-reference.png", "7-docs-demo-numbers.png"):
        png = tmp_path / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000, name


def test_a_tree_without_mkdocs_yml_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "docs_screenshots.py"), "--tree", str(tmp_path),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"error: --tree {tmp_path.resolve()}: no mkdocs.yml there (a checkout of this repository?)"]
