"""Ctrl-C during an ingest (issue 58 item 2): a real ``rag-exp ingest`` subprocess gets SIGINT while
it embeds, exits 130, and its last line says what is kept and that re-running resumes; the texts
it embedded before the stop are in the embedding cache (what the resume reads)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psycopg

from tests.conftest import FIXTURES

MINI = FIXTURES / "mini_corpus"


def test_sigint_while_embedding_says_what_is_kept_and_that_rerunning_resumes(project, fresh_db_url):
    env = {**os.environ, "RAG_EXP_HOME": str(project), "DATABASE_URL": fresh_db_url, "PYTHONUNBUFFERED": "1"}
    # a corpus name of its own: no other test's strategy or cached vector makes this one a no-op
    argv = [sys.executable, "-m", "rag_experiments.cli", "ingest", "--set", f"corpus.path={MINI}",
            "--set", "corpus.name=mini-interrupted", "--set", "chunking.max_tokens=48"]
    proc = subprocess.Popen(argv, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:  # the plan line ends with a newline; the bar after it does not
        seen.append(line)
        if line.startswith("embedding"):
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    lines = [x for x in (("".join(seen) + err).replace("\r", "\n")).splitlines() if x.strip()]
    assert proc.returncode == 130, "".join(seen) + err
    last = lines[-1]
    assert last.startswith("interrupted while embedding of heading-"), last
    assert "kept in the embedding cache" in last and "run the same command again to resume" in last, last
    assert "Traceback" not in err
    with psycopg.connect(fresh_db_url) as conn:  # nothing of the strategy was written
        assert conn.execute("SELECT count(*) FROM strategies WHERE corpus = 'mini-interrupted'").fetchone()[0] == 0
