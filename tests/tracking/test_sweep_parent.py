"""The sweep parent run carries the result: name, params, best metrics, tags, description."""

from __future__ import annotations

import json
import math

from mlflow.tracking import MlflowClient

from rag_experiments.tracking.sweep_parent import note, parent_name, sweep_spec


def test_sweep_spec_reads_command_line_sweeps_and_sweeper_params():
    spec = sweep_spec(["fusion.rrf_k=range(5,105,5)", "fusion.keyword_weight=0.5,1.0", "progress=false",
                       "experiment=rrf_sweep"], {"fusion.rrf_k": "10,30", "fusion.depth": "50,100"})
    assert spec == {"fusion.rrf_k": "range(5,105,5)", "fusion.keyword_weight": "0.5,1.0", "fusion.depth": "50,100"}
    assert parent_name({"fusion.rrf_k": "30,60,90"}, None) == "fusion.rrf_k=30,60,90"
    assert parent_name({"fusion.rrf_k": "10,30"}, "rrf_sweep") == "experiment=rrf_sweep: fusion.rrf_k=10,30"
    assert parent_name({}, None) == "sweep"


def test_the_parent_carries_the_best_child_and_the_comparison(small_sweep):
    parent_id, children, _ = small_sweep
    run = MlflowClient().get_run(parent_id)
    assert run.info.run_name == "fusion.rrf_k=10,30,60" and run.info.status == "FINISHED"
    params = run.data.params
    assert params["fusion.rrf_k"] == "10,30,60"  # the swept key with its value list
    assert params["fusion.keyword_weight"] == "1.0" and params["objective"] == "recall_at_5"  # shared config
    m = run.data.metrics
    assert m["recall_at_5"] == 0.875 and "recall_at_5.exact" in m and "recall_at_5.doc_type.config" in m
    tags = run.data.tags
    assert tags["best_run_id"] == children[1] and tags["best_run_overrides"] == "fusion.rrf_k=30"
    assert tags["mlflow.source.name"] and tags["git_commit"] and tags["children"] == "3"
    assert json.loads(tags["sweep_params"]) == {"fusion.rrf_k": "10,30,60"}
    description = tags["mlflow.note.content"]
    assert "**Best `recall_at_5` = 0.8750**: `rrf_k=30`" in description  # the table's name for it
    assert "| run | n | recall@5 |" in description and "|---|---:|" in description
    assert "<br>" not in description and "<sub>" not in description
    # the best rows come first after the baseline, so a description cut to MLflow's limit keeps them
    rows = [line for line in description.splitlines() if line.startswith("| ") and "rrf_k" in line]
    assert [r.split("|")[1].strip() for r in rows] == ["**rrf_k=10** (baseline)", "rrf_k=30", "rrf_k=60"]
    artifacts = {a.path for a in MlflowClient().list_artifacts(parent_id, "comparison")}
    assert "comparison/table.md" in artifacts


