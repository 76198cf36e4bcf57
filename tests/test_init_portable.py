"""A project made by ``rag-exp init`` works anywhere (issue 44, item 7).

One team's afternoon, then its nightly job on a runner: the documents checked (``corpus convert``)
before the project exists, ``init`` with the corpus inside the project, hand-written cases, a run and
a promotion, a commit; then a fresh ``git clone`` elsewhere with the original folder gone, and the
steps of the generated ``.github/workflows/nightly.yml`` run from the clone as GitHub Actions would
run them (``run:`` scripts in bash, ``$GITHUB_ENV`` and ``$GITHUB_STEP_SUMMARY`` files, the
DATABASE_URL secret set; the step that pip-installs the tool is the one left out: it is installed).

Before: init wrote the corpus path absolute (the clone's run looked for the documents in the
original folder), the champion was registered as ``rag-retriever-default``, and the conversion cache
was made in whatever folder the shell was in (the project's sub-folder converted again).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import FIXTURES, build_mini_golden

HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>Ranking Search Results</title></head><body>
<h1>Ranking Search Results</h1>
<p>Ranking attempts to measure how relevant documents are to a particular query. The functions ts_rank and
ts_rank_cd take into account lexical, proximity, and structural information.</p>
</body></html>
"""


def _env(**extra: str) -> dict[str, str]:
    """A team's shell: none of this repository's settings, this venv's `rag-exp` first on PATH."""
    drop = ("RAG_EXP_HOME", "MLFLOW_TRACKING_URI", "PYTHONPATH", "RAG_EXP_CONVERT_CACHE", "DATABASE_URL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", **extra)
    return env


TIMES: list[tuple[str, float]] = []


def _sh(cmd: list[str] | str, cwd: Path, env: dict[str, str]) -> str:
    import time

    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                          shell=isinstance(cmd, str), executable="/bin/bash" if isinstance(cmd, str) else None)
    TIMES.append((cmd.splitlines()[-1] if isinstance(cmd, str) else " ".join(cmd[:2]), time.monotonic() - t0))
    assert done.returncode == 0, f"{cmd}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return " ".join((done.stdout + done.stderr).split())


def run_workflow(workflow: Path, cwd: Path, env: dict[str, str], secrets: dict[str, str], tmp: Path) -> dict:
    """Each step of the job that has a ``run:`` script, as a runner runs it (bash, the step's env with
    ``${{ secrets.X }}`` filled in, lines appended to $GITHUB_ENV exported to the steps after it); the
    install step is skipped. Returns {step name: its output}."""
    job = next(iter(yaml.safe_load(workflow.read_text())["jobs"].values()))
    github_env, summary = tmp / "github_env", tmp / "step_summary.md"
    github_env.write_text("")
    env = {**env, "GITHUB_ENV": str(github_env), "GITHUB_STEP_SUMMARY": str(summary)}
    outputs = {}
    for step in job["steps"]:
        if "run" not in step or "pip install" in step["run"]:
            continue
        step_env = {k: re.sub(r"\$\{\{\s*secrets\.(\w+)\s*\}\}", lambda m: secrets.get(m.group(1), ""), str(v))
                    for k, v in (step.get("env") or {}).items()}
        outputs[step["name"]] = _sh(f"set -eo pipefail\n{step['run']}", cwd, {**env, **step_env})
        env.update(line.split("=", 1) for line in github_env.read_text().splitlines() if "=" in line)
    outputs["summary"] = summary.read_text()
    return outputs


