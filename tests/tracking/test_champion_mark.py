"""The champion marked wherever it is in the runs list (issue 59 item 3): after promote, the sweep
parent holding the champion (folded, its points out of view) says so in the list's first column,
and the mark moves when another sweep's point becomes the champion."""

from __future__ import annotations

from mlflow.tracking import MlflowClient

from rag_experiments.tracking.champion_newest import mark_champion

from .conftest import cli


def test_the_sweep_parent_holding_the_champion_is_marked_and_the_mark_moves(small_sweep, make_parent, make_run):
    from .conftest import per_case_frame

    parent, children, _ = small_sweep
    assert cli("promote", "--sweep", parent) == 0
    c = MlflowClient()
    best = children[1]
    assert c.get_run(best).data.tags["champion"] == "true"
    assert c.get_run(parent).data.tags["champion"] == "holds the champion: fusion.rrf_k=30 progress=false"
    assert "champion" not in c.get_run(children[0]).data.tags
    # another sweep's point becomes the champion: the mark leaves the first parent
    other = make_parent("fusion.rrf_k=90")
    point = make_run(per_case_frame([1.0] * 40), name="fusion.rrf_k=90", parent=other)
    mark_champion(c, point)
    assert c.get_run(other).data.tags["champion"] == "holds the champion: fusion.rrf_k=90"
    assert "champion" not in c.get_run(parent).data.tags
    assert c.get_run(best).data.tags["champion"] == "true"  # promote's own mark on a run is left alone
