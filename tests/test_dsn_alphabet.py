"""A password of any alphabet a user can type into a connection URL leaves no fragment behind
(issue 55 item 4): unencoded ``@ : / % ? #`` and non-ASCII letters.

libpq cuts such a password at the first separator and reads the rest as the host, port or
database, then quotes that in its error (``failed to resolve host 'ssW0rd@127.0.0.1'``). The
generated test draws passwords from letters that appear in none of our messages (X Z J K W
and four non-ASCII letters) mixed with every separator, so "no fragment survives" is simply "no
such letter appears in the output". Unit level: 400 generated passwords through redact_dsn,
redact_text, redact_obj (what MLflow params and tags get) and a real connection attempt. End
to end: ingest, search, run.py and --debug with one such password, and a run.py run that
connects (the embedded server trusts its socket) whose MLflow store and Hydra outputs are
searched for every fragment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_experiments import redaction
from rag_experiments.db.connect import connect
from rag_experiments.errors import DatabaseError

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "tests" / "fixtures" / "mini_corpus"
LETTERS = "XZJKWäß漢€"  # none of them occurs in a connection error, a hint or a masked URL
SEPARATORS = "@:/%?#"
GENERATED = 400

passwords = st.text(alphabet=LETTERS + SEPARATORS, min_size=1, max_size=16).filter(
    lambda pw: any(c in LETTERS for c in pw))


def _leaked(text: str) -> str:
    return "".join(c for c in text if c in LETTERS)


@settings(max_examples=GENERATED, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(pw=passwords)
def test_no_fragment_of_any_password_survives(pw):
    redaction._known.clear()  # each password on its own: nothing learned from an earlier one
    url = f"postgresql://u:{pw}@127.0.0.1:1/db"
    assert redaction.redact_dsn(url) == "postgresql://u:***@127.0.0.1:1/db"
    said = redaction.redact_text(f"overrides: db.url='{url}' run_name=try {url}")
    assert not _leaked(said), said
    params = redaction.redact_obj({"db": {"url": url}, "run_name": f"try {url}"})  # MLflow params, tags
    assert not _leaked(str(params)), params
    with pytest.raises(DatabaseError) as err:
        connect(url)
    message = f"{err.value}\n{getattr(err.value, 'hint', '')}"
    assert not _leaked(message), message
    assert "cannot connect" in message


def test_a_misread_password_is_named_with_what_to_do():
    with pytest.raises(DatabaseError) as err:
        connect("postgresql://u:p@ssW0rdAtSign99@127.0.0.1:1/db")
    assert "ssW0rdAtSign99" not in str(err.value)
    assert "'@' unencoded" in str(err.value) and "%40" in str(err.value.hint)
    # an encoded password and a query-string '@' are read as meant: no such line
    assert redaction.misread_password("postgresql://u:p%40ss@127.0.0.1/db") == ""
    assert redaction.misread_password("postgresql://h:5432/db?application_name=a@b") == ""


NASTY = "XZ@JK/W:ä%ß?漢#€W"


def _env(project: Path, url: str) -> dict:
    return {**os.environ, "RAG_EXP_HOME": str(project), "PYTHONPATH": str(ROOT), "DATABASE_URL": url}


def _mini(golden: Path) -> list[str]:
    return [f"corpus.path={MINI}", "corpus.name=mini", f"golden.path={golden}", "chunking.max_tokens=60",
            "progress=false", "eval.bootstrap_samples=50", "tracking.plots=false"]


def test_every_command_keeps_a_nasty_password_out_of_its_output(project, mini_golden):
    """ingest (with --debug: the traceback too), search, and run.py (HYDRA_FULL_ERROR: Hydra's
    traceback), all at once: each starts Python and the package, which is most of its time."""
    url = f"postgresql://u:{NASTY}@127.0.0.1:1/db"
    cli = [sys.executable, "-m", "rag_experiments.cli"]
    runs = {
        "--debug ingest": cli + ["--debug", "ingest", "--set", f"corpus.path={MINI}"],
        "search": cli + ["search", "sort memory", f"db.url='{url}'"],
        "run.py": [sys.executable, str(ROOT / "run.py"), f"db.url='{url}'", *_mini(mini_golden)],
    }
    env = {**_env(project, url), "HYDRA_FULL_ERROR": "1"}
    procs = {name: subprocess.Popen(argv, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True) for name, argv in runs.items()}
    for name, proc in procs.items():
        out = proc.communicate(timeout=300)[0]
        assert proc.returncode != 0 and "cannot connect" in out, (name, out[-2000:])
        assert not _leaked(out), (name, out[-2000:])
