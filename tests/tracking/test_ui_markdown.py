"""What MLflow's own Markdown shows (issue 48, item 2): no GitHub alerts, no raw `**` where the
registry lists versions, a sweep parent's table that reads in one screen, one name per variant."""

from __future__ import annotations

import json

from mlflow.tracking import MlflowClient

from rag_experiments.tracking.compare import run_labels
from rag_experiments.tracking.retriever_summary import long
from rag_experiments.tracking.runs import RunView
from rag_experiments.tracking.ui_links import VIEW_KEY, VIEW_TAG, runs_route, view_state

from .conftest import base_config


def _run(variant: str) -> RunView:
    from rag_experiments.tracking.mlflow_run import flatten

    return RunView(variant, variant, "FINISHED", "1", 0, {"variant": variant}, {"recall_at_5": 0.5},
                   {k: str(v) for k, v in flatten(base_config(**{"retrieval.variant": variant})).items()})


def test_a_variant_is_named_as_the_hydra_group_chooses_it_everywhere():
    """compare_variants sweeps `retrieval=hybrid,...`: the child names, the parent's Best line and
    the table rows all say `retrieval=hybrid` (the table said `variant=hybrid`)."""
    assert run_labels([_run("hybrid"), _run("vector")]) == ["retrieval=hybrid", "retrieval=vector"]


def test_a_plain_sweeps_best_line_names_the_point_as_its_table_and_verdict_do(small_sweep):
    """The Best line said `fusion.rrf_k=30` where the table and the verdict lines said `rrf_k=30`
    (issue 48 item 2): one name for the point in the parent's Overview."""
    parent_id, _, _ = small_sweep
    note = MlflowClient().get_run(parent_id).data.tags["mlflow.note.content"]
    best_line = next(line for line in note.splitlines() if line.startswith("**Best"))
    assert "`rrf_k=30`" in best_line and "fusion.rrf_k" not in best_line, best_line
    assert "- recall@5: **`rrf_k=30`**" in note
    assert any(line.startswith("| rrf_k=30 ") for line in note.splitlines())
    names = {t.strip("`*") for t in note.split() if "rrf_k=" in t and "," not in t}
    assert names == {"rrf_k=10", "rrf_k=30", "rrf_k=60"}, names  # no dotted second name anywhere


def test_the_registry_description_starts_with_plain_text():
    """The registry's version list shows a description's first line as text: no `**` there."""
    text = long(base_config(), {"golden_sha256": "a" * 64}, "recall_at_5", {"recall_at_5": 0.8}, None, "r1")
    first = text.splitlines()[0]
    assert first and "**" not in first and "hybrid" in first


def _cells(row: str) -> list[str]:
    return [c.strip().replace("\\*", "*").replace("**", "") for c in row.strip("| \n").split(" | ")]


def test_the_parents_overview_table_fits_one_screen(small_sweep):
    """The compact table (value, Δ, * when significant) of the three-point sweep: no cell over 16
    characters as rendered (so none wraps) and no row over 130 (the full table's cells run to 60
    and its rows past 300), no alert markup."""
    parent_id, _, _ = small_sweep
    note = MlflowClient().get_run(parent_id).data.tags["mlflow.note.content"]
    rows = [line for line in note.splitlines() if line.startswith("|")]
    assert len(rows) == 5 and "[!" not in note
    body = [_cells(r) for r in rows[2:]]
    widest_cell = max(len(c) for row in body for c in row[1:])
    widest_row = max(len(" ".join(row)) for row in body)
    assert widest_cell <= 16 and widest_row <= 130, (widest_cell, widest_row, rows)
    full = MlflowClient().download_artifacts(parent_id, "comparison/table.md")
    full_rows = [_cells(line) for line in open(full, encoding="utf-8") if line.startswith("| rrf_k")]
    assert max(len(c) for row in full_rows for c in row) > 40  # table.md keeps intervals, p and MDE
    print(f"compact: widest cell {widest_cell}, widest row {widest_row} characters; "
          f"full: widest cell {max(len(c) for row in full_rows for c in row)}, "
          f"widest row {max(len(' '.join(row)) for row in full_rows)}")


def test_the_experiment_carries_the_runs_lists_opening_view(small_sweep):
    """The experiment tag a printed runs link applies (viewStateShareKey): headline metrics and
    the best-point mark as columns, sorted by the objective."""
    _, _, exp_id = small_sweep
    tags = MlflowClient().get_experiment(exp_id).tags
    state = json.loads(tags[VIEW_TAG])
    assert state == json.loads(view_state())
    # the champion's mark and its value on the newest golden version first, then the headline metrics
    assert state["selectedColumns"][2:8] == ["tags.`champion`", "tags.`on_newest_golden`", "metrics.`recall_at_5`",
                                             "metrics.`recall_at_20`", "metrics.`mrr_at_10`", "metrics.`ndcg_at_10`"]
    assert "tags.`sweep.best`" in state["selectedColumns"] and state["orderByKey"] == "attributes.start_time"
    assert f"viewStateShareKey={VIEW_KEY}" in runs_route(exp_id) and "workflowType=machine_learning" in runs_route(exp_id)


def test_promotes_table_title_cuts_a_run_label_between_overrides():
    """The title cut `fusion.keyword_weight=1.` mid-token (issue 48 item 1)."""
    from rag_experiments.commands.promote import cut_label

    label = "fusion.rrf_k=5 fusion.depth=100 fusion.vector_weight=1.0 fusion.keyword_weight=1.5"
    assert cut_label(label) == "fusion.rrf_k=5 fusion.depth=100 fusion.vector_weight=1.0 …"
    assert cut_label("retrieval=hybrid") == "retrieval=hybrid"
