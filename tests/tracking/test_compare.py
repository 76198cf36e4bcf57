"""`rag-exp compare`: the side-by-side table, paired tests vs the baseline, digest warnings, plots."""

from __future__ import annotations

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.tracking.compare import build_comparison, differing_params, short_labels
from rag_experiments.tracking.compare_render import markdown_table
from rag_experiments.tracking.runs import get_run

from .conftest import base_config, cli, per_case_frame

N = 40


def _values(p_hit: float, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(N) < p_hit).astype(float)


@pytest.fixture
def three_runs(make_run, make_parent):
    """A sweep: baseline, an identical copy, and a clearly better run (differing only in rrf_k)."""
    parent = make_parent("sweep fusion.rrf_k=10,30,60")
    base = _values(0.4, 1)
    better = base.copy()
    better[base == 0] = 1.0  # wins every case the baseline missed
    ids = [make_run(per_case_frame(v), name=f"fusion.rrf_k={k} corpus.path=/x golden.path=/g.jsonl",
                    config=base_config(**{"fusion.rrf_k": k}), parent=parent)
           for v, k in ((base, 10), (base.copy(), 30), (better, 60))]
    return parent, ids


def test_build_comparison_known_answers(three_runs):
    _, ids = three_runs
    runs = [get_run(i) for i in ids]
    cmp = build_comparison(runs, segments=["exact", "paraphrase"], primary="recall_at_5")
    assert [r.label for r in cmp.rows] == ["fusion.rrf_k=10", "fusion.rrf_k=30", "fusion.rrf_k=60"]
    # judged@10 last: how complete the labels behind each run are (tracking.coverage)
    assert [c.title for c in cmp.columns] == ["recall@5", "recall@20", "mrr@10", "ndcg@10", "exact", "paraphrase",
                                              "judged@10"]
    base, same, better = cmp.rows
    assert base.baseline and base.cells["recall_at_5"].delta is None
    # identical run: delta 0, p = 1, all ties
    cell = same.cells["recall_at_5"]
    assert cell.delta == 0 and cell.p == 1.0 and cell.p_adj == 1.0
    assert (same.wtl.wins, same.wtl.losses) == (0, 0)
    # clearly better run: every missed case won
    cell = better.cells["recall_at_5"]
    misses = int((runs[0].per_case["recall_at_5"] == 0).sum())
    assert cell.delta == pytest.approx(misses / N)
    assert cell.p < 0.001 and cell.p_adj == pytest.approx(min(1.0, 2 * cell.p))  # Holm over 2 runs: 2p
    assert better.wtl.wins == misses and better.wtl.losses == 0
    seg = better.cells["recall_at_5.exact"]
    assert seg.value == pytest.approx(runs[2].metrics["recall_at_5.exact"])
    assert seg.interval == (runs[2].metrics["recall_at_5.exact.ci_low"], runs[2].metrics["recall_at_5.exact.ci_high"])
    assert seg.n_paired == N // 2
    assert cmp.comparable and not cmp.warnings


def test_cli_prints_side_by_side_table(three_runs, capsys):
    parent, ids = three_runs
    assert cli("compare", "--sweep", parent, "--segments", "exact,paraphrase") == 0
    out = capsys.readouterr().out
    assert "baseline: rrf_k=10" in out
    for text in ("recall@5", "recall@20", "mrr@10", "ndcg@10", "exact", "paraphrase", "W/T/L", "judged@10",
                 "rrf_k=30", "rrf_k=60", "Δ+0.000", "p=1.000", "Holm"):
        assert text in out, text
    assert "p<0.001*" in out or "p=0.00" in out
    assert "WARNING" not in out


def test_cli_baseline_and_metrics_options(three_runs, capsys):
    _, ids = three_runs
    assert cli("compare", ids[0], ids[1], ids[2], "--baseline", ids[2], "--metrics", "mrr_at_10",
               "--primary", "mrr_at_10", "--segments", "exact") == 0
    out = capsys.readouterr().out
    assert "baseline: rrf_k=60" in out and "W/T/L mrr@10" in out and "recall@20" not in out


