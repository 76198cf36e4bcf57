"""One labelling depth: compare checks label coverage at the depth of the metric it compares
(tracking.coverage.gaps_at_depth). After a decision on recall@5 (``golden label --decide``, which
labels the top 5), both runs' top 5 are judged; only their ranks 6-10 differ. compare used to say
LABEL COVERAGE DIFFERS on judged@10 and ask for ``-k 10``; now judged@5 is what recall@5 needs, the
same for both, and nothing is said. Where the top 5 do differ, the line names judged@5 and ``-k 5``.

Real MLflow store, runs logged with their run.trec, the real golden file, the real CLI."""

from __future__ import annotations

from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.golden.hand_label import judgement
from rag_experiments.golden.label import Pair
from rag_experiments.golden.resolve import load_golden
from rag_experiments.types import Hit

from ..conftest import FIXTURES
from .conftest import _template_db, cli, store  # noqa: F401 - fixtures
from .golden_runs import filler, good, log_golden_run
from .test_coverage import judged_ten

SPANS = [(0, 30), (40, 70), (80, 110), (120, 150)]  # ranks 2-5 of the decided run, judged NO


def test_compare_checks_coverage_at_the_depth_of_the_metric_compared(store, mini_golden, capsys):
    from rag_experiments.corpus.loader import load_corpus

    cases = load_golden(mini_golden).scorable
    docs = {d.doc_id: d for d in load_corpus(FIXTURES / "mini_corpus", "mini")}
    spare_of = {c.case_id: next(d for d in docs.values() if d.doc_id != c.relevant[0].span.doc_id) for c in cases}
    gf = GoldenFile(mini_golden)
    for case in cases:  # the decision's labels: the top 5 judged
        spare = spare_of[case.case_id]
        for lo, hi in SPANS:
            hit = {"doc_id": spare.doc_id, "source_uri": spare.source_uri, "start": lo, "end": hi,
                   "text": spare.text[lo:hi], "doc_hash": spare.content_hash}
            gf.append([judgement(Pair(f"{case.case_id}|{lo}", case.case_id, case.query, hit), "NO",
                                 {"kind": "human", "name": "ann"}, via="terminal")])

    def decided(case):  # the evidence, the four judged passages, then ten nobody judged
        s, spare = case.relevant[0].span, spare_of[case.case_id]
        head = [Hit(f"s{lo}", spare.doc_id, spare.source_uri, spare.doc_type, lo, hi, 1.5, i + 2)
                for i, (lo, hi) in enumerate(SPANS)]
        return (Hit("e", s.doc_id, s.source_uri, case.doc_type, s.start, s.end, 2.0, 1), *head, *filler(15, 6))

    top5 = log_golden_run(mini_golden, decided, name="top5-judged")  # judged@5 1.0, judged@10 0.5
    ten = log_golden_run(mini_golden, judged_ten, name="ten-judged")  # judged@5 1.0, judged@10 1.0
    assert cli("compare", top5, ten, "--no-explorer") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "judged@10" in out  # still shown in the table
    assert "LABEL COVERAGE DIFFERS" not in out  # it said: judged@10 ... -k 10

    once = log_golden_run(mini_golden, good, name="judged-once")  # the evidence only: judged@5 0.2
    assert cli("compare", once, ten, "--no-explorer") == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())  # the warnings' panel
    assert "LABEL COVERAGE DIFFERS: ten-judged has judged@5 1.000 vs the baseline's 0.200" in out
    assert f"rag-exp golden label --pool {once} {ten} -k 5 (-k 5: the depth of recall@5, the metric compared" in out
    assert "-k 10" not in out

    # promote's refusal reads the same depth: the top 5 judged alike is no reason to refuse (it asked
    # for -k 10); the top 5 judged for the candidate only is, with -k 5
    from rag_experiments.tracking.promote import coverage_reasons
    from rag_experiments.tracking.runs import get_run

    assert coverage_reasons(get_run(top5), get_run(ten), 0.05, 2000, metric="recall_at_5") == []
    assert coverage_reasons(get_run(top5), get_run(ten), 0.05, 2000) != []  # judged@10 alone: refused
    (reason,) = coverage_reasons(get_run(once), get_run(ten), 0.05, 2000, metric="recall_at_5")
    assert "judged@5 1.000 vs the baseline's 0.200" in reason and f"--pool {once} {ten} -k 5" in reason
