"""A sweep on a golden set with a frozen split: the parent, compare --sweep and promote --sweep choose
the best point on dev and report it on test, saying which side each number is from; without a split
they say once that the winner's value is optimistic."""

from __future__ import annotations

import os

import numpy as np
from mlflow.tracking import MlflowClient

from rag_experiments.golden import GoldenFile
from rag_experiments.golden.split import DEV, current_split, freeze
from rag_experiments.promotion import promote

from .conftest import base_config, cli, per_case_frame

TEXT = "The work_mem setting bounds the memory of each sort or hash operation."
N = 40


def _golden(root, split: bool, name: str) -> str:
    """The golden file the runs' golden.path names, cases c-0000..c-0039 (the per-case tables' ids); the
    runs were measured on it before the split was appended. Returns that version's sha256."""
    g = GoldenFile(root / "experiments" / "golden" / name)
    g.append([{"type": "case", "id": f"c-{i:04d}", "query": f"question {i}?",
               "kind": "exact" if i % 2 else "paraphrase", "doc_type": "config" if i % 3 else "reference",
               "provenance": {"method": "human", "author": "t"},
               "evidence": [{"doc_id": "d1", "source_uri": "mini/d1.html", "start": 4, "end": 12,
                             "quote": TEXT[4:12], "doc_hash": "h", "grade": 2}]} for i in range(N)])
    version = g.digest()
    if split:
        freeze(g.path, seed=13, test_fraction=0.3, who="t")
    return version


def _sweep(store, make_run, tmp_path, split: bool):
    name = "split.jsonl" if split else "nosplit.jsonl"
    """rrf_k=10: every dev case, half the test cases (dev 1.0, all 0.85); rrf_k=30: 24 of 28 dev cases,
    every test case (all cases 0.9: the best on all cases, not on dev); rrf_k=60: weaker."""
    from omegaconf import OmegaConf

    from rag_experiments.tracking.hydra_callback import MlflowSweepCallback
    from rag_experiments.tracking.mlflow_run import PARENT_ENV

    root, _ = store
    version = _golden(root, split, name)
    records = GoldenFile(root / "experiments" / "golden" / name).read_records()
    sides = (current_split(records).sides([f"c-{i:04d}" for i in range(N)]) if split
             else [DEV if i % 10 >= 3 else "test" for i in range(N)])
    dev = np.array([s == DEV for s in sides])
    assert dev.sum() == 28, dev.sum()
    test_ids = np.flatnonzero(~dev)
    k10 = dev.astype(float)
    k10[test_ids[:6]] = 1.0
    k30 = np.ones(N)
    k30[np.flatnonzero(dev)[:4]] = 0.0
    k60 = (np.arange(N) % 2).astype(float)
    cfg = OmegaConf.create({
        "tracking": {"enabled": True, "uri": None, "experiment": "rag-experiments", "sweep_summary": True},
        "objective": "recall_at_5",
        "hydra": {"overrides": {"task": ["fusion.rrf_k=10,30,60", "progress=false"]},
                  "sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper", "params": None},
                  "launcher": {"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"},
                  "sweep": {"dir": str(tmp_path / "multirun" / name)}},
    })
    callback = MlflowSweepCallback()
    callback.on_multirun_start(cfg)
    parent = os.environ[PARENT_ENV]
    ids = {}
    for num, (k, r5) in enumerate(((10, k10), (30, k30), (60, k60))):
        config = base_config(**{"fusion.rrf_k": k, "golden.path": f"experiments/golden/{name}"})
        ids[k] = make_run(per_case_frame(r5, seed=k), name=f"fusion.rrf_k={k} progress=false", golden=version,
                          config=config, parent=parent,
                          tags={"golden_sha256": version, "sweep.job_num": str(num)})
        callback.on_job_end(cfg, None)
    callback.on_multirun_end(cfg)
    return parent, ids


