"""The champion marked wherever it is in the runs list (issue 59 item 3): after promote, the sweep
parent holding the champion (folded, its points out of view) says so in its name, the list's first
column, and in its tag; the champion's own name says it; the marks move (names restored) when another
sweep's point becomes the champion."""

from __future__ import annotations

from mlflow.tracking import MlflowClient

from rag_experiments.tracking.champion_mark import NAME_TAG, mark_champion

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
    parent_name = c.get_run(parent).data.tags[NAME_TAG]
    assert c.get_run(parent).info.run_name == f"champion inside: {parent_name}"
    assert c.get_run(best).info.run_name == "champion: fusion.rrf_k=30 progress=false"
    assert c.get_run(children[0]).info.run_name == "fusion.rrf_k=10 progress=false"
    # another sweep's point becomes the champion: the mark leaves the first parent
    other = make_parent("fusion.rrf_k=90")
    point = make_run(per_case_frame([1.0] * 40), name="fusion.rrf_k=90", parent=other)
    mark_champion(c, point)
    assert c.get_run(other).data.tags["champion"] == "holds the champion: fusion.rrf_k=90"
    assert "champion" not in c.get_run(parent).data.tags
    assert c.get_run(parent).info.run_name == parent_name and NAME_TAG not in c.get_run(parent).data.tags
    assert c.get_run(other).info.run_name == "champion inside: fusion.rrf_k=90"
    assert c.get_run(point).info.run_name == "champion: fusion.rrf_k=90"
    assert c.get_run(best).info.run_name == "fusion.rrf_k=30 progress=false"  # its name back
    assert c.get_run(best).data.tags["champion"] == "true"  # promote's own mark on a run is left alone


def test_a_replaced_stand_in_is_not_named_champion_any_more(store, make_run):
    """The record's stand-in is logged as 'champion: <retriever>'; once another run is the champion
    the list must not show two rows named champion."""
    from .conftest import per_case_frame

    stand_in = make_run(per_case_frame([1.0] * 40), name="champion: hybrid, heading-200")
    c = MlflowClient()
    mark_champion(c, stand_in)
    assert c.get_run(stand_in).info.run_name == "champion: hybrid, heading-200"  # not 'champion: champion: ...'
    new = make_run(per_case_frame([1.0] * 40), name="hybrid (heading)")
    mark_champion(c, new)
    assert c.get_run(new).info.run_name == "champion: hybrid (heading)"
    assert c.get_run(stand_in).info.run_name == "replaced champion: hybrid, heading-200"


def test_hand_over_leaves_one_run_claiming_the_title_per_model(store, make_run):
    """The previous champion and a record's stand-in (both tagged the champion of the model) say who
    replaced them; a champion of another model keeps its tag; the registry's champion without the
    model tag (an older store) is handed over when named."""
    from rag_experiments.tracking.champion_mark import champion_tags, hand_over

    from .conftest import per_case_frame

    c = MlflowClient()
    runs = {name: make_run(per_case_frame([1.0] * 40), name=name)
            for name in ("old", "stand-in", "other model", "untagged", "new")}
    for name in ("old", "stand-in"):
        for k, v in champion_tags("rag-retriever-default").items():
            c.set_tag(runs[name], k, v)
    for k, v in champion_tags("rag-retriever-fast").items():
        c.set_tag(runs["other model"], k, v)
    c.set_tag(runs["untagged"], "champion", "true")
    hand_over(c, "rag-retriever-default", runs["new"], previous=runs["untagged"])
    tags = {name: c.get_run(run_id).data.tags for name, run_id in runs.items()}
    assert tags["new"]["champion"] == "true" and tags["new"]["champion_of"] == "rag-retriever-default"
    for name in ("old", "stand-in", "untagged"):
        assert tags[name]["champion"] == "false" and tags[name]["replaced_by"] == runs["new"], name
    assert tags["other model"]["champion"] == "true" and "replaced_by" not in tags["other model"]
