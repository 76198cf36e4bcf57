"""The layer order of the package, as an import-linter contract (.importlinter at the repository
root): each layer imports only the layers below it; the imports that run against the order today
are listed there as ignored, one line each (issue 46, "Layers")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_layers_contract_is_kept():
    lint = Path(sys.executable).with_name("lint-imports")  # import-linter, a test dependency
    done = subprocess.run([str(lint), "--config", str(ROOT / ".importlinter"), "--no-cache"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 1 kept, 0 broken." in done.stdout
