"""Plots people would rather look at than read, logged as MLflow artifacts (PNG).

Per run: recall@k for k = 1..20 (overall with its 95% bootstrap band, and per query kind) and the
histogram of the rank of the first relevant hit (misses in their own bar).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def curve_interval(curves: np.ndarray, samples: int = 400, seed: int = 13) -> tuple[np.ndarray, np.ndarray]:
    """The 95% percentile-bootstrap interval of the mean of each column of ``curves`` (cases x k),
    resampling whole cases (one draw of the cases for every k, as the runs' metrics are
    bootstrapped). Multinomial weights instead of index arrays: 400 x 10,000 cases stays small."""
    curves = np.asarray(curves, dtype=float)
    n = len(curves)
    if n < 2:
        return curves.mean(axis=0), curves.mean(axis=0)
    weights = np.random.default_rng(seed).multinomial(n, np.full(n, 1.0 / n), size=samples)
    means = weights @ curves / n
    return np.percentile(means, 2.5, axis=0), np.percentile(means, 97.5, axis=0)


def recall_curve_figure(per_case: pd.DataFrame, title: str = "recall@k"):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    curves = np.array(per_case["recall_curve"].tolist())
    ks = np.arange(1, curves.shape[1] + 1)
    ax.plot(ks, curves.mean(axis=0), marker="o", lw=2, label=f"all ({len(per_case)}; band: 95% interval)",
            color="black")
    ax.fill_between(ks, *curve_interval(curves), color="black", alpha=0.12, lw=0)
    for kind, grp in per_case.groupby("kind"):
        c = np.array(grp["recall_curve"].tolist())
        ax.plot(ks, c.mean(axis=0), marker=".", label=f"{kind} ({len(grp)})")
    ax.set_xlabel("k (chunks retrieved)")
    ax.set_ylabel("mean recall@k")
    ax.set_ylim(0, 1.02)
    ax.set_xticks(ks)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def first_relevant_histogram(per_case: pd.DataFrame, max_rank: int = 20, title: str = "rank of first relevant hit"):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ranks = per_case["first_relevant_rank"]
    found = ranks.dropna().astype(int)
    found = found[found <= max_rank]
    misses = len(ranks) - len(found)
    counts = np.bincount(found, minlength=max_rank + 1)[1:]
    ax.bar(np.arange(1, max_rank + 1), counts, color="#3b7dd8", label="found")
    ax.bar([max_rank + 2], [misses], color="#d9534f", label=f"not in top {max_rank}")
    ax.set_xticks(list(range(1, max_rank + 1)) + [max_rank + 2])
    ax.set_xticklabels([str(i) for i in range(1, max_rank + 1)] + ["miss"], fontsize=8)
    ax.set_xlabel("rank of the first relevant chunk")
    ax.set_ylabel("cases")
    ax.legend()
    ax.set_title(title)
    fig.tight_layout()
    return fig


#: the two plots of a run: artifact path -> the function drawing it (in the order they are logged)
RUN_PLOTS = {"plots/recall_at_k.png": recall_curve_figure,
             "plots/first_relevant_rank.png": first_relevant_histogram}


def run_plot_pngs(per_case: pd.DataFrame) -> dict[str, bytes]:
    """Both plots as PNG bytes, by artifact path: what MLflow's ``log_figure`` stores (the figure's
    ``savefig`` to a ``.png`` path with no other argument). A single run draws them in its forked
    work process (:mod:`rag_experiments.overlap`), so the logging process never imports matplotlib."""
    plt = pyplot()
    out = {}
    with tempfile.TemporaryDirectory(prefix="rag_exp_plots_") as tmp:
        for name, draw in RUN_PLOTS.items():
            fig = draw(per_case)
            path = Path(tmp) / Path(name).name
            fig.savefig(path)
            plt.close(fig)
            out[name] = path.read_bytes()
    return out


def log_run_plots(per_case: pd.DataFrame, client=None, run_id: str | None = None,
                  pngs: dict[str, bytes] | None = None) -> list[str]:
    """Log both plots to ``run_id`` through ``client`` (else to the active run): ``pngs`` when
    given (:func:`run_plot_pngs`, drawn elsewhere), else drawn here. One upload for both."""
    import mlflow

    pngs = pngs if pngs is not None else run_plot_pngs(per_case)
    with tempfile.TemporaryDirectory(prefix="rag_exp_plots_") as tmp:
        folder = Path(tmp) / "plots"
        folder.mkdir()
        for name, data in pngs.items():
            (Path(tmp) / name).write_bytes(data)
        if client is not None and run_id is not None:
            client.log_artifacts(run_id, str(folder), "plots")
        else:
            mlflow.log_artifacts(str(folder), "plots")
    return list(pngs)
