"""Cases that need more than one passage (evidence groups, all-of; kind ``multi``): the schema and
its validation, resolution of judgements to groups, recall@k over groups and complete@k on
hand-worked rankings, one-group cases scored exactly as before, agreement with ir_measures where an
equivalent exists (recall@k: R@k with one passage per group; complete@k of a one-group case: S@k),
and the ``multi`` segment."""

from __future__ import annotations

import json
import math
import random

import pytest

from rag_experiments.errors import GoldenSetError
from rag_experiments.evaluation import metrics as M
from rag_experiments.evaluation.evaluate import EvalParams, evaluate, score_case
from rag_experiments.evaluation.relevance import credit
from rag_experiments.golden import GoldenFile
from rag_experiments.golden.records import Span, new_id
from rag_experiments.golden.resolve import EvalCase, Evidence, load_golden
from rag_experiments.types import Hit, RankedList

TEXT_A = "The work_mem setting bounds the memory of each sort or hash operation."
TEXT_B = "Autovacuum launches workers that vacuum tables when their dead rows pass a threshold."


def _ev(doc: str, s: int, e: int, ref: str, group: int | None = 0, grade: int = 2) -> Evidence:
    return Evidence(Span(doc, doc, s, e, "x" * (e - s), "h"), grade, ref, "ok", group)


def _hits(*spans: tuple[str, int, int]) -> list[Hit]:
    return [Hit(f"h{i}", d, d, "t", s, e, 1.0 / i, i) for i, (d, s, e) in enumerate(spans, start=1)]


FILLER = ("z", 0, 50)


def test_hand_worked_two_groups_one_passage_each():
    """Needs A (doc a) and B (doc b). A at rank 1, B at rank 7: recall@5 = 1/2 (one of two groups),
    complete@5 = 0, both 1 at 20; MRR@10 = 1 (first relevant at rank 1); nDCG@10 over the two
    passages: (2/log2 2 + 2/log2 8) / (2/log2 2 + 2/log2 3) = (2 + 0.6667) / (2 + 1.2619) = 0.8175."""
    case = EvalCase("c", "q", "multi", "t", (_ev("a", 0, 40, "c#0", 0), _ev("b", 0, 40, "c#1", 1)), n_groups=2)
    hits = _hits(("a", 0, 40), FILLER, FILLER, FILLER, FILLER, FILLER, ("b", 0, 40))
    row = score_case(case, RankedList("q", tuple(hits)), EvalParams())
    assert row["recall_at_5"] == 0.5 and row["complete_at_5"] == 0.0
    assert row["recall_at_20"] == 1.0 and row["complete_at_20"] == 1.0
    assert row["hit_at_5"] == 1.0  # any passage: hit@k is not complete@k
    assert row["n_groups"] == 2 and row["group_ranks"] == [1, 7]
    assert row["mrr_at_10"] == 1.0
    ndcg = (2 + 2 / math.log2(8)) / (2 + 2 / math.log2(3))
    assert row["ndcg_at_10"] == pytest.approx(ndcg) and ndcg == pytest.approx(0.8175, abs=1e-4)
    assert row["recall_curve"][:7] == [0.5] * 6 + [1.0]


def test_hand_worked_a_group_of_alternatives():
    """Group 0 has two passages judged relevant (A1, A2: either answers its part), group 1 one (B).
    Hits [A1, B]: complete@5 = 1 (one passage of each group); recall@5 = mean(1/2, 1/1) = 0.75 (a group
    credits the share of its relevant passages found, as trec_eval counts them; one passage per group:
    the share of groups found)."""
    case = EvalCase("c", "q", "multi", "t", (_ev("a", 0, 40, "c#0", 0), _ev("a", 500, 540, "j1", 0),
                                             _ev("b", 0, 40, "c#1", 1)), n_groups=2)
    row = score_case(case, RankedList("q", tuple(_hits(("a", 0, 40), ("b", 0, 40)))), EvalParams())
    assert row["complete_at_5"] == 1.0 and row["recall_at_5"] == 0.75 and row["group_ranks"] == [1, 2]
    row = score_case(case, RankedList("q", tuple(_hits(("a", 0, 40), ("a", 500, 540)))), EvalParams())
    assert row["complete_at_5"] == 0.0 and row["recall_at_5"] == 0.5 and row["group_ranks"] == [1, None]


