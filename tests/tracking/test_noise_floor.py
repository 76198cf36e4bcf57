"""Issue 45: the HNSW noise floor (measured by rag-exp bench, read by promote and the gate) and the
power line of a refusal that is not significant."""

from __future__ import annotations

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.tracking.noise_floor import MetricNoise, NoiseFloor, measure, read_floors, write_floor

from .conftest import cli, per_case_frame
from .test_promote import KINDS, _cases

HNSW = {"retrieval.vector.search": "hnsw", "strategy": "heading-abc"}


def _floor(recall_floor: float, strategy: str = "heading-abc", variant: str = "hybrid") -> NoiseFloor:
    return NoiseFloor(strategy, variant, {"m": 16, "ef_construction": 64, "ef_search": None}, "g" * 64, "demo", 4, 60,
                      "2026-12-05T07:00:00+00:00",
                      {"recall_at_5": MetricNoise(recall_floor, recall_floor / 2, 5, [recall_floor]),
                       "recall_at_5.exact": MetricNoise(0.05, 0.02, 2, [0.05])}, 5)


def test_measure_by_hand():
    # three builds of 4 cases: build 2 loses case 0 (1 -> 0), build 3 also loses case 1 (0.5 -> 0)
    a = pd.DataFrame({"case_id": list("abcd"), "kind": ["exact", "exact", "paraphrase", "paraphrase"],
                      "recall_at_5": [1.0, 0.5, 1.0, 0.0]})
    b = a.assign(recall_at_5=[0.0, 0.5, 1.0, 0.0])
    c = a.assign(recall_at_5=[0.0, 0.0, 1.0, 0.0])
    noise, moved = measure([a, b, c], ["recall_at_5"])
    # pairs: (a, b) Δ -1/4, (a, c) Δ -1.5/4, (b, c) Δ -0.5/4: floor 0.375, mean |Δ| 0.25
    assert noise["recall_at_5"].floor == pytest.approx(0.375)
    assert noise["recall_at_5"].mean_abs_delta == pytest.approx(0.25)
    assert noise["recall_at_5"].max_cases_differ == 2 and moved == 2
    # exact: Δ -1/2, -1.5/2, -0.5/2: floor 0.75; paraphrase never moves: 0
    assert noise["recall_at_5.exact"].floor == pytest.approx(0.75)
    assert noise["recall_at_5.paraphrase"].floor == 0.0


def test_written_floor_is_read_back_and_replaced(store):
    root, _ = store
    write_floor(_floor(0.02))
    write_floor(_floor(0.03))  # the same strategy, variant and HNSW parameters: replaces
    write_floor(_floor(0.04, variant="vector"))
    floors = read_floors()
    assert sorted((f.variant, f.floor("recall_at_5")) for f in floors) == [("hybrid", 0.03), ("vector", 0.04)]
    assert (root / "experiments" / "noise_floor.json").exists()


def test_gate_says_a_loss_is_within_the_noise_floor_for_hnsw_runs(store, make_run, capsys):
    make_run(per_case_frame(_cases(30, 18), kinds=KINDS), name="champion", tags=HNSW)
    assert cli("promote") == 0
    write_floor(_floor(0.06))
    # 3 paraphrase cases lost: Δ -3/60 = -0.050, not significant, and within the floor 0.06
    now = make_run(per_case_frame(_cases(27, 18), kinds=KINDS), name="nightly", tags=HNSW)
    capsys.readouterr()
    assert cli("gate", "--run", now) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "recall@5: Δ-0.050 is within the HNSW noise floor (±0.060" in out
    tags = MlflowClient().get_run(now).data.tags
    assert tags["gate_noise.recall_at_5"] == "within the HNSW noise floor"
    assert float(tags["gate_mde.recall_at_5"]) > 0.05  # not significant: what these 60 cases could detect


def test_exact_runs_say_nothing_of_a_floor_and_hnsw_without_one_says_how_to_measure(store, make_run, capsys):
    make_run(per_case_frame(_cases(30, 18), kinds=KINDS), name="champion")
    assert cli("promote") == 0
    write_floor(_floor(0.06))
    exact = make_run(per_case_frame(_cases(27, 18), kinds=KINDS), name="nightly")
    capsys.readouterr()
    assert cli("gate", "--run", exact) == 0
    assert "noise floor" not in capsys.readouterr().out
    other = make_run(per_case_frame(_cases(27, 18), kinds=KINDS), name="nightly",
                     tags={"retrieval.vector.search": "hnsw (auto: 20,000 chunks > 10,000)", "strategy": "other"})
    assert cli("gate", "--run", other) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "no noise floor is recorded for its strategy other" in out and "rag-exp bench -- --only noise" in out


def test_a_refusal_that_is_not_significant_says_what_the_cases_could_detect(store, make_run, capsys):
    make_run(per_case_frame(_cases(30, 18), kinds=KINDS), name="champion")
    assert cli("promote") == 0
    make_run(per_case_frame(_cases(32, 18), kinds=KINDS), name="candidate")  # +2 cases: not significant
    capsys.readouterr()
    assert cli("promote") == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "not significantly better than the champion (Δ+0.033" in out
    assert "these 60 cases could detect |Δ| >= " in out and "cases would detect the Δ+0.033 observed" in out
    assert "MDE (n for Δ)" in out