def test_init_project_passes_its_nightly_workflow_from_a_fresh_clone(tmp_path, pg_url):
    from rag_experiments.corpus.loader import load_corpus

    work = tmp_path / "work"
    project = work / "evals"
    docs = project / "docs"  # the documents kept in the project's repository
    docs.mkdir(parents=True)
    for f in (FIXTURES / "mini_corpus").glob("*.md"):
        shutil.copy(f, docs / f.name)
    (docs / "ranking.html").write_text(HTML)  # a converted format: it goes through the conversion cache
    env = _env(DATABASE_URL=pg_url)

    # the documents checked before the project exists (the tutorial's order), then init beside them
    _sh(["rag-exp", "corpus", "convert", "evals/docs"], work, env)
    assert list((work / ".rag-exp" / "convert-cache").rglob("*.json"))
    out = _sh(["rag-exp", "init", "evals", "--add", "--corpus", "evals/docs", "--name", "portable"], work, env)
    assert "copied 1 conversion(s) of the corpus" in out, out
    assert "path: docs\n" in (project / "conf" / "corpus" / "portable.yaml").read_text()  # before: absolute
    # from a sub-folder of the project: its cache, no new one where the shell is (before: converted again)
    out = _sh(["rag-exp", "corpus", "convert", "."], docs, env)
    assert "0 files run through a converter now, 1 answered from the conversion cache" in out, out
    assert not (docs / ".rag-exp").exists()

    # hand-written cases, a run, the champion under the project's name
    golden = project / "experiments" / "golden" / "portable.jsonl"
    build_mini_golden(golden, load_corpus(docs, "portable"))
    _sh(["rag-exp", "run", "eval.bootstrap_samples=0", "tracking.plots=false", "progress=false"], project, env)
    out = _sh(["rag-exp", "promote"], project, env)
    assert "as rag-retriever-portable version 1, alias champion" in out, out  # before: rag-retriever-default
    promoted = (project / "conf" / "experiment" / "promoted.yaml").read_text()
    assert "  path: docs\n" in promoted and str(tmp_path) not in promoted  # nothing ties it to this machine

    git = ["git", "-c", "user.name=team", "-c", "user.email=team@example.org"]
    _sh(git + ["init", "-q", "-b", "main"], project, env)
    _sh(git + ["add", "."], project, env)
    _sh(git + ["commit", "-q", "-m", "retrieval evals"], project, env)
    tracked = _sh(["git", "ls-files"], project, env).split()
    assert "experiments/promoted/portable.record.json" in tracked and not any(
        p.startswith((".rag-exp/", "mlruns/mlflow")) for p in tracked)

    # the runner: a fresh clone somewhere else, the team's machine out of reach
    clone = tmp_path / "runner" / "checkout"
    _sh(["git", "clone", "-q", str(project), str(clone)], tmp_path, env)
    project.rename(work / "gone")
    outputs = run_workflow(clone / ".github" / "workflows" / "nightly.yml", clone, _env(),
                           {"DATABASE_URL": pg_url}, tmp_path)
    gate = outputs["Gate the promoted config against the champion"]
    assert "gate PASS" in gate, gate
    assert "## Retrieval gate: ✅ PASS" in outputs["summary"] and "rag-retriever-portable" in outputs["summary"]
    assert "Objective over time" in outputs
    assert list((clone / ".rag-exp" / "convert-cache").rglob("*.json"))  # the clone's own cache, in the clone
    print("seconds per command: " + ", ".join(f"{c} {t:.1f}" for c, t in TIMES if t > 0.5))  # with -s / -rP


def test_init_writes_the_corpus_path_relative_unless_it_cannot_be(tmp_path, monkeypatch, capsys):
    from rag_experiments.cli import main

    monkeypatch.delenv("RAG_EXP_HOME", raising=False)
    monkeypatch.setenv("RAG_EXP_CONVERT_CACHE", str(tmp_path / "convert-cache"))
    monkeypatch.chdir(tmp_path)
    for folder in ("team/our-docs", "elsewhere/deep/docs"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "a.md").write_text("# A\n\nSome text.\n")

    def corpus_line(project: str, corpus: str, *more: str) -> tuple[str, str]:
        assert main(["init", project, "--corpus", corpus, "--name", "x", *more]) == 0
        out = " ".join(capsys.readouterr().out.split())
        return (tmp_path / project / "conf" / "corpus" / "x.yaml").read_text().splitlines()[1], out

    line, out = corpus_line("team/evals", "team/our-docs")  # beside the project: before, absolute
    assert line == "path: ../our-docs" and "note: the corpus lies beside the project (../our-docs)" in out
    line, out = corpus_line("team/evals2", "elsewhere/deep/docs")  # neither in nor beside: absolute, said
    assert line == f"path: {tmp_path / 'elsewhere/deep/docs'}" and "note: corpus path written absolute" in out
    shutil.copytree(tmp_path / "team/our-docs", tmp_path / "team/evals3/docs")
    line, out = corpus_line("team/evals3", "team/evals3/docs", "--add")  # inside: relative, as before
    assert line == "path: docs" and "note:" not in out
