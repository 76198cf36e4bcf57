"""`rag-exp compare --family`: which tests one star's Holm correction covers, said in the footnote and
honoured in the adjusted p-values."""

from __future__ import annotations

import pytest

from rag_experiments.stats.paired import holm
from rag_experiments.tracking.compare import build_comparison
from rag_experiments.tracking.compare_render import legend
from rag_experiments.tracking.runs import get_run

from .conftest import cli
from .test_compare import three_runs  # noqa: F401 - the fixture: baseline, an identical copy, a better run


def test_runs_family_corrects_per_column_and_all_corrects_the_whole_table(three_runs):  # noqa: F811
    _, ids = three_runs
    runs = [get_run(i) for i in ids]
    per_column = build_comparison(runs, segments=["exact", "paraphrase"], primary="recall_at_5")
    whole = build_comparison(runs, segments=["exact", "paraphrase"], primary="recall_at_5", family="all")
    names = [c.key.mlflow_name for c in whole.columns]
    assert len(names) == 7  # recall@5, recall@20, mrr@10, ndcg@10, exact, paraphrase, judged@10
    # per column: Holm over the 2 runs of the column (the identical run's p is 1, so the better one's is 2p)
    for name in names:
        same, better = per_column.rows[1].cells[name], per_column.rows[2].cells[name]
        assert [same.p_adj, better.p_adj] == pytest.approx(holm([same.p, better.p]))
    # all: Holm over the 14 tests at once, in the table's order; the smallest p is multiplied by 14
    raw = [row.cells[n].p for row in whole.rows[1:] for n in names]
    adjusted = [row.cells[n].p_adj for row in whole.rows[1:] for n in names]
    assert adjusted == pytest.approx(holm(raw))
    assert min(adjusted) == pytest.approx(min(1.0, 14 * min(raw)))
    assert all(w >= c for w, c in zip(adjusted, [row.cells[n].p_adj for row in per_column.rows[1:] for n in names]))
    assert "Holm-corrected across the 2 runs compared, separately in each column" in legend(per_column)
    assert "one star covers its column's 2 tests, not the table's 14" in legend(per_column)
    assert "Holm-corrected across all 14 paired tests of this table (2 run(s) x 7 columns" in legend(whole)


def test_two_runs_say_nothing_is_corrected_and_the_cli_takes_the_family(three_runs, capsys):  # noqa: F811
    _, ids = three_runs
    cmp = build_comparison([get_run(ids[0]), get_run(ids[2])], primary="recall_at_5")
    cell = cmp.rows[1].cells["recall_at_5"]
    assert cell.p_adj == cell.p  # one run compared: a family of one per column
    assert "not corrected: Holm runs across the runs compared, per column" in legend(cmp)
    assert cli("compare", ids[0], ids[2], "--family", "all", "--markdown") == 0
    out = capsys.readouterr().out
    assert "Holm-corrected across all" in out
    with pytest.raises(SystemExit):  # argparse: one line naming the choices
        cli("compare", ids[0], ids[2], "--family", "metrics")
    assert "invalid choice: 'metrics' (choose from 'runs', 'all')" in capsys.readouterr().err
