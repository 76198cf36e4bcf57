"""A YAML syntax error in a project's conf/ is one line naming the file, line and column, exit 2,
from every entry point (rag_experiments/conf_yaml.py). Before, the first command that composed the
config printed PyYAML's traceback (found by the first-afternoon trial)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag_experiments.conf_yaml import check_conf_yaml
from rag_experiments.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
BROKEN = "defaults:\n  - config\n  - _self_\nfusion:\n  rrf_k: [30\n"


@pytest.fixture
def broken_project(tmp_path) -> Path:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "project.yaml").write_text(BROKEN)
    return tmp_path


def _expected(project: Path) -> str:
    return (f"error: {project / 'conf' / 'project.yaml'} line 6, column 1: not valid YAML: expected ',' or ']', "
            "but got '<stream end>' (while parsing a flow sequence that starts at line 5, column 10)")


@pytest.mark.parametrize("argv", [
    ["-m", "rag_experiments.cli", "run"],
    [str(ROOT / "run.py"), "fusion.rrf_k=30"],
    ["-m", "rag_experiments.cli", "golden", "stats"],
    ["-m", "rag_experiments.cli", "search", "how do I vacuum"],
    ["-m", "rag_experiments.cli", "golden", "add", "--query", "q?", "--source-uri", "x", "--quote", "y"],
    ["-m", "rag_experiments.cli", "triage", "how do I vacuum", "--expected", "x"],
], ids=["rag-exp run", "run.py", "golden stats", "search", "golden add", "triage"])
def test_a_broken_project_yaml_is_one_line_from_every_entry_point(broken_project, argv):
    env = {**os.environ, "RAG_EXP_HOME": str(broken_project), "PYTHONPATH": str(ROOT),
           "MLFLOW_TRACKING_URI": f"sqlite:///{broken_project}/mlflow.db",
           "DATABASE_URL": "postgresql://nobody@127.0.0.1:9/none"}  # never reached
    proc = subprocess.run([sys.executable, *argv], cwd=broken_project, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.startswith("error:")] == [_expected(broken_project)]


def test_every_yaml_file_under_conf_is_checked_and_valid_ones_pass(tmp_path):
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "project.yaml").write_text("defaults:\n  - config\n  - _self_\n")
    (conf / "experiment" / "mine.yml").write_text("# @package _global_\nfusion:\n  rrf_k: 30\n")
    check_conf_yaml(conf)  # valid: nothing raised
    (conf / "experiment" / "bad.yaml").write_text("a: b: c\n")
    with pytest.raises(ConfigError) as err:
        check_conf_yaml(conf)
    assert str(err.value).splitlines()[0] == (f"{conf / 'experiment' / 'bad.yaml'} line 1, column 5: not valid YAML: "
                                              "mapping values are not allowed here")
    check_conf_yaml(tmp_path / "absent")  # no conf/: nothing to check