def _table(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def test_the_parents_table_equals_compare_sweep_markdown_cell_for_cell(small_sweep, capsys):
    """One comparison, one set of numbers: the parent's Overview and `rag-exp compare --sweep`
    list the same rows in the same order with the same values, intervals, deltas and p-values
    (the same resamples and seed, recorded on the parent)."""
    from .conftest import cli

    parent_id, children, _ = small_sweep
    tags = MlflowClient().get_run(parent_id).data.tags
    assert tags["paired_test.resamples"] == "10000" and tags["paired_test.seed"] == "13"
    assert tags["objective_direction"] == "maximize"
    parent_table = _table(tags["mlflow.note.content"])
    assert cli("compare", "--sweep", parent_id, "--markdown") == 0
    cli_table = _table(capsys.readouterr().out)
    assert len(parent_table) == 5  # header, rule, three points
    # the parent's table is the compact one (value and Δ; the intervals, p and MDE are in table.md)
    assert parent_table[:2] == cli_table[:2]
    for compact, full in zip(parent_table[2:], cli_table[2:]):
        for c, f in zip(compact.split(" | "), full.split(" | ")):
            value = f.split(" [")[0].strip("*")
            assert c.strip("*").startswith(value), (c, f)
            delta = f.split("Δ")[1].split(" ")[0] if "Δ" in f else None
            assert delta is None or f"Δ{delta}" in c, (c, f)
            assert ("p<" in f or "*" in f.split("Δ")[-1]) == c.endswith("\\*") or "Δ" not in f, (c, f)


def test_compare_sweep_reads_the_paired_test_settings_the_parent_recorded(make_run, make_parent, capsys,
                                                                          monkeypatch):
    import numpy as np

    from .conftest import base_config, cli, per_case_frame

    parent = make_parent("fusion.rrf_k=10,30")
    rng = np.random.default_rng(5)
    children = [make_run(per_case_frame((rng.random(120) < p).astype(float), seed=k), name=f"fusion.rrf_k={k}",
                         config=base_config(**{"fusion.rrf_k": k}), parent=parent)
                for k, p in ((10, 0.5), (30, 0.6))]  # ~60 differing cases: sampled, not enumerated
    MlflowClient().set_tag(parent, "paired_test.resamples", "50")  # what a summary with 50 resamples records
    assert cli("compare", "--sweep", parent, "--markdown") == 0
    from_parent = _table(capsys.readouterr().out)
    assert cli("compare", *children, "--markdown") == 0  # the default: 10,000
    assert _table(capsys.readouterr().out) != from_parent
    assert cli("compare", *children, "--markdown", "--resamples", "50") == 0
    assert _table(capsys.readouterr().out) == from_parent
    monkeypatch.setenv("RAG_EXP_RESAMPLES", "many")
    assert cli("compare", *children) == 2
    assert "RAG_EXP_RESAMPLES='many' is not an integer" in capsys.readouterr().err


def test_the_verdict_names_the_best_and_the_tied_points_and_bolds_the_best_cells(small_sweep):
    parent_id, children, _ = small_sweep
    run = MlflowClient().get_run(parent_id)
    description = run.data.tags["mlflow.note.content"]
    # rrf_k=10 differs from the best (rrf_k=30) on 5 of 40 cases, all lost: alone, exact p = 2/32. But the
    # best was chosen among 3 points: the pair is judged within all 3 pairs (max-T, stats.maxt). By hand:
    # group A (5 cases, i%8=4: 30 wins over 10 and 60), group B (10 cases, i%4=2: 10 and 30 win over 60);
    # with sA, sB the sums of the sign flips in each group, the pairs' statistics are |sA|/√5 (30-10),
    # |sA+sB|/√15 (30-60), |sB|/√10 (10-60); p = P(max >= √5) over the 2**15 flips = 0.0964.
    # MDE by hand: d = -1 on 5 cases, 0 on 35; sd = sqrt((5·0.875² + 35·0.125²) / 39) = 0.33493;
    # (1.95996 + 0.84162)·0.33493/√40 = 0.14837, plus the sign-test step 1/40 (every difference ±1): 0.173
    hits = sum(math.comb(5, ka) * math.comb(10, kb) for ka in range(6) for kb in range(11)
               if max(abs(2 * ka - 5) / math.sqrt(5), abs(2 * ka - 5 + 2 * kb - 10) / math.sqrt(15),
                      abs(2 * kb - 10) / math.sqrt(10)) >= math.sqrt(5) - 1e-9)
    assert f"{hits / 2 ** 15:.3f}" == "0.096"
    assert ("- recall@5: **`rrf_k=30`** 0.8750; tied: `rrf_k=10` (p=0.096, MDE 0.173); 1 significantly worse"
            in description), description
    verdict_at = description.index("Best per metric")
    assert verdict_at < description.index("| run | n |")  # above the table
    best_row = next(line for line in _table(description) if line.startswith("| rrf_k=30 "))
    assert best_row.split(" | ")[2].startswith("**0.875** Δ+0.125")  # the column's best, in bold


def test_the_parents_metrics_are_all_the_best_points_and_the_best_point_is_marked(small_sweep):
    """Every metric of the parent's row is the best point's (issue 48: its `.exact` was another
    point's), the headline ones included, and the best child carries the tag sweep.best."""
    parent_id, children, _ = small_sweep
    c = MlflowClient()
    parent = c.get_run(parent_id).data
    best = c.get_run(parent.tags["best_run_id"])
    assert best.info.run_id == children[1] and best.data.tags.get("sweep.best") == "true"
    assert [c.get_run(i).data.tags.get("sweep.best") for i in (children[0], children[2])] == [None, None]
    for name in ("recall_at_5", "recall_at_20", "mrr_at_10", "ndcg_at_10", "recall_at_5.exact",
                 "recall_at_5.paraphrase", "recall_at_5.doc_type.config"):
        assert parent.metrics[name] == best.data.metrics[name], name
    # rrf_k=10 is better on recall@20 than the best point: the parent still shows the best point's
    assert max(c.get_run(i).data.metrics["recall_at_20"] for i in children) >= parent.metrics["recall_at_20"]
    assert not any(k.startswith("best_run.") for k in parent.tags)


def test_a_long_comparison_is_cut_to_mlflows_tag_limit():
    table = "| run | x |\n|---|---:|\n" + "".join(f"| run {i} | 0.5 |\n" for i in range(2000))
    text = note("big", "recall_at_5", None, "", 2000, 0, table)
    assert len(text) <= 8000 and "| run 0 |" in text and "comparison/table.md" in text


def test_an_optuna_sweep_records_the_studys_best_value_and_params(store, make_run, tmp_path):
    """The Optuna sweeper's search space comes from hydra.sweeper.params and its best trial from
    optimization_results.yaml (written before on_multirun_end), as hydra-optuna-sweeper does."""
    import os

    from omegaconf import OmegaConf

    from rag_experiments.tracking.hydra_callback import MlflowSweepCallback
    from rag_experiments.tracking.mlflow_run import PARENT_ENV

    from .conftest import base_config, per_case_frame

    sweep_dir = tmp_path / "multirun"
    cfg = OmegaConf.create({
        "tracking": {"enabled": True, "uri": None, "experiment": "rag-experiments", "sweep_summary": False},
        "objective": "recall_at_5",
        "hydra": {"overrides": {"task": ["experiment=optuna_fusion"]},
                  "sweeper": {"_target_": "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper",
                              "direction": "maximize", "params": {"fusion.rrf_k": "range(5, 120)"}},
                  "launcher": {"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"},
                  "sweep": {"dir": str(sweep_dir)}}})
    callback = MlflowSweepCallback()
    callback.on_multirun_start(cfg)
    for k, share in ((17, 2), (88, 4)):
        make_run(per_case_frame([1.0 if i % share else 0.0 for i in range(20)]), name=f"fusion.rrf_k={k}",
                 config=base_config(**{"fusion.rrf_k": k}), parent=os.environ[PARENT_ENV])
        callback.on_job_end(cfg, None)
    (sweep_dir / "optimization_results.yaml").write_text(
        "name: optuna\nbest_params:\n  fusion.rrf_k: 88\nbest_value: 0.75\n")
    parent_id = callback.parent_id
    callback.on_multirun_end(cfg)
    run = MlflowClient().get_run(parent_id)
    assert run.info.run_name == "experiment=optuna_fusion: fusion.rrf_k=range(5, 120)"
    assert run.data.params["fusion.rrf_k"] == "range(5, 120)"
    assert run.data.metrics["optuna.best_value"] == 0.75 and run.data.metrics["recall_at_5"] == 0.75
    assert json.loads(run.data.tags["optuna.best_params"]) == {"fusion.rrf_k": 88}
    assert run.data.tags["best_run_overrides"] == "fusion.rrf_k=88"
    assert "Optuna best: `fusion.rrf_k=88` → 0.7500" in run.data.tags["mlflow.note.content"]
