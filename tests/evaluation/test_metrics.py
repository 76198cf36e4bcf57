"""Metrics: hand-worked values, and agreement with ranx and ir_measures on the same run (random
runs that repeat earlier hits, as fusion systems do; the crediting rules: test_crediting.py)."""

from __future__ import annotations

import math
import random

import pytest

from rag_experiments.evaluation import metrics as M
from rag_experiments.evaluation.relevance import credit
from rag_experiments.span_match import matches
from rag_experiments.golden.records import Span
from rag_experiments.golden.resolve import EvalCase, Evidence
from rag_experiments.types import Hit

GAINS = [0, 2, 0, 1, 0]  # relevant units have grades 2 and 1; found at ranks 2 and 4
GRADES = [2, 1]


def test_hand_worked_values():
    assert M.recall_at_k(GAINS, GRADES, 1) == 0.0
    assert M.recall_at_k(GAINS, GRADES, 2) == 0.5
    assert M.recall_at_k(GAINS, GRADES, 5) == 1.0
    assert M.reciprocal_rank(GAINS, GRADES, 10) == 0.5
    assert M.reciprocal_rank(GAINS, GRADES, 1) == 0.0  # cutoff applies
    assert M.precision_at_k(GAINS, GRADES, 5) == pytest.approx(0.4)
    assert M.hit_at_k(GAINS, GRADES, 1) == 0.0 and M.hit_at_k(GAINS, GRADES, 2) == 1.0
    dcg = 2 / math.log2(3) + 1 / math.log2(5)          # 1.26186 + 0.43068 = 1.69254
    idcg = 2 / math.log2(2) + 1 / math.log2(3)         # 2 + 0.63093 = 2.63093; 1.69254 / 2.63093 = 0.64332
    assert M.ndcg_at_k(GAINS, GRADES, 5) == pytest.approx(dcg / idcg)
    assert dcg / idcg == pytest.approx(0.643322, abs=1e-6)
    assert M.ndcg_at_k([2, 1], GRADES, 10) == pytest.approx(1.0)
    assert M.judged_at_k([True, False, True, False], 4) == 0.5
    assert M.first_relevant_rank(GAINS) == 2 and M.first_relevant_rank([0, 0]) is None


def test_a_case_without_relevant_evidence_is_an_error():
    with pytest.raises(ValueError, match="no relevant evidence"):
        M.recall_at_k([0, 1], [], 5)
    with pytest.raises(ValueError):
        M.ndcg_at_k([0], [0, 0], 5)


def _span(doc, s, e):
    return Span(doc, doc, s, e, "x" * (e - s), "h")


def _hit(cid, doc, s, e, rank):
    return Hit(cid, doc, doc, "t", s, e, 1.0 / rank, rank)


def test_overlap_rule():
    assert matches("d", 0, 100, "d", 40, 60)           # chunk holds the whole span
    assert matches("d", 0, 100, "d", 70, 110)           # 30 of 40 span chars: 75% of the span
    assert not matches("d", 0, 100, "d", 80, 130)       # 20/50 of the span, 20/100 of the chunk
    assert not matches("d", 0, 100, "d", 90, 150)       # 10/60 of span, 10/100 of chunk
    assert matches("d", 100, 120, "d", 0, 1000)         # small chunk inside a long span: 100% of chunk
    assert not matches("e", 0, 100, "d", 0, 100)        # other document


def test_overlapping_chunks_cannot_inflate_recall():
    case = EvalCase("c", "q", "paraphrase", "t", (Evidence(_span("d", 10, 20), 2, "c#0"),))
    hits = [_hit("a", "d", 0, 30, 1), _hit("b", "d", 5, 25, 2)]  # both cover the one span
    cr = credit(case, hits)
    assert cr.gains == (2, 0)
    assert M.recall_at_k(cr.gains, [2], 5) == 1.0


def _random_cases(seed: int, n: int = 60):
    rng = random.Random(seed)
    cases, runs = [], []
    for qi in range(n):
        evid = []
        for ei in range(rng.randint(1, 3)):
            doc = f"doc{rng.randint(0, 5)}"
            s = rng.randrange(0, 900)
            evid.append(Evidence(_span(doc, s, s + rng.randint(20, 120)), rng.choice([1, 2]), f"q{qi}#{ei}"))
        case = EvalCase(f"q{qi}", "q", rng.choice(["exact", "paraphrase"]), "t", tuple(evid))
        hits = []
        for r in range(1, 31):
            if hits and rng.random() < 0.15:  # a fusion system repeating an earlier hit: it keeps its rank
                h = rng.choice(hits)
                hits.append(_hit(h.chunk_id, h.doc_id, h.start, h.end, r))
                continue
            doc = f"doc{rng.randint(0, 5)}"
            s = rng.randrange(0, 950)
            hits.append(_hit(f"q{qi}-c{r}", doc, s, s + rng.randint(40, 200), r))
        cases.append(case)
        runs.append(hits)
    return cases, runs


