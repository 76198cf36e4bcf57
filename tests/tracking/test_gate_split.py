"""The gate on a golden set with a dev/test split: each check printed on dev and on test, the verdict on
every case unless --decide-on test."""

from __future__ import annotations

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from .conftest import cli, per_case_frame
from .test_promote_on_test import CHAMPION, golden_with_split


pytestmark = pytest.mark.usefixtures("fewer_flips")  # every decision here is far from alpha


def test_the_gate_prints_dev_and_test_and_decides_on_all_cases_unless_told(store, make_run, capsys):
    root, _ = store
    version, dev = golden_with_split(root)
    make_run(per_case_frame(CHAMPION), name="champion", golden=version)
    assert cli("promote", "--metric", "recall_at_5") == 0
    # today's run finds 12 more dev cases and loses 12 test cases: all cases Δ 0, test Δ -12/30
    now = CHAMPION.copy()
    now[np.flatnonzero((CHAMPION == 0) & dev)[:12]] = 1.0
    lost = np.flatnonzero((CHAMPION == 1) & ~dev)[:12]
    now[lost] = 0.0
    run = make_run(per_case_frame(now), name="nightly", golden=version)
    capsys.readouterr()
    assert cli("gate", "--run", run) == 0  # the verdict reads every case, as without a split
    out = " ".join(capsys.readouterr().out.split())
    n_dev, n_test = int(dev.sum()), int((~dev).sum())
    dev_line = (f"recall@5 dev ({n_dev} cases): champion {CHAMPION[dev].mean():.3f}, current {now[dev].mean():.3f}, "
                f"Δ +{12 / n_dev:.3f} · test ({n_test} cases): champion {CHAMPION[~dev].mean():.3f}, current "
                f"{now[~dev].mean():.3f}, Δ −{12 / n_test:.3f}")
    assert dev_line in out, out
    assert "the gate's verdict reads every case)" in out and "gate PASS" in out, out
    assert MlflowClient().get_run(run).data.tags["gate_decided_on"] == "every case"

    assert cli("gate", "--run", run, "--decide-on", "test") == 1
    out = " ".join(capsys.readouterr().out.split())
    assert dev_line in out and f"the gate's verdict reads the {n_test} held-out test cases)" in out, out
    assert f"gate FAIL: recall@5: significantly worse than the champion on the {n_test} held-out test cases" in out, out
    assert MlflowClient().get_run(run).data.tags["gate_decided_on"] == f"the {n_test} held-out test cases"
