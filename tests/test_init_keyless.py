"""A team without an LLM key is shown the way in that needs none (issue 44: the must-show transcript,
/tmp/transcript44.md, "what confused me" 1).

Before: `rag-exp init` always ended with ``next: ... rag-exp golden generate -n 100`` (which stops at the
missing ANTHROPIC_API_KEY), and the project README's next steps named only the LLM judge for labels:
no `corpus show --grep`, no `golden add --kind`, no `golden label --by-hand`. This test fails on the old
code (checked against a `git archive` of the previous HEAD)."""

from __future__ import annotations

import subprocess
import sys


def test_init_without_a_key_points_to_the_keyless_steps(tmp_path, monkeypatch, capsys):
    from rag_experiments.cli import main

    monkeypatch.delenv("RAG_EXP_HOME", raising=False)
    monkeypatch.setenv("RAG_EXP_CONVERT_CACHE", str(tmp_path / "convert-cache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nSome text.\n")

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["init", "evals", "--corpus", "docs", "--name", "x"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("next: cd ") and "golden generate" not in out[-1]
    assert "rag-exp corpus show DOC --grep TEXT" in out[-1]
    assert "rag-exp golden add --kind exact|paraphrase" in out[-1]
    readme = (tmp_path / "evals" / "README.md").read_text()
    for step in ("rag-exp corpus show DOC --grep", "rag-exp golden add --kind exact",
                 "rag-exp golden add --kind paraphrase", "rag-exp golden label --by-hand --sweep PARENT_ID ",
                 "rag-exp golden label --decide RUN_A RUN_B --by-hand"):
        assert step in readme, step
    # every command the README names exists: its --help exits 0
    commands = {tuple(line.split("#")[0].split()[1:3]) for line in readme.splitlines()
                if line.startswith("rag-exp ")}
    for cmd in sorted(commands):
        sub = [w for w in cmd if not w.startswith("-")]
        r = subprocess.run([sys.executable, "-m", "rag_experiments.cli", *sub, "--help"], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, (sub, r.stderr[-300:])

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-used")  # with a key: the LLM's way, as before
    assert main(["init", "evals2", "--corpus", "docs", "--name", "y"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.endswith("rag-exp golden generate -n 100   (README.md lists the steps)")
