"""Unknown config keys are rejected with one line naming the key, `+` appends included.

Regression for issue 12: Hydra's own hint for the typo ``fusion.rrfk=3`` is ``+fusion.rrfk=3``,
which ran with rrf_k still 60, logged a param ``fusion.rrfk=3`` and exited 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag_experiments.config import check_override_keys, settings_from_cfg
from rag_experiments.errors import ConfigError
from tests.test_config import CONF, _compose

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("override, message", [
    ("+fusion.rrfk=3", "fusion.rrfk: unknown key (fusion has no 'rrfk'; did you mean fusion.rrf_k?)"),
    ("++fusion.rrfk=3", "fusion.rrfk: unknown key"),
    ("+retrieval.hnsw.efsearch=80", "retrieval.hnsw.efsearch: unknown key"),
    ("+objectiv=ndcg_at_10", "objectiv: unknown key"),
    ("+eval.k=5", "eval.k: unknown key"),
])
def test_appended_unknown_keys_are_rejected(override, message):
    with pytest.raises(ConfigError) as err:
        settings_from_cfg(_compose([override]))
    assert message in str(err.value)


def test_known_keys_still_compose():
    s = settings_from_cfg(_compose(["fusion.rrf_k=3", "retrieval.hnsw.ef_search=80", "retrieval=keyword"]))
    assert s.fusion.rrf_k == 3


@pytest.mark.parametrize("args", [["fusion.rrfk=3"], ["-m", "fusion.rrfk=3,4"], ["retrieval.filter.doc_types=[a]"]])
def test_plain_overrides_of_unknown_keys_are_rejected_before_hydra(args):
    with pytest.raises(ConfigError, match="unknown key"):
        check_override_keys([a for a in args if not a.startswith("-")], CONF)


@pytest.mark.parametrize("args", [["experiment=rrf_sweep"], ["hydra/launcher=joblib", "hydra.job.chdir=false"],
                                  ["-m", "retrieval=vector,keyword", "fusion.rrf_k=30,60"],
                                  ["db.url='postgresql://u:p@/db?host=/tmp'"]])
def test_groups_and_hydra_keys_pass_the_early_check(args):
    check_override_keys([a for a in args if not a.startswith("-")], CONF)


@pytest.mark.parametrize("override", ["+fusion.rrfk=3", "fusion.rrfk=3"])
def test_run_py_says_one_line_and_exits_2_before_any_run(tmp_path, override):
    db = tmp_path / "mlflow.db"
    env = {**os.environ, "RAG_EXP_HOME": str(tmp_path)}
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), override, f"tracking.uri=sqlite:///{db}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == ["error: fusion.rrfk: unknown key (fusion has no 'rrfk'; did you mean fusion.rrf_k?)"]
    assert not db.exists() and not (tmp_path / "mlruns").exists()


@pytest.mark.parametrize("name", ["bogus", "st:", "minilm"])
def test_an_unknown_embedder_is_rejected_with_the_config(name):
    """Sibling: the embedder name was only checked when the model loaded, so a sweep point with a
    bad name started the sweep, then failed as a FAILED child."""
    with pytest.raises(ConfigError, match="embedding.name: unknown embedder"):
        settings_from_cfg(_compose([f"embedding.name={name}"]))


def test_a_group_option_a_preset_overrides_is_said_naming_the_keys(tmp_path, capsys):
    """`experiment=promoted retrieval=keyword` ran hybrid without a word: the preset's own retrieval.variant
    wins over a group's option (Hydra applies the preset after the groups). A warning line now names the
    key the preset keeps and the override that sets it; the run goes on (a preset's value is often the one
    wanted: experiment=cranfield fusion=convex keeps Cranfield's fusion.depth)."""
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "pinned.yaml").write_text("# @package _global_\nretrieval:\n  variant: hybrid\n")
    (tmp_path / "experiment" / "free.yaml").write_text("# @package _global_\nfusion:\n  rrf_k: 30\n")
    dirs = [tmp_path, CONF]
    check_override_keys(["experiment=pinned", "retrieval=keyword"], dirs)
    assert capsys.readouterr().err.strip() == (
        "warning: retrieval=keyword: experiment=pinned sets retrieval.variant=hybrid itself, and a preset's own keys "
        "win over a group's option, so the run keeps it; to use retrieval=keyword's, set retrieval.variant=keyword")
    check_override_keys(["+experiment=pinned", "retrieval=hybrid,vector"], dirs)  # every option of a sweep
    err = capsys.readouterr().err
    assert "retrieval=vector: experiment=pinned" in err and "retrieval=hybrid:" not in err  # hybrid loses nothing
    for quiet in (["experiment=pinned", "retrieval.variant=keyword"], ["experiment=free", "retrieval=keyword"],
                  ["retrieval=keyword"]):
        check_override_keys(quiet, dirs)
        assert capsys.readouterr().err == "", quiet


def test_the_preset_warning_masks_a_secret_value(tmp_path, capsys):
    """The warning quotes the preset's and the option's values: a password in one is masked."""
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "pinned.yaml").write_text(
        "# @package _global_\ndb:\n  url: postgresql://u:hunter2@h/db\n")
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "mine.yaml").write_text("url: postgresql://u:s3cret@h2/db\n")
    check_override_keys(["experiment=pinned", "db=mine"], [tmp_path, CONF])
    err = capsys.readouterr().err
    assert err.startswith("warning: db=mine: experiment=pinned sets db.url=") and "hunter2" not in err
    assert "s3cret" not in err
