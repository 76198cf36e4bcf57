"""Every command that takes overrides checks them as run.py does: one ``error:`` line, exit 2, no
traceback, no secret (issue 33).

Before: ``rag-exp search "q" fusion.rrf_k=abc``, ``rag-exp search "q" retrieval=nosuch``,
``rag-exp ingest --set fusion.rrf_k=abc``, ``rag-exp triage ... --set retrieval=nosuch`` and
``rag-exp golden add ... --set fusion.rrf_k=abc`` printed 60-95-line tracebacks (exit 1);
``run.py fusion.rrf_k=abc`` printed Hydra's five-line message (exit 1); a mis-quoted ``db.url``
override printed its password inside Hydra's ``mismatched input ''S3cret PW2''``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RAG_EXP = [sys.executable, "-m", "rag_experiments.cli"]
RUN_PY = [sys.executable, str(ROOT / "run.py")]
SECRET = "S3cret PW2"
MISQUOTED = "db.url='host=/tmp user=postgres password=''S3cret PW2'' dbname=rag'"

WRONG_TYPE = "error: fusion.rrf_k: Value 'abc' of type 'str' could not be converted to Integer"
NO_OPTION = "error: retrieval=nosuch: no such option (options of retrieval: bm25s, external, http, hybrid, hybrid_rerank, keyword, stored, vector)"

CASES = [
    (RUN_PY + ["fusion.rrf_k=abc"], WRONG_TYPE),
    (RUN_PY + ["-m", "fusion.rrf_k=30,abc"], WRONG_TYPE),
    (RUN_PY + ["-m", "fusion.rrf_k=30,'abc d'"], "error: fusion.rrf_k: Value 'abc d' of type 'str' could not be converted to Integer"),  # a quoted sweep element
    (RUN_PY + ["retrieval=nosuch"], NO_OPTION),
    (RUN_PY + ["-m", "retrieval=hybrid,nosuch"], NO_OPTION),
    (RAG_EXP + ["search", "q", "fusion.rrf_k=abc"], WRONG_TYPE),
    (RAG_EXP + ["search", "q", "retrieval=nosuch"], NO_OPTION),
    (RAG_EXP + ["ingest", "--set", "fusion.rrf_k=abc"], WRONG_TYPE),
    (RAG_EXP + ["triage", "q", "--expected", "x", "--set", "retrieval=nosuch"], NO_OPTION),
    (RAG_EXP + ["golden", "add", "--query", "q", "--source-uri", "sql-select.md", "--quote", "x",
                "--set", "fusion.rrf_k=abc"], WRONG_TYPE),
    (RAG_EXP + ["search", "q", "eval.ks=[5,x]"], "error: eval.ks: Value 'x' of type 'str' could not be converted"),
]


def _run(argv: list[str], tmp_path: Path, **env) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "RAG_EXP_HOME": str(tmp_path), "PYTHONPATH": str(ROOT), **env}
    full_env.pop("HYDRA_FULL_ERROR", None)
    full_env.update(env)
    return subprocess.run(argv, cwd=tmp_path, env=full_env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("argv, first_line", CASES, ids=[" ".join(a[1:])[-60:] for a, _ in CASES])
def test_a_bad_override_is_one_line_and_exit_2(argv, first_line, tmp_path):
    proc = _run(argv, tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [first_line] or (len(errors) == 1 and errors[0].startswith(first_line)), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "mlruns" / "mlflow.db").exists()  # nothing was logged


@pytest.mark.parametrize("argv", [
    RUN_PY + [MISQUOTED],
    RAG_EXP + ["triage", "q", "--expected", "x", "--set", MISQUOTED],
    RAG_EXP + ["search", "q", MISQUOTED],
], ids=["run.py", "triage --set", "search"])
@pytest.mark.parametrize("full_error", [False, True], ids=["plain", "HYDRA_FULL_ERROR=1"])
def test_a_password_never_reaches_the_output_when_its_override_cannot_be_parsed(argv, full_error, tmp_path):
    proc = _run(argv, tmp_path, **({"HYDRA_FULL_ERROR": "1"} if full_error else {}))
    assert proc.returncode != 0
    both = proc.stdout + proc.stderr
    for fragment in (SECRET, "S3cret"):
        assert fragment not in both, both[-3000:]
    assert "cannot be parsed" in both or "mismatched input" in both