def test_the_sweep_chooses_on_dev_and_reports_on_test_and_without_a_split_says_optimistic(store, make_run, tmp_path,
                                                                                         capsys, monkeypatch):
    from rag_experiments.tracking.hydra_callback import MlflowSweepCallback

    monkeypatch.setattr(MlflowSweepCallback, "_log_summary", lambda *a: None)  # the plots: not what is tested
    parent, ids = _sweep(store, make_run, tmp_path, split=True)
    tags = MlflowClient().get_run(parent).data.tags
    assert tags["best_run_id"] == ids[10]  # best on dev; rrf_k=30 is the best on all cases
    note = " ".join(tags["mlflow.note.content"].split())
    assert "**Best `recall_at_5` on dev**: `rrf_k=10`" in note and "0.8500 on all cases" in note, note
    # the verdict (computed on every case: rrf_k=30 best there) says so, beside the dev choice above
    assert "Best per metric **on all 40 cases** (dev and test together; not the dev-only choice" in note, note
    assert "- recall@5: **`rrf_k=30`** 0.9000" in note, note
    assert ("Selected on **dev** (28 cases) among 3 points: `rrf_k=10` recall_at_5 dev 1.0000 (the value it was "
            "chosen on); **test** (12 held-out cases, not used to choose): **0.5000** [") in note, note
    capsys.readouterr()
    assert cli("compare", "--sweep", parent, "--no-explorer") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Selected on dev (28 cases) among 3 points: rrf_k=10 recall_at_5 dev 1.0000" in out, out
    assert "test (12 held-out cases, not used to choose): 0.5000 [" in out, out
    result = promote("recall_at_5", sweep=parent, dry_run=True)
    assert result.decision.candidate.id == ids[10]
    assert any("test (12 held-out cases" in line for line in result.held_out), result.held_out

    # the same sweep on a golden set with no split (one store: its fixture is the slow part)
    parent, ids = _sweep(store, make_run, tmp_path, split=False)
    tags = MlflowClient().get_run(parent).data.tags
    assert tags["best_run_id"] == ids[30]  # today's behaviour: the best on all cases
    note = tags["mlflow.note.content"]
    assert note.count("No held-out split in the golden set") == 1, note
    assert "Best per metric, and the runs" in note and "on all 40 cases" not in note, note  # no split: unchanged
    assert "so that value is optimistic; counting the 3 points tried, its 95% interval is [" in " ".join(note.split())
    capsys.readouterr()
    assert cli("compare", "--sweep", parent, "--no-explorer") == 0
    assert " ".join(capsys.readouterr().out.split()).count("No held-out split in the golden set") == 1


def test_the_sweepers_objective_is_the_dev_mean_with_a_split(tmp_path):
    """What run.py returns to Optuna (pipeline: held_out.dev_objective): the dev cases' mean, not all cases'."""
    from rag_experiments.tracking.held_out import dev_objective

    values = (np.arange(N) % 3 == 0).astype(float)
    frame = per_case_frame(values)
    _golden(tmp_path, split=False, name="g.jsonl")
    path = tmp_path / "experiments" / "golden" / "g.jsonl"
    assert dev_objective(frame, "recall_at_5", path) is None  # no split: run.py returns the all-cases value
    freeze(path, seed=13, test_fraction=0.3, who="t")
    dev = np.array(current_split(GoldenFile(path).read_records()).sides(frame["case_id"])) == DEV
    assert dev_objective(frame, "recall_at_5", path) == values[dev].mean() != values.mean()
    exact = dev & (frame["kind"] == "exact").to_numpy()
    assert dev_objective(frame, "recall_at_5.exact", path) == values[exact].mean()


def test_compare_from_another_folder_finds_the_runs_golden_file_or_says_where_it_looked(store, make_run, tmp_path,
                                                                                       capsys, monkeypatch):
    """The runs logged a relative golden.path: compare --sweep run from elsewhere (another working folder,
    no RAG_EXP_HOME) finds it under the project the runs were measured in, not under the working folder;
    when the file is gone it names the path and where it looked instead of claiming there is no split."""
    from rag_experiments.paths import tracking_uri
    from rag_experiments.tracking.hydra_callback import MlflowSweepCallback

    monkeypatch.setattr(MlflowSweepCallback, "_log_summary", lambda *a: None)
    parent, _ = _sweep(store, make_run, tmp_path, split=True)
    root, _ = store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("RAG_EXP_HOME")
    capsys.readouterr()
    assert cli("compare", "--sweep", parent, "--no-explorer") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "No held-out split" not in out, out
    assert "Selected on dev (28 cases) among 3 points: rrf_k=10 recall_at_5 dev 1.0000" in out, out

    (root / "experiments" / "golden" / "split.jsonl").rename(root / "moved.jsonl")
    assert cli("compare", "--sweep", parent, "--no-explorer") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "No held-out split" not in out, out
    assert (f"Golden set experiments/golden/split.jsonl (the runs' golden.path) not found: looked in "
            f"{elsewhere / 'experiments' / 'golden' / 'split.jsonl'}, {root / 'experiments' / 'golden' / 'split.jsonl'}"
            ) in out, out


def test_the_selected_line_claims_no_direction_when_test_is_above_dev(tmp_path):
    """Dev below test (as on Cranfield: dev 0.412, test 0.434): the line states both values and does not
    call the dev value optimistic."""
    from rag_experiments.tracking.held_out import lines
    from rag_experiments.tracking.runs import RunView

    _golden(tmp_path, split=True, name="g.jsonl")
    split = current_split(GoldenFile(tmp_path / "experiments" / "golden" / "g.jsonl").read_records())
    frame = per_case_frame(np.zeros(N))
    test = np.array(split.sides(frame["case_id"])) != DEV
    frame["recall_at_5"] = test.astype(float)  # dev 0, test 1
    run = RunView("r1", "rrf_k=10", "FINISHED", "0", 0, {}, {}, {}, per_case=frame)
    (line,) = lines(run, 3, "recall_at_5", split)
    assert "optimistic" not in line, line
    assert "recall_at_5 dev 0.0000 (the value it was chosen on); test (12 held-out cases, not used to choose): 1.0000 [" \
        in line, line
