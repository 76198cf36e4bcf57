"""The golden set and corpus a project's configuration names, composed once and remembered
(rag_experiments.configured_paths): `golden add` and the other `golden` commands spent
1.2-1.3 s composing, twice, to learn two paths. The memo must never answer for a configuration
that changed: a YAML file, an environment variable a YAML file reads, the overrides."""

from __future__ import annotations

import pytest

from rag_experiments import configured_paths as memo
from rag_experiments import session
from rag_experiments.commands.golden import configured_corpus, configured_golden


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.delenv("RAG_EXP_HOME", raising=False)
    monkeypatch.delenv("TEAM_DOCS", raising=False)
    conf = tmp_path / "conf"
    (conf / "corpus").mkdir(parents=True)
    (conf / "golden").mkdir()
    (conf / "project.yaml").write_text("defaults:\n  - config\n  - override corpus: team\n"
                                       "  - override golden: team\n  - _self_\n")
    (conf / "corpus" / "team.yaml").write_text("path: ${oc.env:TEAM_DOCS,docs}\nname: team\n")
    (conf / "golden" / "team.yaml").write_text("path: experiments/golden/team.jsonl\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _composing(monkeypatch) -> list:
    calls = []
    real = session.compose_settings

    def counting(overrides=None):
        calls.append(list(overrides or []))
        return real(overrides)

    monkeypatch.setattr(session, "compose_settings", counting)
    return calls


def test_composed_once_then_remembered(project, monkeypatch):
    calls = _composing(monkeypatch)
    assert configured_golden([]) == str(project / "experiments" / "golden" / "team.jsonl")
    assert configured_corpus([]) == str(project / "docs")
    assert len(calls) == 1  # the second path came from the first composition
    assert (project / memo.PATHS_MEMO).is_file()
    memo.configured_paths([])
    assert len(calls) == 1
    # another override list is another configuration
    assert configured_corpus(["corpus.path=other"]) == str(project / "other")
    assert len(calls) == 2


def test_a_change_is_composed_again(project, monkeypatch):
    calls = _composing(monkeypatch)
    assert configured_corpus([]) == str(project / "docs")
    (project / "conf" / "corpus" / "team.yaml").write_text("path: ../shared-docs\nname: team\n")
    assert configured_corpus([]) == str(project.parent / "shared-docs")
    (project / "conf" / "corpus" / "team.yaml").write_text("path: ${oc.env:TEAM_DOCS,docs}\nname: team\n")
    monkeypatch.setenv("TEAM_DOCS", "/srv/docs")
    assert configured_corpus([]) == "/srv/docs"
    monkeypatch.delenv("TEAM_DOCS")
    assert configured_corpus([]) == str(project / "docs")
    assert len(calls) == 3  # the last configuration is the first one again: remembered


def test_a_bad_configuration_is_refused_and_not_remembered(project, capsys):
    from rag_experiments import cli

    (project / "conf" / "project.yaml").write_text("defaults:\n  - config\n  - override golden: nope\n  - _self_\n")
    assert cli.main(["golden", "stats"]) == 2
    assert "error: overrides : In 'config': Could not find 'golden/nope'" in capsys.readouterr().err
    assert not (project / memo.PATHS_MEMO).exists()
    (project / memo.PATHS_MEMO).parent.mkdir(exist_ok=True)
    (project / memo.PATHS_MEMO).write_text("{not json")  # a torn memo is ignored
    (project / "conf" / "project.yaml").write_text("defaults:\n  - config\n  - override golden: team\n  - _self_\n")
    (project / "conf" / "golden" / "team.yaml").write_text("path: g.jsonl\n")
    assert configured_golden([]) == str(project / "g.jsonl")
