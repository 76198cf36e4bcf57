"""promote --sweep on a golden set with a dev/test split: the point is chosen on dev and its test value
printed beside its dev value; the decision is the max-T test over every point on all cases, or, with
--decide-on test, one paired test against the champion on the held-out test cases only."""

from __future__ import annotations

import numpy as np
import pytest

from rag_experiments.promotion import promote
from rag_experiments.tracking.champion import current_champion
from rag_experiments.tracking.promote import decide
from rag_experiments.tracking.runs import get_run, sweep_children

from .conftest import cli, golden_cases, per_case_frame

N = 100
CHAMPION = (np.arange(N) % 4 >= 2).astype(float)  # half the cases found, on both sides and both kinds


pytestmark = pytest.mark.usefixtures("fewer_flips")  # every decision here is far from alpha


def golden_with_split(root) -> tuple[str, np.ndarray]:
    """The golden file base_config names (cases c-0000..c-0099), then its split: the version the runs were
    measured on and which cases are on dev."""
    return golden_cases(root, N)


def sweep(make_run, make_parent, version: str, dev: np.ndarray, test_gain: int) -> tuple[str, str]:
    """A champion and a 3-point sweep whose first point finds 20 more dev cases than the champion and
    ``test_gain`` more test cases; the two others find 2 more dev cases."""
    make_run(per_case_frame(CHAMPION), name="champion", golden=version)
    assert cli("promote", "--metric", "recall_at_5") == 0  # the first champion
    parent = make_parent("fusion.rrf_k=10,30,60")
    misses = np.flatnonzero(CHAMPION == 0)
    best = CHAMPION.copy()
    best[misses[dev[misses]][:20]] = 1.0
    best[misses[~dev[misses]][:test_gain]] = 1.0
    ids = [make_run(per_case_frame(best), name="fusion.rrf_k=10", parent=parent, golden=version,
                    tags={"sweep.job_num": "0"})]
    for num, k in ((1, 30), (2, 60)):
        other = CHAMPION.copy()
        other[misses[dev[misses]][20 + num * 2:22 + num * 2]] = 1.0
        ids.append(make_run(per_case_frame(other), name=f"fusion.rrf_k={k}", parent=parent, golden=version,
                            tags={"sweep.job_num": str(num)}))
    return parent, ids[0]


def test_by_default_the_max_t_test_on_all_cases_decides_and_the_test_value_is_printed(store, make_run, make_parent,
                                                                                       capsys):
    root, _ = store
    version, dev = golden_with_split(root)
    parent, best = sweep(make_run, make_parent, version, dev, test_gain=0)
    capsys.readouterr()
    assert cli("promote", "--metric", "recall_at_5", "--sweep", parent, "--dry-run") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "would promote (dry run)" in out and "held-out test cases, Δ" not in out, out
    assert f"test ({int((~dev).sum())} held-out cases, not used to choose): {CHAMPION[~dev].mean():.4f}" in out, out
    assert "the best of 3 sweep points" in out, out  # the max-T line over every point
    # --decide-on test without --sweep: one line
    assert cli("promote", "--metric", "recall_at_5", "--decide-on", "test") == 2
    assert "--decide-on test needs --sweep" in capsys.readouterr().err


def test_a_best_point_that_wins_on_dev_but_not_on_test_is_refused_on_test(store, make_run, make_parent, capsys):
    root, _ = store
    version, dev = golden_with_split(root)
    parent, best = sweep(make_run, make_parent, version, dev, test_gain=0)
    # on all cases (the 20 dev wins included) the best of 3 beats the champion, max-T too
    family = [get_run(r.id) for r in sweep_children(parent, per_case=False)]
    before = decide(current_champion(), get_run(best), "recall_at_5", family=family)
    assert before.ok and before.selection.passed(0.05), before.reasons
    capsys.readouterr()
    assert cli("promote", "--metric", "recall_at_5", "--sweep", parent, "--decide-on", "test") == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "REFUSED" in out, out
    n_test = int((~dev).sum())
    assert (f"recall_at_5 dev {CHAMPION[dev].mean() + 20 / dev.sum():.3f} ({dev.sum()} cases, chose it) · test "
            f"{CHAMPION[~dev].mean():.3f} [") in out, out
    assert f"vs champion {CHAMPION[~dev].mean():.3f} on the same {n_test} held-out test cases, Δ +0.000 [" in out, out
    assert f"not significantly better than the champion on the {n_test} held-out test cases (Δ+0.000" in out, out
    assert "on dev, where it was chosen: recall@5: the best of 3 sweep points" in out, out
    # --force says what it overrode
    assert cli("promote", "--metric", "recall_at_5", "--sweep", parent, "--decide-on", "test", "--force") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "FORCED" in out and f"on the {n_test} held-out test cases" in out, out


def test_a_best_point_that_wins_on_test_too_is_promoted(store, make_run, make_parent):
    root, _ = store
    version, dev = golden_with_split(root)
    parent, best = sweep(make_run, make_parent, version, dev, test_gain=12)
    result = promote("recall_at_5", sweep=parent, dry_run=True, decide_on="test")
    d = result.decision
    assert d.candidate.id == best and d.ok, d.reasons
    assert d.decided_on == f"the {int((~dev).sum())} held-out test cases"
    assert d.checks[0].n == int((~dev).sum()) and abs(d.checks[0].delta - 12 / (~dev).sum()) < 1e-9
    assert any("held-out test cases, Δ +" in line for line in result.held_out), result.held_out
