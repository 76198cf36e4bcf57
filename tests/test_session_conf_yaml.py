"""session.compose_settings (what rag-exp commands and a notebook's open_retriever compose through)
turns a YAML syntax error in a project's conf/ into a ConfigError naming the file and line, not
PyYAML's ScannerError/ParserError (the CLI checks the files first; a Python caller did not)."""

from __future__ import annotations

import pytest

from rag_experiments.errors import ConfigError
from rag_experiments.session import compose_settings


@pytest.mark.parametrize("text, where, what", [
    ("defaults:\n  - config\n  - _self_\nfusion:\n  rrf_k: [30\n", "line 6, column 1",
     "expected ',' or ']', but got '<stream end>'"),
    ("defaults:\n  - config\n  - _self_\nfusion: {rrf_k: 30\n\tk: 1}\n", "line 5", "found character '\\t'"),
], ids=["parser", "scanner"])
def test_a_broken_project_yaml_is_a_config_error_naming_the_file(tmp_path, monkeypatch, text, where, what):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "project.yaml").write_text(text)
    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))
    with pytest.raises(ConfigError) as err:
        compose_settings(["fusion.rrf_k=30"])
    line = str(err.value).splitlines()[0]
    assert line.startswith(f"{tmp_path / 'conf' / 'project.yaml'} {where}"), line
    assert what in line, line