def test_warns_loudly_on_golden_and_corpus_mismatch(make_run, capsys):
    a = make_run(per_case_frame(_values(0.5, 3)), name="vector only")
    b = make_run(per_case_frame(_values(0.5, 4)), name="hybrid", golden="b" * 64, corpus="d" * 64)
    # golden versions on no one chain: the command refuses (issue 44; tests/tracking/test_like_with_like.py)
    assert cli("compare", a, b) == 2
    assert "NOT COMPARABLE" in capsys.readouterr().err
    c = make_run(per_case_frame(_values(0.5, 4)), name="hybrid", corpus="d" * 64)
    assert cli("compare", a, c) == 0  # another corpus alone: compared, flagged loudly
    out = capsys.readouterr().out
    assert "DIFFERENT CORPUS VERSIONS" in out and "⚠ corpus differs" in out
    runs = [get_run(a), get_run(b)]
    md = markdown_table(build_comparison(runs))
    # a quoted bold line: MLflow's Markdown shows a GitHub alert (> [!WARNING]) as raw text (issue 48)
    assert md.startswith("> **⚠ Warning:** ") and "[!" not in md and "⚠ golden+corpus differ" in md


def test_markdown_output(three_runs, capsys):
    parent, _ = three_runs
    assert cli("compare", "--sweep", parent, "--markdown") == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("| run | n | recall@5 |") and lines[1].startswith("|---|---:|")
    assert "**rrf_k=10** (baseline)" in out and " · Δ+0.000 p=1.000" in out and "<br>" not in out
    assert len([line for line in lines if line.startswith("| ")]) == 4  # header + 3 runs


def test_log_plots_to_sweep_parent(three_runs, capsys):
    parent, ids = three_runs
    assert cli("compare", "--sweep", parent, "--log-plots") == 0
    files = {f.path for f in MlflowClient().list_artifacts(parent, "comparison")}
    assert files == {"comparison/recall_at_k.png", "comparison/recall_at_5_by_segment.png",
                     "comparison/recall_at_5_vs_fusion.rrf_k.png", "comparison/table.md"}
    assert differing_params([get_run(i, per_case=False) for i in ids]) == ["fusion.rrf_k"]


def test_log_plots_without_parent_creates_comparison_run(make_run, capsys, tmp_path):
    a = make_run(per_case_frame(_values(0.5, 5)), name="a", config=base_config(**{"retrieval.variant": "vector"}))
    b = make_run(per_case_frame(_values(0.6, 6)), name="b", config=base_config(**{"chunking.max_tokens": 100}))
    assert cli("compare", a, b, "--log-plots", "--plots-dir", str(tmp_path / "png")) == 0
    c = MlflowClient()
    made = [r for r in c.search_runs([get_run(a).experiment_id]) if r.data.tags.get("comparison") == "true"]
    assert len(made) == 1 and made[0].data.tags["compared_runs"] == f"{a},{b}"
    files = {f.path for f in c.list_artifacts(made[0].info.run_id, "comparison")}
    assert "comparison/recall_at_k.png" in files and not any("_vs_" in f for f in files)  # two params differ
    assert sorted(p.name for p in (tmp_path / "png").iterdir()) == ["recall_at_5_by_segment.png", "recall_at_k.png"]


def test_short_labels_drop_shared_override_tokens(make_run):
    ids = [make_run(None, name=n, metrics={"recall_at_5": 0.5})
           for n in ("retrieval=vector corpus.path=/a", "retrieval=hybrid corpus.path=/a", "corpus.path=/a")]
    runs = [get_run(i) for i in ids]
    assert short_labels(runs) == ["retrieval=vector", "retrieval=hybrid", "hybrid"]


def test_user_errors(three_runs, capsys):
    parent, ids = three_runs
    assert cli("compare") == 2
    assert cli("compare", ids[0]) == 2
    assert cli("compare", "--sweep", parent, "--segments", "nonsense") == 2
    assert cli("compare", "--sweep", parent, "--metrics", "bogus_at_3") == 2
    err = capsys.readouterr().err
    assert "nothing to compare" in err and "no run has a segment 'nonsense'" in err and "bogus_at_3" in err


def test_a_two_parameter_grid_gets_a_heatmap(make_run, make_parent, tmp_path):
    parent = make_parent("sweep fusion.rrf_k x fusion.keyword_weight")
    ids = [make_run(per_case_frame(_values(0.3 + 0.1 * i, 20 + i)), name=f"fusion.rrf_k={k} fusion.keyword_weight={w}",
                    config=base_config(**{"fusion.rrf_k": k, "fusion.keyword_weight": w}), parent=parent)
           for i, (k, w) in enumerate((k, w) for k in (10, 60) for w in (0.5, 1.0))]
    from rag_experiments.tracking.compare_plots import save_plots

    cmp = build_comparison([get_run(i) for i in ids])
    names = sorted(p.rsplit("/", 1)[-1] for p in save_plots(cmp, tmp_path))
    assert names == ["recall_at_5_by_segment.png", "recall_at_5_over_fusion.keyword_weight_x_fusion.rrf_k.png",
                     "recall_at_k.png"]