def _to_trec(cases, runs):
    """Pseudo document ids that reproduce our crediting (:meth:`Credited.pseudo_ids`): a credited hit
    is its evidence unit, any other hit (a repeat included) an id of its own at its rank."""
    qrels, run = {}, {}
    for case, hits in zip(cases, runs):
        ids = credit(case, hits).pseudo_ids(hits)
        assert len(set(ids)) == len(hits)  # a repeated id would collapse in the run and move later hits up
        qrels[case.case_id] = {e.ref: e.grade for e in case.relevant}
        run[case.case_id] = {pid: float(len(hits) - i) for i, pid in enumerate(ids)}
    return qrels, run


def _ours(cases, runs):
    out = {"recall@5": [], "recall@20": [], "mrr@10": [], "ndcg@10": []}
    for case, hits in zip(cases, runs):
        cr = credit(case, hits)
        grades = [e.grade for e in case.relevant]
        out["recall@5"].append(M.recall_at_k(cr.gains, grades, 5))
        out["recall@20"].append(M.recall_at_k(cr.gains, grades, 20))
        out["mrr@10"].append(M.reciprocal_rank(cr.gains, grades, 10))
        out["ndcg@10"].append(M.ndcg_at_k(cr.gains, grades, 10))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_agrees_with_ranx(seed):
    import ranx  # a test dependency: missing means the cross-check fails, never skips
    cases, runs = _random_cases(seed)
    qrels, run = _to_trec(cases, runs)
    ours = _ours(cases, runs)
    theirs = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), list(ours), return_mean=False, make_comparable=True)
    ids = sorted(qrels)
    order = [c.case_id for c in cases]
    for metric, values in ours.items():
        per_q = dict(zip(ids, theirs[metric]))
        assert [pytest.approx(per_q[q], abs=1e-9) for q in order] == values, metric


@pytest.mark.parametrize("seed", [4, 5])
def test_agrees_with_ir_measures(seed):
    import ir_measures  # a test dependency: missing means the cross-check fails, never skips
    from ir_measures import R, RR, nDCG

    cases, runs = _random_cases(seed)
    qrels, run = _to_trec(cases, runs)
    ours = _ours(cases, runs)
    measures = {"recall@5": R @ 5, "recall@20": R @ 20, "mrr@10": RR @ 10, "ndcg@10": nDCG @ 10}
    theirs = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(list(measures.values()), qrels, run)}
    for name, measure in measures.items():
        for case, value in zip(cases, ours[name]):
            assert theirs[(case.case_id, str(measure))] == pytest.approx(value, abs=1e-9), (name, case.case_id)


@pytest.mark.parametrize("seed", [6, 7])
def test_precision_is_logged_and_agrees_with_ir_measures_and_ranx(seed):
    """precision@k is one entry of the measure registry (evaluation/measures.py): a per-case column
    for each k of eval.ks, scored through score_case like every measure, equal to trec_eval's P_k."""
    import ir_measures  # test dependencies: missing means the cross-check fails, never skips
    import ranx
    from rag_experiments.evaluation.evaluate import EvalParams, score_case
    from rag_experiments.types import RankedList

    p = EvalParams(ks=(1, 5, 20))
    assert {"precision_at_1", "precision_at_5", "precision_at_20"} <= set(p.metric_names())
    # logged (MLflow, per_case.json), not a column of the summary table a run prints
    assert p.summary_names() == [n for n in p.metric_names() if not n.startswith("precision")]
    cases, runs = _random_cases(seed)
    qrels, run = _to_trec(cases, runs)
    rows = {c.case_id: score_case(c, RankedList("q", tuple(h)), p) for c, h in zip(cases, runs)}
    theirs = {(m.query_id, str(m.measure)): m.value
              for m in ir_measures.iter_calc([ir_measures.P @ k for k in p.ks], qrels, run)}
    by_ranx = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), [f"precision@{k}" for k in p.ks], return_mean=False,
                            make_comparable=True)
    ids = sorted(qrels)
    for k in p.ks:
        ranx_q = dict(zip(ids, by_ranx[f"precision@{k}"]))
        for cid, row in rows.items():
            assert row[f"precision_at_{k}"] == pytest.approx(theirs[(cid, str(ir_measures.P @ k))], abs=1e-9)
            assert row[f"precision_at_{k}"] == pytest.approx(ranx_q[cid], abs=1e-9)
    assert any(0 < row["precision_at_5"] < 1 for row in rows.values())  # the comparison covered partial values


def test_the_measure_registry_is_the_one_list():
    """The per-case columns, the names metric_key parses, the headline and the metrics reference
    all read evaluation/measures.py."""
    from devtools import docs_reference as D
    from rag_experiments.evaluation.evaluate import EvalParams
    from rag_experiments.evaluation.measures import REGISTRY
    from rag_experiments.evaluation.metric_key import HEADLINE, MEASURES, MetricKey, headline

    assert MEASURES == tuple(REGISTRY) and HEADLINE == ("recall", "mrr", "ndcg")
    assert [k.column for k in headline((5, 20), 10, 10)] == ["recall_at_5", "recall_at_20", "mrr_at_10", "ndcg_at_10"]
    names = EvalParams(bpref=True).metric_names()
    assert {MetricKey.parse(n).metric for n in names} == set(REGISTRY)
    assert "bpref" not in EvalParams().metric_names()  # only with eval.bpref=true
    families = {f.pattern: f.text for f in D.metric_families()}
    for m in REGISTRY.values():
        assert families[m.name + ("_at_<k>" if m.cutoff else "")] == m.description
