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

from .conftest import base_config, cli, golden_cases, per_case_frame, sweep_callback_config

N = 40


def _golden(root, split: bool, name: str) -> str:
    """The golden file the runs' golden.path names, cases c-0000..c-0039; the runs were measured on it
    before the split was appended. Returns that version's sha256."""
    return golden_cases(root, N, name=name, split=split)[0]


def _sweep(store, make_run, tmp_path, split: bool):
    name = "split.jsonl" if split else "nosplit.jsonl"
    """rrf_k=10: every dev case, half the test cases (dev 1.0, all 0.85); rrf_k=30: 24 of 28 dev cases,
    every test case (all cases 0.9: the best on all cases, not on dev); rrf_k=60: weaker."""
    from rag_experiments.tracking.hydra_callback import MlflowSweepCallback
    from rag_experiments.tracking.mlflow_run import PARENT_ENV

    root, _ = store
    version, dev = golden_cases(root, N, name=name, split=split)
    if not split:
        dev = np.array([i % 10 >= 3 for i in range(N)])
    assert dev.sum() == 28, dev.sum()
    test_ids = np.flatnonzero(~dev)
    k10 = dev.astype(float)
    k10[test_ids[:6]] = 1.0
    k30 = np.ones(N)
    k30[np.flatnonzero(dev)[:4]] = 0.0
    k60 = (np.arange(N) % 2).astype(float)
    cfg = sweep_callback_config(tmp_path / "multirun" / name)
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
    assert note.count("**k-fold estimate** (no split needed): choosing the best of 3 points on 4 of 5 folds of "
                      "the 40 cases") == 1, note
    capsys.readouterr()
    assert cli("compare", "--sweep", parent, "--no-explorer") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.count("No held-out split in the golden set") == 1, out
    assert out.count("k-fold estimate (no split needed): choosing the best of 3 points on 4 of 5 folds") == 1, out
    assert cli("compare", "--sweep", parent, "--no-explorer", "--folds", "4") == 0
    assert "on 3 of 4 folds of the 40 cases" in capsys.readouterr().out
    assert cli("compare", "--sweep", parent, "--no-explorer", "--folds", "21") == 0
    assert ("No k-fold estimate: the 40 cases every point scored are fewer than 2 per fold for 21 folds (use "
            "`compare --sweep PARENT_ID --folds K` with K at most 20).") in capsys.readouterr().out
    assert cli("compare", "--sweep", parent, "--no-explorer", "--folds", "1") != 0
    assert "--folds must be at least 2, got 1" in capsys.readouterr().err


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


def _lucky_sweep(n: int) -> list:
    """n points of one sweep on n cases: point j scores 1 on case j only, 0 elsewhere (each point lucky on
    one case, none better than another)."""
    from rag_experiments.tracking.runs import RunView

    runs = []
    for j in range(n):
        frame = per_case_frame(np.eye(n)[j])
        runs.append(RunView(f"r{j}", f"fusion.rrf_k={j}", "FINISHED", "0", j,
                            {"mlflow.parentRunId": "p", "sweep.job_num": str(j)}, {}, {"fusion.rrf_k": str(j)},
                            per_case=frame))
    return runs


def test_without_a_split_the_kfold_estimate_shows_the_selections_optimism():
    """By hand, for any fold assignment: on all cases every point has mean 1/10 (a tie: the earliest point,
    rrf_k=0, 0.1000). A fold's training cases give 1/8 to each point whose lucky case is in them and 0 to the
    two whose case is held out, so it chooses the earliest point whose case is in training, and that point
    scores 0 on the held-out cases: out of fold 0 on every case (Clopper-Pearson for 0 of 10:
    [0, 1 - 0.025 ** (1/10)] = [0, 0.308]), optimism +0.1000. rrf_k=0 is chosen by the 4 folds that do not
    hold case 0 out. The maxT line stays, the k-fold line comes after it."""
    from rag_experiments.tracking.held_out import lines

    runs = _lucky_sweep(10)
    out = lines(runs[0], 10, "recall_at_5", None, "rrf_k=0", family=runs)
    assert len(out) == 2 and out[0].startswith("No held-out split in the golden set"), out
    assert "max-T simultaneous interval" in out[0], out
    assert out[1].startswith("k-fold estimate (no split needed): choosing the best of 10 points on 4 of 5 folds "
                             "of the 10 cases (stratified by kind and doc type) and measuring it on the fold left "
                             "out gives recall_at_5 0.0000 [0.000, 0.308] out of fold, against 0.1000 for the best "
                             "on all cases (rrf_k=0): optimism +0.1000; the folds chose rrf_k=0 ×4, rrf_k="), out
    assert out[1].endswith(" ×1."), out
    # fewer than 2 cases per fold: one line saying why, and what K would do
    (_, short) = lines(runs[0], 10, "recall_at_5", None, family=runs, folds=6)
    assert short == ("No k-fold estimate: the 10 cases every point scored are fewer than 2 per fold for 6 folds "
                     "(use `compare --sweep PARENT_ID --folds K` with K at most 5)."), short
    # 3 cases: no K works
    (_, tiny) = lines(runs[0], 3, "recall_at_5", None, family=_lucky_sweep(3), folds=2)
    assert tiny.endswith("fewer than 2 per fold for 2 folds (too few to choose on some and measure on the "
                         "others)."), tiny
