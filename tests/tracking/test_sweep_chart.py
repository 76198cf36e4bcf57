"""Charts that show differences (issue 59 item 2): the sweep chart on an axis cut to the spread,
with intervals, the best point starred, the points tied with it marked and the champion's value
drawn; the recall@k curves with their bootstrap bands. Real MLflow store, the real sweep callback."""

from __future__ import annotations

import numpy as np
from matplotlib.collections import PolyCollection

from rag_experiments.tracking.compare import build_comparison, run_labels
from rag_experiments.tracking.compare_plots import Marks, comparison_figures, param_figure
from rag_experiments.tracking.plots import curve_interval, pyplot
from rag_experiments.tracking.runs import sweep_children


def _texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_the_sweep_chart_shows_the_spread_the_best_point_its_ties_and_the_champion(small_sweep):
    parent, children, _ = small_sweep
    runs = sweep_children(parent)
    cmp = build_comparison(runs, primary="recall_at_5", labels=run_labels(runs))
    figs = dict((name, fig) for fig, name in comparison_figures(cmp))
    try:
        ax = figs["comparison/recall_at_5_vs_fusion.rrf_k.png"].axes[0]
        low, high = ax.get_ylim()
        # the points are 0.5, 0.75 and 0.875: the axis starts near the lowest interval, not at 0
        assert 0.2 < low < 0.5 and high < 1.05, (low, high)
        assert "best 0.875" in _texts(ax)
        # rrf_k=10 (0.75) is tied with the best at this size (max-T p >= 0.05); rrf_k=60 (0.5) is worse
        tied = [t for t in _texts(ax) if t.startswith("tied")]
        assert len(tied) == 1 and tied[0].startswith("tied 0.750, p="), _texts(ax)
        assert float(tied[0].rsplit("=", 1)[1]) >= 0.05
        # the curves carry a band each
        curves = figs["comparison/recall_at_k.png"].axes[0]
        assert sum(isinstance(c, PolyCollection) for c in curves.collections) == len(runs)
    finally:
        for fig in figs.values():
            pyplot().close(fig)


def test_the_champions_value_is_a_line_that_says_whether_it_is_comparable(small_sweep):
    parent, _, _ = small_sweep
    runs = sweep_children(parent)
    fig = param_figure(runs, "fusion.rrf_k", "recall_at_5", marks=Marks(champion=("champion: hybrid", 0.97, False)))
    try:
        ax = fig.axes[0]
        labels = fig.legends[0].get_texts()
        assert any(t.get_text() == "champion champion: hybrid: 0.970 (other golden version)" for t in labels)
        assert ax.get_ylim()[1] >= 0.97  # the line is inside the axis
    finally:
        pyplot().close(fig)


def test_the_curve_interval_is_a_bootstrap_band_around_the_mean():
    rng = np.random.default_rng(1)
    curves = (rng.random((400, 3)) < [0.2, 0.5, 0.9]).astype(float)
    low, high = curve_interval(curves)
    mean = curves.mean(axis=0)
    assert np.all(low < mean) and np.all(mean < high)
    # about 1.96 standard errors each side
    se = curves.std(axis=0) / np.sqrt(len(curves))
    assert np.allclose(high - low, 2 * 1.96 * se, rtol=0.2)
