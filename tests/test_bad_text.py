"""A query that is not text (a lone surrogate: what Python makes of an invalid UTF-8 byte on a
command line, or what a JSON ``\\udcff`` escape decodes to) is one line at every entry point
(issue 49, P5).

Before: ``rag-exp search`` and ``rag-exp triage`` ended in a ``UnicodeEncodeError`` traceback from
``sha256_text`` (the query embedding cache's key), ``rag-exp golden add`` in one from the golden
line's hash, the served model answered 500 with the traceback in its log, and a golden case whose
query held ``\\udcff`` ended ``run.py`` in a traceback. Now all of them go through
``limits.query_problem`` (the check the served model and ``golden add`` already applied for NUL and
size), so the CLI says so in one ``error:`` line (exit 2) before any database is opened, the API
raises ``UserError`` and a golden case is counted as a query that could not be searched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag_experiments.errors import UserError
from rag_experiments.limits import InputLimitError, check_query, query_problem

from .test_pipeline import MINI, ROOT, _mini_overrides, _run_py

RAG_EXP = [sys.executable, "-m", "rag_experiments.cli"]
BAD_BYTES = b"sort memory \xff"  # argv decodes it with surrogateescape: "sort memory \udcff"
BAD = BAD_BYTES.decode("utf-8", "surrogateescape")
MINI_SET = [f"corpus.path={MINI}", "corpus.name=mini", "chunking.max_tokens=60", "progress=false"]
QUOTE = "are assigned five-character error codes"  # in mini/errcodes-appendix.html
SAYS = "U+DCFF at char 12, a lone surrogate"


def _cli(project: Path, *argv: str | bytes) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAG_EXP_HOME": str(project), "PYTHONPATH": str(ROOT)}
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run([*RAG_EXP, *argv], cwd=project, env=env, capture_output=True, timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    return line


def test_the_shared_check_names_a_lone_surrogate():
    assert query_problem(BAD).startswith(f"holds {SAYS}") and "byte 0xff" in query_problem(BAD)
    assert "U+D800 at char 0" in query_problem("\ud800x") and "byte" not in query_problem("\ud800x")
    assert query_problem("sort memory \U0001F600 caf\u00e9") is None  # real characters, astral ones too
    with pytest.raises(InputLimitError, match=r"^--query: the query holds U\+DCFF"):
        check_query(BAD, "--query")


def test_rag_exp_search_refuses_it_in_one_line(project):
    proc = _cli(project, "search", BAD_BYTES, *MINI_SET, "--ingest")
    line = _one_error_line(proc)
    assert line.startswith("error: query: the query holds ") and SAYS in line and "0xff" in line


def test_rag_exp_triage_refuses_it_in_one_line(project):
    proc = _cli(project, "triage", BAD_BYTES, "--expected", "mini/errcodes-appendix.html:0-40", "--add", "no",
                *[a for s in MINI_SET for a in ("--set", s)])
    assert SAYS in _one_error_line(proc)


def test_rag_exp_golden_add_refuses_it_in_one_line(project, mini_golden):
    before = mini_golden.read_bytes()
    proc = _cli(project, "golden", "add", "--golden", str(mini_golden), "--query", BAD_BYTES,
                "--source-uri", "mini/errcodes-appendix.html", "--quote", QUOTE, *[a for s in MINI_SET for a in ("--set", s)])
    assert SAYS in _one_error_line(proc)
    assert mini_golden.read_bytes() == before


def test_the_python_api_and_the_served_model_refuse_it(project):
    from rag_experiments import Retriever
    from rag_experiments.serving.pyfunc_model import RetrieverModel
    from rag_experiments.session import open_retriever

    with Retriever.from_config(MINI_SET, ingest=True) as r:
        with pytest.raises(UserError, match=r"query\[0\]: holds U\+DCFF at char 12"):
            r.search(BAD)
        assert r.search("sort memory", k=3)  # the same retriever still answers text
        # the served model's predict, on the same retriever (its 400: test_serve's bad-input list)
        model = RetrieverModel()
        model._retriever, model._opening = r, __import__("threading").Lock()
        from mlflow.exceptions import MlflowException

        with pytest.raises(MlflowException) as err:
            model.predict(None, [BAD], params={"k": 5})
        assert SAYS in err.value.message and err.value.get_http_status_code() == 400
    session = open_retriever(MINI_SET, progress=False)
    try:
        with pytest.raises(UserError, match=r"query: the query holds U\+DCFF"):
            session.search(BAD)
    finally:
        session.close()


def test_a_golden_line_with_a_lone_surrogate_is_one_line_naming_it(project, mini_golden):
    """A line another tool wrote with ``ensure_ascii`` (the chain intact; rag-exp itself writes UTF-8,
    so it cannot write one): reading the set names the file, line and character. Before, the set
    read, and run.py searched the case and died in a traceback from ``sha256_text`` (with the query
    refused per case, it then died in MLflow's dataset logging: pyarrow cannot hold the text)."""
    from rag_experiments.golden.golden_file import GoldenFile
    from rag_experiments.golden.records import line_hash

    first = next(r for r in GoldenFile(mini_golden).read() if r["type"] == "case")
    last = mini_golden.read_text(encoding="utf-8").split("\n")[-2]
    rec = {**first, "id": "c-surrogate0001", "query": BAD, "prev": line_hash(last)}
    with open(mini_golden, "a", encoding="ascii") as fh:
        fh.write(json.dumps(rec, sort_keys=True, ensure_ascii=True, separators=(",", ":")) + "\n")
    n = len(mini_golden.read_text(encoding="utf-8").splitlines())
    proc = _run_py(project, *_mini_overrides(mini_golden, "tracking.plots=false"))
    line = _one_error_line(proc)
    assert line.startswith(f"error: {mini_golden}:{n}: field 'query' holds U+DCFF at char 12"), line
