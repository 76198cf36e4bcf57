"""Measures robust to incomplete labels: condensed lists (eval.unjudged=condensed) and bpref
(eval.bpref=true). Hand-worked values, then agreement with ir_measures (pytrec_eval) on
ranked lists over the mini golden set with judged non-relevant spans appended."""

from __future__ import annotations

import random

import pytest

from rag_experiments.evaluation import metrics as M
from rag_experiments.evaluation.evaluate import EvalParams, evaluate
from rag_experiments.evaluation.relevance import credit
from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.golden.resolve import load_golden
from rag_experiments.types import Hit, RankedList


WIDTH = 30  # the mini corpus holds about 150 such slots away from every evidence span


def test_condensed_and_bpref_by_hand():
    # ranks: unjudged, judged-NO, relevant(2), unjudged, relevant(1); R = 2 relevant, N = 1 judged non-relevant
    gains = [0, 0, 2, 0, 1]
    judged = [False, True, True, False, True]
    nonrel = [False, True, False, False, False]
    assert M.condensed(gains, judged) == [0, 2, 1]
    assert M.reciprocal_rank(M.condensed(gains, judged), [2, 1], 10) == 0.5  # rank 3 -> rank 2 once condensed
    # bpref: each relevant hit has 1 judged non-relevant above it: 1 - min(1, 2) / min(2, 1) = 0 each
    assert M.bpref(gains, nonrel, [2, 1], 1) == 0.0
    # with N = 4 judged non-relevant (3 of them not retrieved): 1 - 1/2 = 0.5 each -> 0.5
    assert M.bpref(gains, nonrel, [2, 1], 4) == 0.5
    assert M.bpref([1, 0], [False, False], [1], 0) == 1.0  # no judged non-relevant: a retrieved relevant counts 1


@pytest.fixture
def judged_golden(mini_golden, mini_docs):
    """The mini golden set plus 3 judged non-relevant spans a case (WIDTH-character slots that touch no
    evidence), and per case the slots left unjudged."""
    rng = random.Random(5)
    golden = load_golden(mini_golden)
    evidence = [(e.span.doc_id, e.span.start, e.span.end) for c in golden.scorable for e in c.relevant]

    def free(doc, start):
        return not any(d == doc.doc_id and start < e and s < start + WIDTH for d, s, e in evidence)

    slots = [(d, s) for d in mini_docs for s in range(0, len(d.text) - WIDTH, WIDTH) if free(d, s)]
    rng.shuffle(slots)
    records, unjudged = [], {}
    for case in golden.scorable:
        for d, s in (slots.pop() for _ in range(3)):
            span = {"doc_id": d.doc_id, "source_uri": d.source_uri, "start": s, "end": s + WIDTH,
                    "quote": d.text[s:s + WIDTH], "doc_hash": d.content_hash}
            records.append({"type": "judgement", "id": f"j-{case.case_id}-{s}-{d.doc_id}", "case_id": case.case_id,
                            "span": span, "verdict": "NO", "judge": {"kind": "human", "name": "tests"}})
        unjudged[case.case_id] = [slots.pop() for _ in range(6)]
    GoldenFile(mini_golden).append(records)
    return mini_golden, unjudged


def _lists(golden, unjudged, seed):
    rng = random.Random(seed)
    out = {}
    for case in golden.scorable:
        spans = [(e.span.doc_id, e.span.source_uri, e.span.start, e.span.end) for e in case.evidence]
        spans += [(d.doc_id, d.source_uri, s, s + WIDTH) for d, s in unjudged[case.case_id]]
        rng.shuffle(spans)
        out[case.case_id] = RankedList(case.query, tuple(
            Hit(f"h{i}", doc, uri, case.doc_type, a, b, 1.0 / (i + 1), i + 1) for i, (doc, uri, a, b) in enumerate(spans)))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_condensed_measures_and_bpref_agree_with_ir_measures(judged_golden, seed):
    import ir_measures
    from ir_measures import RR, R, Bpref, nDCG

    path, unjudged = judged_golden
    golden = load_golden(path)
    lists = _lists(golden, unjudged, seed)
    ours = evaluate(golden, lists, EvalParams(unjudged="condensed", bpref=True)).per_case.set_index("case_id")

    qrels, run, condensed_run = [], [], []
    for case in golden.scorable:
        for e in case.evidence:
            qrels.append(ir_measures.Qrel(case.case_id, e.ref, e.grade))
        hits = lists[case.case_id].hits
        cr = credit(case, hits)
        by_span = {(e.span.doc_id, e.span.start, e.span.end): e.ref for e in case.evidence}
        for i, (h, ref) in enumerate(zip(hits, cr.refs)):
            doc = ref or by_span.get((h.doc_id, h.start, h.end)) or h.chunk_id
            run.append(ir_measures.ScoredDoc(case.case_id, doc, float(len(hits) - i)))
            if doc != h.chunk_id:  # judged: stays in the condensed list
                condensed_run.append(ir_measures.ScoredDoc(case.case_id, doc, float(len(hits) - i)))
    full = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc([Bpref, nDCG(judged_only=True)@10],
                                                                                qrels, run)}
    cond = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc([RR@10, R@5, R@20, nDCG@10],
                                                                                qrels, condensed_run)}
    for case in golden.scorable:
        row = ours.loc[case.case_id]
        assert row["bpref"] == pytest.approx(full[(case.case_id, "Bpref")], abs=1e-9)
        assert row["ndcg_at_10"] == pytest.approx(full[(case.case_id, "nDCG(judged_only=True)@10")], abs=1e-9)
        assert row["ndcg_at_10"] == pytest.approx(cond[(case.case_id, "nDCG@10")], abs=1e-9)
        assert row["mrr_at_10"] == pytest.approx(cond[(case.case_id, "RR@10")], abs=1e-9)
        assert row["recall_at_5"] == pytest.approx(cond[(case.case_id, "R@5")], abs=1e-9)
        assert row["recall_at_20"] == pytest.approx(cond[(case.case_id, "R@20")], abs=1e-9)
    # the default counts an unjudged hit as a miss: lower or equal, never higher
    plain = evaluate(golden, lists, EvalParams()).per_case.set_index("case_id")
    assert (plain["mrr_at_10"] <= ours["mrr_at_10"] + 1e-12).all()
    assert (plain["mrr_at_10"] < ours["mrr_at_10"]).any()
