"""Runs record the tree they came from: the commit, and whether tracked files differed from it;
``unknown`` where git cannot tell (never a clean tree by default). Real git repositories."""

from __future__ import annotations

import subprocess

from rag_experiments.tracking.mlflow_run import git_state


def _git(cwd, *args):
    subprocess.run(["git", "-c", "user.email=t@example.org", "-c", "user.name=t", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_outside_a_repository_both_are_unknown(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))  # /tmp/...: no repository above it
    assert git_state() == {"git_commit": "unknown", "git_dirty": "unknown"}


def test_a_repository_without_a_commit_is_unknown(tmp_path, monkeypatch):
    _git(tmp_path, "init", "-q")
    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))
    assert git_state() == {"git_commit": "unknown", "git_dirty": "unknown"}


def test_clean_then_dirty(tmp_path, monkeypatch):
    _git(tmp_path, "init", "-q")
    (tmp_path / "conf.yaml").write_text("a: 1\n")
    _git(tmp_path, "add", "conf.yaml")
    _git(tmp_path, "commit", "-q", "-m", "first")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))
    assert git_state() == {"git_commit": head, "git_dirty": "false"}
    (tmp_path / "untracked.txt").write_text("x")  # untracked files do not change what the commit runs
    assert git_state()["git_dirty"] == "false"
    (tmp_path / "conf.yaml").write_text("a: 2\n")
    assert git_state() == {"git_commit": head, "git_dirty": "true"}
