"""eval.bootstrap_samples has an upper bound in the schema (issue 55 probe 3): 10^9 tried to
allocate 1.67 TiB (an index matrix of cases x samples) and ended in a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag_experiments.errors import ConfigError
from rag_experiments.evaluation.evaluate import EvalParams

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("samples", [10_001, 1_000_000_000, -1])
def test_the_schema_refuses_a_bootstrap_it_cannot_hold(samples):
    with pytest.raises(ConfigError, match=r"eval.bootstrap_samples: must be in 0..10000"):
        EvalParams(bootstrap_samples=samples)
    assert EvalParams(bootstrap_samples=10_000).bootstrap_samples == 10_000


def test_run_py_says_it_in_one_line_before_any_work(tmp_path):
    env = {**os.environ, "RAG_EXP_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "eval.bootstrap_samples=1000000000"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: eval.bootstrap_samples: must be in 0..10000, got 1000000000"