def test_metric_functions_by_hand():
    rank_groups, unit_groups = [None, 1, None, 0, 0], [0, 0, 1]
    assert M.group_recall_at_k(rank_groups, unit_groups, 1) == 0.0
    assert M.group_recall_at_k(rank_groups, unit_groups, 2) == 0.5          # group 1 found: (0/2 + 1/1) / 2
    assert M.group_recall_at_k(rank_groups, unit_groups, 4) == 0.75         # (1/2 + 1/1) / 2
    assert M.complete_at_k(rank_groups, unit_groups, 2) == 0.0
    assert M.complete_at_k(rank_groups, unit_groups, 4) == 1.0
    assert M.group_first_ranks(rank_groups, 3) == [4, 2, None]
    with pytest.raises(ValueError, match="no relevant evidence"):
        M.complete_at_k([0], [None], 5)


def _random_case(rng: random.Random, qi: int, groups: int, per_group: tuple[int, int]):
    evid = []
    for g in range(groups):
        for j in range(rng.randint(*per_group)):
            doc = f"doc{rng.randint(0, 5)}"
            s = rng.randrange(0, 900)
            evid.append(_ev(doc, s, s + rng.randint(20, 120), f"q{qi}#{len(evid)}", g if groups > 1 else 0,
                            rng.choice([1, 2])))
    case = EvalCase(f"q{qi}", "q", "multi" if groups > 1 else "paraphrase", "t", tuple(evid), n_groups=groups)
    hits = []
    for r in range(1, 31):
        doc = f"doc{rng.randint(0, 5)}"
        s = rng.randrange(0, 950)
        hits.append(Hit(f"q{qi}-c{r}", doc, doc, "t", s, s + rng.randint(40, 200), 1.0 / r, r))
    return case, hits


def test_one_group_case_by_hand():
    """A case without groups (every case written before them): three relevant passages, one group. The
    ranking finds the first at rank 2 and the third at rank 7, never the second. By hand: recall@k = share of
    the three passages in the top k (trec_eval's recall), 0 at k 1, 1/3 from k 2, 2/3 from k 7; complete@k is
    hit@k: 1 from rank 2; the group's first rank is 2. (Random one-group cases against ir_measures: below.)"""
    case = EvalCase("c", "q", "paraphrase", "t", (_ev("a", 0, 40, "c#0"), _ev("a", 500, 540, "j1"),
                                                  _ev("b", 0, 40, "j2")))
    filler = [("z", 100 * i, 100 * i + 50) for i in range(20)]
    ranking = [filler[0], ("a", 0, 40), *filler[1:5], ("b", 0, 40), *filler[5:18]]
    assert len(ranking) == 20
    row = score_case(case, RankedList("q", tuple(_hits(*ranking))), EvalParams())
    assert row["recall_at_5"] == pytest.approx(1 / 3) and row["recall_at_20"] == pytest.approx(2 / 3)
    assert row["complete_at_5"] == 1.0 and row["complete_at_20"] == 1.0 and row["hit_at_5"] == 1.0
    assert row["recall_curve"] == pytest.approx([0.0] + [1 / 3] * 5 + [2 / 3] * 14)
    assert row["n_groups"] == 1 and row["group_ranks"] == [2]
    missed = score_case(case, RankedList("q", tuple(_hits(*filler))), EvalParams())
    assert missed["recall_at_20"] == 0.0 and missed["complete_at_20"] == 0.0 and missed["group_ranks"] == [None]


