"""The sweep parent's dev and test columns: every point's objective on dev (where the point was chosen,
with the dev verdict against the chosen point) and on test (held out), in the run description and the
artifact comparison/dev_test.md."""

from __future__ import annotations

from mlflow.tracking import MlflowClient

from rag_experiments.tracking.split_decision import DevTestRow
from rag_experiments.tracking.sweep_parent import dev_test_table

from .test_held_out import _sweep


def test_the_parent_shows_each_point_on_dev_and_on_test(store, make_run, tmp_path, monkeypatch):
    from rag_experiments.tracking.hydra_callback import MlflowSweepCallback

    monkeypatch.setattr(MlflowSweepCallback, "_log_summary", lambda *a: None)  # the plots: not what is tested
    parent, ids = _sweep(store, make_run, tmp_path, split=True)
    note = MlflowClient().get_run(parent).data.tags["mlflow.note.content"]
    # rrf_k=10: dev 28/28 (chosen), test 6/12; rrf_k=30: dev 24/28, test 12/12; rrf_k=60: every other case
    assert "**recall@5 on each side of the split** `split-" in note, note
    assert ": **dev** (28 cases) is where the point was chosen; **test** (12 held-out cases) took no part" in note
    assert "| point | recall@5 dev (chosen on) | dev verdict vs the chosen point | recall@5 test (held out) [95%] |" \
        in note, note
    lines = [line for line in note.splitlines() if line.startswith("| `rrf_k=")]
    assert lines[0] == "| `rrf_k=10` | **1.0000** | **chosen** (best on dev) | 0.5000 [0.250, 0.750] |", lines
    assert lines[1].startswith("| `rrf_k=30` | 0.8571 | tied (max-T p=") and lines[1].endswith("| 1.0000 [0.735, 1.000] |"), lines
    assert lines[2].startswith("| `rrf_k=60` | 0.5000 | worse\\* (max-T p=0.000) |"), lines
    # the whole table as an artifact of the parent
    path = MlflowClient().download_artifacts(parent, "comparison/dev_test.md", str(tmp_path))
    text = open(path, encoding="utf-8").read()
    assert all(line in text for line in lines), text


def test_the_table_keeps_the_chosen_point_first_and_says_how_many_it_leaves_out():
    p_dev = {1: 0.01, 2: 0.3, 4: 0.08}  # against the chosen point k=3
    rows = [DevTestRow(f"k={k}", str(k), dev, 30, 0.5, 10, (0.2, 0.8), k == 3, p_dev.get(k))
            for k, dev in ((1, 0.9), (2, 0.7), (3, 0.8), (4, 0.6))]
    table = dev_test_table(rows, "ndcg_at_10", "split-x", limit=2)
    body = [line for line in table.splitlines() if line.startswith("| `")]
    assert body == ["| `k=3` | **0.8000** | **chosen** (best on dev) | 0.5000 [0.200, 0.800] |",
                    "| `k=1` | 0.9000 | worse\\* (max-T p=0.010) | 0.5000 [0.200, 0.800] |"], table
    assert "| … 2 more: artifact `comparison/dev_test.md` | | | |" in table
    assert "| `k=4` | 0.6000 | tied (max-T p=0.080) |" in dev_test_table(rows, "ndcg_at_10", "split-x", limit=None)
