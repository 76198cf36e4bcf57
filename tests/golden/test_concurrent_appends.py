"""Eight processes appending to one golden set at once all succeed (issue 55 probe 5): before,
a reader could see the file before another process's append and its manifest after it, and 4 of
8 concurrent `golden add` failed with "file truncated ... restore the file from git (git
checkout -- FILE)" on an intact file (the hint would have thrown the others' appends away).

Each worker reads the whole set (as `golden add` does before it appends) and appends one case,
20 times; real processes, the real file and manifest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rag_experiments.golden.golden_file import GoldenFile

from ..conftest import build_mini_golden

ROOT = Path(__file__).resolve().parents[2]
WORKERS, ROUNDS = 8, 20

WORKER = r"""
import sys
from rag_experiments.golden.golden_file import GoldenFile
path, me, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(rounds):
    g = GoldenFile(path)
    records = g.read()
    template = next(r for r in records if r["type"] == "case")
    g.append([{**template, "id": f"c-{me}-{i}", "query": f"question {me} {i}?"}])
print("ok")
"""


def test_eight_concurrent_appenders_all_succeed_and_nothing_says_truncated(tmp_path, mini_docs):
    path = build_mini_golden(tmp_path / "g.jsonl", mini_docs)
    before = len(GoldenFile(path).read())
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(path), str(w), str(ROUNDS)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(WORKERS)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert "truncated" not in err and "git checkout" not in err, err[-2000:]
        assert p.returncode == 0 and out.strip() == "ok", err[-2000:]
    records = GoldenFile(path).read()  # chain and manifest intact
    assert len(records) == before + WORKERS * ROUNDS
    assert {r["id"] for r in records} >= {f"c-{w}-{i}" for w in range(WORKERS) for i in range(ROUNDS)}
