"""Labels given after a sweep count in compare at once: the runs' stored ranked lists are rescored on
the newest labels (not re-run) and compare says so; beside the values, how far the unjudged hits in
the cut-off could still move them (rag_experiments.tracking.coverage.on_newest_labels / bounds_lines).

Real MLflow store, runs logged with their run.trec, the real golden file, the real CLI. Before this
change compare printed the logged values after labelling and no bounds: both assertions fail there."""

from __future__ import annotations

from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.golden.hand_label import judgement
from rag_experiments.golden.label import Pair
from rag_experiments.golden.resolve import load_golden
from rag_experiments.types import Hit

from ..conftest import FIXTURES
from .conftest import _template_db, cli, store  # noqa: F401 - fixtures
from .golden_runs import log_golden_run


def test_compare_rescores_on_the_newest_labels_and_prints_the_bounds(store, mini_golden, capsys):
    from rag_experiments.corpus.loader import load_corpus

    cases = load_golden(mini_golden).scorable
    docs = {d.doc_id: d for d in load_corpus(FIXTURES / "mini_corpus", "mini")}
    cited = {e.span.doc_id for c in cases for e in c.relevant}
    spare = [d for d in docs.values() if d.doc_id not in cited] or list(docs.values())
    order = [c.case_id for c in cases]

    def other(case) -> Hit:
        i = order.index(case.case_id)
        d = spare[i % len(spare)]
        lo = 40 * (i // len(spare))
        return Hit("x", d.doc_id, d.source_uri, d.doc_type, lo, lo + 30, 3.0, 1)

    def first(case):
        s = case.relevant[0].span
        return (Hit("e", s.doc_id, s.source_uri, case.doc_type, s.start, s.end, 2.0, 1),)

    def second(case):  # a passage nobody judged first, the evidence second
        s = case.relevant[0].span
        return (other(case), Hit("e", s.doc_id, s.source_uri, case.doc_type, s.start, s.end, 2.0, 2))

    run_a = log_golden_run(mini_golden, first, name="alpha")
    run_b = log_golden_run(mini_golden, second, name="beta")
    n = len(cases)

    assert cli("compare", run_a, run_b, "--primary", "mrr_at_10", "--no-explorer") == 0
    out = capsys.readouterr().out
    assert "rescored, not re-run" not in out  # nothing labelled since the runs
    assert "how far unjudged hits could move mrr@10" in out
    assert "alpha: mrr@10 1.000, every hit in the top 10 judged" in out
    assert (f"beta: mrr@10 0.500, could be 0.50-1.00 with {n} hits unjudged; mrr@10 Δ(beta - alpha) -0.500, could "
            f"be -0.500 to +0.000 with {n} passages unjudged: the sign can still flip") in " ".join(out.split())

    # a person finds beta's first passage relevant in every case: beta's MRR becomes 1.0, no re-run
    gf = GoldenFile(mini_golden)
    for case in cases:
        h = other(case)
        d = docs[h.doc_id]
        hit = {"doc_id": d.doc_id, "source_uri": d.source_uri, "start": h.start, "end": h.end,
               "text": d.text[h.start:h.end], "doc_hash": d.content_hash}
        gf.append([judgement(Pair(f"{case.case_id}|x", case.case_id, case.query, hit), "YES",
                             {"kind": "human", "name": "ann"}, via="terminal")])
    digest = load_golden(mini_golden).digest
    assert cli("compare", run_a, run_b, "--primary", "mrr_at_10", "--no-explorer") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (f"rescored, not re-run: every run's stored ranked lists (run.trec) scored on the newest labels, golden "
            f"{digest[:12]}") in out
    assert f"on the {n} cases all of them retrieved" in out
    assert "beta: mrr@10 1.000, every hit in the top 10 judged" in out
    assert "mrr@10 Δ(beta - alpha) +0.000: every hit in both cut-offs judged" in out
    # the table too: the logged Δ-0.500 on MRR is gone; alpha's recall@20 halves (a second relevant unit per case)
    assert "Δ-0.500" not in out and "Δ+0.500 p=0.002*" in out


def test_a_finished_runs_ranked_lists_are_read_once(store, mini_golden):
    """compare read each run's run.trec up to four times (rescoring, judged@k, bounds, explorer); a
    finished run's lists are now parsed once a process, and each caller gets its own dict."""
    from mlflow.tracking import MlflowClient

    from rag_experiments.tracking.runs import get_run
    from rag_experiments.tracking.versioned import load_ranked_lists

    run = get_run(log_golden_run(mini_golden, name="once"))
    c = MlflowClient()
    downloads = []
    real = c.download_artifacts
    c.download_artifacts = lambda *a, **k: downloads.append(a) or real(*a, **k)
    first = load_ranked_lists(run, c)
    assert first and len(downloads) == 1
    first.clear()  # a caller's edit
    again = load_ranked_lists(run, c)
    assert len(downloads) == 1 and again  # read from the cache, whole again
    assert again == load_ranked_lists(run, c) and len(again) == len(load_golden(mini_golden).scorable)