def test_a_large_sweep_draws_the_baseline_and_the_best_runs_only(make_run, make_parent):
    from rag_experiments.tracking.compare_plots import MAX_PLOTTED, runs_to_draw

    parent = make_parent("sweep fusion.rrf_k")
    p_hits = [0.5, 0.2, 0.9, 0.3, 0.8, 0.1, 0.7, 0.4, 0.6, 0.35, 0.85, 0.15, 0.75]
    ids = [make_run(per_case_frame(_values(p, 40 + i)), name=f"fusion.rrf_k={i + 1}",
                    config=base_config(**{"fusion.rrf_k": i + 1}), parent=parent) for i, p in enumerate(p_hits)]
    cmp = build_comparison([get_run(i) for i in ids])
    rows, note = runs_to_draw(cmp)
    assert len(rows) == MAX_PLOTTED and rows[0] is cmp.rows[0]
    drawn = {r.label for r in rows[1:]}
    values = {r.label: r.run.per_case["recall_at_5"].mean() for r in cmp.rows[1:]}
    left_out = set(values) - drawn
    assert max(values[x] for x in left_out) <= min(values[x] for x in drawn)
    assert note == f": baseline + best {MAX_PLOTTED - 1} of {len(p_hits)} runs by recall@5"


@pytest.mark.parametrize("width", [80, 120])
def test_compare_fits_narrow_terminals_without_cutting(three_runs, width):
    """Labels by the params that differ; at 80 and 120 columns nothing is cut to '…' and every
    column (W/T/L too) is printed, in a second table when one does not fit."""
    from rich.console import Console

    from rag_experiments.tracking.compare_render import print_comparison
    from rag_experiments.tracking.runs import sweep_children

    parent, _ = three_runs
    console = Console(width=width, record=True, force_terminal=False)
    print_comparison(build_comparison(sweep_children(parent), labels=None), console=console)
    out = console.export_text()
    assert max(len(line) for line in out.splitlines()) <= width
    assert "…" not in out
    for text in ("recall@5", "paraphrase", "W/T/L", "0/"):
        assert text in out, text


def test_a_row_that_is_not_significant_says_what_the_cases_could_detect(make_run, capsys):
    """Issue 45, item 2: 'not significant' says the smallest difference these cases could detect
    (α 0.05, power 0.8) and how many cases would detect the Δ observed."""
    base = _values(0.4, 1)
    other = base.copy()
    other[np.flatnonzero(base == 0)[:3]] = 1.0  # wins 3 cases, loses 1: Δ +2/40, far from significant
    other[np.flatnonzero(base == 1)[0]] = 0.0
    ids = [make_run(per_case_frame(v), name=n) for v, n in ((base, "base"), (other, "other"))]
    cmp = build_comparison([get_run(i) for i in ids], metrics=["recall_at_5", "ndcg_at_10"], primary="recall_at_5")
    # d: three +1, one -1, 36 zeros: sd = sqrt((3 (0.95)^2 + (1.05)^2 + 36 (0.05)^2) / 39) = 0.316228;
    # a sign test (every difference ±1, step 1): MDE = 2.801585 * 0.316228 / sqrt(40) + 1 / 40 = 0.165079;
    # cases for Δ 0.05: sqrt(n) = (0.885940 + sqrt(0.885940^2 + 4 * 0.05)) / 0.1 = 18.7836, n = 352.8 -> 353
    md = markdown_table(cmp)
    assert "(MDE 0.165, n≈353 for Δ)" in md and "smallest \\|Δ\\| these paired cases could detect" in md
    assert cli("compare", *ids, "--metrics", "recall_at_5") == 0
    out = capsys.readouterr().out
    assert "MDE 0.165" in out and "n≈353" in out
    cell = cmp.rows[1].cells["recall_at_5"]
    assert cell.p_adj > 0.05 and cell.delta == pytest.approx(2 / 40)
    assert (other - base).std(ddof=1) == pytest.approx(0.316228, abs=1e-6)
    assert cell.power.mde == pytest.approx(0.165079, abs=1e-5) and cell.power.n_for_delta == 353
