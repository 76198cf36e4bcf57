"""evaluation.intervals: a run's logged intervals, per segment, at the edge of a proportion."""

from __future__ import annotations

import pandas as pd
import pytest
from scipy.stats import binomtest

from rag_experiments.evaluation.intervals import ci_metrics


def test_a_saturated_segment_logs_the_exact_interval_not_1_1():
    """33 config cases all hit at 5 (the issue's [1.0, 1.0]) beside 20 prose cases of which 10 hit: the
    config segment logs Clopper-Pearson [0.894, 1.0], the whole set and the prose segment the bootstrap's."""
    hits = [1.0] * 33 + [1.0] * 10 + [0.0] * 10
    frame = pd.DataFrame({"hit_at_5": hits, "kind": ["exact"] * 53,
                          "doc_type": ["config"] * 33 + ["prose"] * 20})
    ci = ci_metrics(frame, ["hit_at_5"], samples=2000, seed=13)
    exact = binomtest(33, 33).proportion_ci(method="exact")
    assert ci["hit_at_5.doc_type.config.ci_low"] == pytest.approx(exact.low, abs=1e-12)
    assert ci["hit_at_5.doc_type.config.ci_high"] == 1.0
    assert ci["hit_at_5.doc_type.prose.ci_low"] < 0.5 < ci["hit_at_5.doc_type.prose.ci_high"] < 1.0
    assert ci["hit_at_5.ci_high"] < 1.0 < 1 + ci["hit_at_5.ci_low"]
    # no logged interval has zero width
    names = {k.rsplit(".", 1)[0] for k in ci}  # hit_at_5, hit_at_5.exact, hit_at_5.doc_type.config, ...
    assert all(ci[f"{n}.ci_high"] - ci[f"{n}.ci_low"] > 0.01 for n in names), ci


def test_no_resamples_or_no_cases_log_no_interval_and_one_resample_does():
    """eval.bootstrap_samples 0 turns the intervals off (nothing logged, not a zero-width interval); so does an
    empty table; a single resample still gives an interval (the edge rule does not depend on resamples)."""
    frame = pd.DataFrame({"hit_at_5": [1.0, 0.0, 1.0], "kind": ["exact"] * 3, "doc_type": ["prose"] * 3})
    assert ci_metrics(frame, ["hit_at_5"], samples=0) == {}
    assert ci_metrics(frame.iloc[:0], ["hit_at_5"], samples=1000) == {}
    one = ci_metrics(frame, ["hit_at_5"], samples=1, seed=13)
    assert set(one) == {f"hit_at_5{seg}.{b}" for seg in ("", ".exact", ".doc_type.prose") for b in ("ci_low", "ci_high")}
