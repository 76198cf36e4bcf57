"""The package's import graph has no cycle and no private import (issue 49, item 7: the runtime cycle
``llm -> llm_openai -> llm`` is gone; tools/import_check.py found it, but nothing ran the checker)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_graph_has_no_cycle():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "import_check.py")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 cycle(s), 0 private import(s)" in done.stdout