@pytest.mark.parametrize("seed", [11, 12])
def test_agrees_with_ir_measures(seed):
    """recall@k over groups = ir_measures R@k when each group is one passage (the share of groups
    found); complete@k of a one-group case = S@k (Success). With several passages in a group the two
    differ by design (R@k counts passages; ours averages the share within each group), and complete@k
    of a multi-group case has no ir_measures equivalent (checked by hand above)."""
    import ir_measures  # a test dependency: missing means the cross-check fails, never skips
    from ir_measures import R, Success

    rng = random.Random(seed)
    multi = [_random_case(rng, qi, rng.randint(2, 3), (1, 1)) for qi in range(40)]
    single = [_random_case(rng, 100 + qi, 1, (1, 3)) for qi in range(40)]
    qrels, run, ours = [], {}, {}
    for case, hits in multi + single:
        ids = credit(case, hits).pseudo_ids(hits)
        qrels += [ir_measures.Qrel(case.case_id, e.ref, e.grade) for e in case.relevant]
        run[case.case_id] = {pid: float(len(hits) - i) for i, pid in enumerate(ids)}
        ours[case.case_id] = score_case(case, RankedList("q", tuple(hits)), EvalParams())
    measures = [R @ 5, R @ 20, Success @ 5, Success @ 20]
    theirs = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures, qrels, run)}
    for case, _ in multi + single:
        for k in (5, 20):
            assert ours[case.case_id][f"recall_at_{k}"] == pytest.approx(theirs[(case.case_id, f"R@{k}")], abs=1e-12)
    for case, _ in single:
        for k in (5, 20):
            assert ours[case.case_id][f"complete_at_{k}"] == theirs[(case.case_id, f"Success@{k}")]
    # the cases do exercise the difference between the two measures
    assert any(ours[c.case_id]["complete_at_5"] != ours[c.case_id]["hit_at_5"] for c, _ in multi)


def test_multi_is_a_segment_of_every_measure():
    cases = (EvalCase("m", "q", "multi", "t", (_ev("a", 0, 40, "m#0", 0), _ev("b", 0, 40, "m#1", 1)), n_groups=2),
             EvalCase("p", "q", "paraphrase", "t", (_ev("a", 0, 40, "p#0"),)))
    from rag_experiments.golden.resolve import GoldenSet

    golden = GoldenSet(path=None, digest="x", cases=cases)
    hits = tuple(_hits(("a", 0, 40)))
    res = evaluate(golden, {"m": RankedList("q", hits), "p": RankedList("q", hits)})
    assert res.metrics["recall_at_5.multi"] == 0.5 and res.metrics["complete_at_5.multi"] == 0.0
    assert res.metrics["recall_at_5.paraphrase"] == 1.0 and res.metrics["complete_at_5"] == 0.5
    # logged and printed with a multi case in the set
    assert "complete_at_5" in res.headline and "complete_at_5" in res.summary
    # a set without one: complete@k would repeat hit@k, so it is a per-case column only (the logged
    # metrics and the printed summary stay as they were)
    old = evaluate(GoldenSet(path=None, digest="x", cases=cases[1:]), {"p": RankedList("q", hits)})
    assert not any(n.startswith("complete") for n in [*old.metrics, *old.headline, *old.summary])
    assert old.per_case["complete_at_5"].tolist() == [1.0]
    assert list(old.summary) == ["recall_at_5", "recall_at_20", "mrr_at_10", "ndcg_at_10", "hit_at_5", "hit_at_20",
                                 "judged_at_10"]


# -- the records ----------------------------------------------------------------------------------
def _span_json(doc: str, text: str, s: int, e: int, **extra) -> dict:
    return {"doc_id": doc, "source_uri": f"mini/{doc}.html", "start": s, "end": e, "quote": text[s:e],
            "doc_hash": "h", "grade": 2, **extra}


def multi_case(evidence: list[dict], query: str = "what needs both?") -> dict:
    return {"type": "case", "id": new_id("c", query), "query": query, "kind": "multi", "doc_type": "config",
            "provenance": {"method": "agent", "author": "t"}, "evidence": evidence}


