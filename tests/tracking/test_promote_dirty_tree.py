"""`rag-exp promote` refuses a run logged from a dirty git tree unless --force (issue 12).

A champion record says it "reproduces run X": that is only true when X's commit and config give
back its code, i.e. when the tree was clean (tag ``git_dirty=false``) at the time.
"""

from __future__ import annotations

import numpy as np
from mlflow.tracking import MlflowClient

from .conftest import cli, per_case_frame

KINDS = ["paraphrase"] * 40 + ["exact"] * 20


def _run(make_run, dirty: str) -> str:
    v = np.zeros(60)
    v[:30] = 1
    v[40:55] = 1
    return make_run(per_case_frame(v, kinds=KINDS), name="r",
                    tags={"git_dirty": dirty, "git_commit": "0123456789abcdef"})


def test_dirty_tree_run_is_refused_without_force(store, make_run, capsys):
    root, _ = store
    rid = _run(make_run, "true")
    assert cli("promote", "--metric", "recall_at_5") == 1
    out = capsys.readouterr().out
    assert "REFUSED" in out and "git_dirty=true" in out and "no champion yet" not in out
    assert "champion" not in MlflowClient().get_run(rid).data.tags
    assert not (root / "experiments" / "promoted" / "default.yaml").exists()


def test_dirty_tree_run_with_force_is_promoted_and_tagged(store, make_run, capsys):
    root, _ = store
    rid = _run(make_run, "true")
    assert cli("promote", "--metric", "recall_at_5", "--force") == 0
    out = capsys.readouterr().out
    assert "FORCED" in out and "git_dirty=true" in out
    tags = MlflowClient().get_run(rid).data.tags
    assert tags["champion"] == "true" and tags["promoted_forced"] == "true" and tags["promoted_dirty_tree"] == "true"
    preset = (root / "conf" / "experiment" / "promoted.yaml").read_text()
    assert "DIRTY git tree" in preset and "reproduces run" not in preset


def test_clean_tree_run_is_promoted(store, make_run, capsys):
    rid = _run(make_run, "false")
    assert cli("promote", "--metric", "recall_at_5") == 0
    assert MlflowClient().get_run(rid).data.tags.get("promoted_dirty_tree") is None