def test_a_multi_case_round_trips_and_resolves_its_groups(tmp_path):
    g = GoldenFile(tmp_path / "g.jsonl")
    case = multi_case([_span_json("d1", TEXT_A, 4, 12, group=0), _span_json("d2", TEXT_B, 0, 10, group=1)])
    judged = {"type": "judgement", "id": "j-1", "case_id": case["id"], "verdict": "YES", "group": 1,
              "span": {k: v for k, v in _span_json("d3", TEXT_B, 11, 19).items() if k != "grade"},
              "judge": {"kind": "agent", "name": "t"}}
    same_doc = {**judged, "id": "j-2", "span": {k: v for k, v in _span_json("d1", TEXT_A, 30, 40).items()
                                                 if k != "grade"}}
    del same_doc["group"]  # no group named: the group whose evidence is in the same document (d1: group 0)
    g.append([case, judged, same_doc])
    golden = load_golden(tmp_path / "g.jsonl")
    (c,) = golden.cases
    assert c.kind == "multi" and c.n_groups == 2
    assert {e.ref: e.group for e in c.relevant} == {f"{case['id']}#0": 0, f"{case['id']}#1": 1, "j-1": 1, "j-2": 0}


def test_an_old_case_is_one_group(tmp_path):
    g = GoldenFile(tmp_path / "g.jsonl")
    case = multi_case([_span_json("d1", TEXT_A, 4, 12), _span_json("d1", TEXT_A, 20, 30)])
    g.append([case])
    (c,) = load_golden(tmp_path / "g.jsonl").cases
    assert c.n_groups == 1 and [e.group for e in c.relevant] == [0, 0]


@pytest.mark.parametrize("evidence, message", [
    ([_span_json("d1", TEXT_A, 4, 12, group=0), _span_json("d2", TEXT_B, 0, 10)],
     r"evidence\[1\] has no field 'group'"),
    ([_span_json("d1", TEXT_A, 4, 12, group=0), _span_json("d2", TEXT_B, 0, 10, group=2)],
     r"numbered 0\.\.2 without gaps; no span has group 1"),
    ([_span_json("d1", TEXT_A, 4, 12, group="a")], r"evidence\[0\]\.group must be an integer >= 0, got 'a'"),
    ([_span_json("d1", TEXT_A, 4, 12, group=-1)], r"evidence\[0\]\.group must be an integer >= 0, got -1"),
])
def test_bad_groups_name_the_file_line_and_field(tmp_path, evidence, message):
    path = tmp_path / "g.jsonl"
    g = GoldenFile(path)
    with pytest.raises(GoldenSetError, match=message):
        g.append([multi_case(evidence)])
    # a line written by another tool: the error names the file and line
    g.append([multi_case([_span_json("d1", TEXT_A, 4, 12)], "fine?")])
    prev = __import__("hashlib").sha256(path.read_text().splitlines()[0].encode()).hexdigest()
    bad = {**multi_case(evidence), "created_at": "2026-12-05T00:00:00+00:00", "prev": prev}
    with path.open("a") as fh:
        fh.write(json.dumps(bad, sort_keys=True, separators=(",", ":")) + "\n")
    with pytest.raises(GoldenSetError, match=rf"g\.jsonl:2: .*{message}"):
        GoldenFile(path).read_records()


def test_a_judgement_naming_a_group_the_case_lacks_is_an_error(tmp_path):
    g = GoldenFile(tmp_path / "g.jsonl")
    case = multi_case([_span_json("d1", TEXT_A, 4, 12, group=0), _span_json("d2", TEXT_B, 0, 10, group=1)])
    judged = {"type": "judgement", "id": "j-9", "case_id": case["id"], "verdict": "PART", "group": 2,
              "span": {k: v for k, v in _span_json("d3", TEXT_B, 11, 19).items() if k != "grade"},
              "judge": {"kind": "agent", "name": "t"}}
    g.append([case, judged])
    with pytest.raises(GoldenSetError, match=r"judgement j-9 names evidence group 2, but case .* has 2 group\(s\)"):
        load_golden(tmp_path / "g.jsonl")
    with pytest.raises(GoldenSetError, match=r"field 'group' must be an evidence group number >= 0, got 'x'"):
        g.append([{**judged, "id": "j-10", "group": "x"}])
