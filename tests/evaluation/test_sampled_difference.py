"""Whole-case sampled labels (issue 45 item 4): the paired difference of two runs' recall@k on the same
sample, and the t interval of the estimate, against values worked out by hand on a tiny golden set."""

from __future__ import annotations

import math

import pytest

import json

from rag_experiments.evaluation.sampled import (case_table, estimate_recall, estimate_recall_difference, sampling_design,
                                                table_difference, table_estimate, table_problem)
from rag_experiments.golden import GoldenFile
from rag_experiments.golden.label import judgement_record, new_id
from rag_experiments.golden.resolve import load_golden
from rag_experiments.stats.ipw import Stratum, difference_mean
from rag_experiments.types import Hit

DOC = "".join(f"Paragraph {i}: " + "words about topic %d. " % i * 12 + "\n\n" for i in range(40))
STEP = 200  # passage i is [STEP*i + 10, STEP*i + 110): no two overlap
T12 = 12.706204736174696  # Student's t, 1 degree of freedom, 0.975


def span(i: int) -> dict:
    s = STEP * i + 10
    return {"doc_id": "d1", "source_uri": "mini/d1.html", "start": s, "end": s + 100, "quote": DOC[s:s + 100],
            "doc_hash": "hash-d1"}


def hit_dict(i: int) -> dict:
    sp = span(i)
    return {**sp, "text": sp["quote"]}


def hits(*ids: int) -> list[Hit]:
    return [Hit(f"d1:{i}", "d1", "mini/d1.html", "", span(i)["start"], span(i)["end"], 0.0, r)
            for r, i in enumerate(ids, start=1)]


@pytest.fixture
def tiny(tmp_path):
    """Four cases, each with its own evidence (passages 39, 38, 37, 36). Cases 1-3 have pool pairs (the
    sample's population: 3 cases); cases 1 and 2 were drawn and every pool pair of theirs judged:
    case 1: passage 0 YES, 1 NO, 2 YES; case 2: passage 3 YES, 4 NO."""
    path = tmp_path / "experiments" / "golden" / "g.jsonl"
    ids = []
    records = []
    for n, ev in enumerate((39, 38, 37, 36), start=1):
        cid = new_id("c", f"question {n}")
        ids.append(cid)
        records.append({"type": "case", "id": cid, "query": f"question {n}", "kind": "paraphrase",
                        "doc_type": "config", "evidence": [{**span(ev), "grade": 2}],
                        "provenance": {"method": "human", "author": "t"}})
    design = {"id": "s-hand", "unit": "case", "stratum": "cases", "population": 3, "seed": 1, "inclusion": 2 / 3}
    for cid, judged in ((ids[0], {0: "YES", 1: "NO", 2: "YES"}), (ids[1], {3: "YES", 4: "NO"})):
        records += [judgement_record(cid, hit_dict(i), v, None, "m", sample=design) for i, v in judged.items()]
    GoldenFile(path).append(records)
    c1, c2, c3, c4 = ids
    # top 3 of run A and run B per case
    run_a = {c1: hits(39, 0, 1), c2: hits(3, 4, 5), c3: hits(37, 6, 7), c4: hits(36, 8, 9)}
    run_b = {c1: hits(0, 2, 1), c2: hits(38, 4, 5), c3: hits(6, 7, 8), c4: hits(36, 8, 9)}
    return load_golden(path), ids, run_a, run_b


def test_paired_difference_by_hand(tiny):
    g, ids, run_a, run_b = tiny
    design = sampling_design(g.records)
    assert design.unit == "case" and [(s.population, s.sampled) for s in design.strata.values()] == [(3, 2)]
    a = estimate_recall(g, run_a, ids, [3], design)[3]
    b = estimate_recall(g, run_b, ids, [3], design)[3]
    d = estimate_recall_difference(g, run_a, run_b, ids, [3], design)[3]
    # run A: base (own evidence only) 1, 0, 1, 1 -> 0.75; with the sample's labels case 1 is 2/3 (evidence and
    # passage 0 of {evidence, 0, 2}), case 2 is 1/2 (passage 3 of {evidence, 3}): corrections -1/3, +1/2;
    # 0.75 + (3/2) * (1/6) / 4 = 0.8125
    assert a.value == pytest.approx(0.8125)
    # run B: base 0, 1, 0, 1 -> 0.5; full: case 1 2/3 (0 and 2), case 2 1/2 (its evidence): +2/3, -1/2 -> 0.5625
    assert b.value == pytest.approx(0.5625)
    # paired: base differences 1, -1, 1, 0 -> 0.25; correction differences -1 and +1 -> sum 0: 0.25 = A - B
    assert d.value == pytest.approx(0.25) == pytest.approx(a.value - b.value)
    # its variance from the correction differences: s^2 = (1 + 1) / 1 = 2; 3^2 (1 - 2/3) 2 / 2 / 4^2 = 3/16,
    # not V_A + V_B: A's corrections have s^2 = 50/144 -> 0.032552, B's 98/144 -> 0.063802
    assert d.se == pytest.approx(math.sqrt(3 / 16))
    assert a.se == pytest.approx(math.sqrt(9 * (1 / 3) * (50 / 144) / 2 / 16))
    assert b.se == pytest.approx(math.sqrt(9 * (1 / 3) * (98 / 144) / 2 / 16))
    # two drawn cases: one degree of freedom, t = 12.706
    assert d.df == pytest.approx(1) and d.high - d.value == pytest.approx(T12 * d.se)
    # the same run against itself: exactly 0, no width
    same = estimate_recall_difference(g, run_a, run_a, ids, [3], design)[3]
    assert same.value == 0 and same.se == 0 and same.low == same.high == 0


def test_paired_difference_needs_a_whole_case_sample(tiny):
    g, ids, run_a, run_b = tiny
    design = sampling_design(g.records)
    pair_design = type(design)("pair", design.strata, design.stratum_of)
    with pytest.raises(ValueError, match="whole-case sample"):
        estimate_recall_difference(g, run_a, run_b, ids, [3], pair_design)


def test_difference_mean_t_interval_by_hand():
    # 4 cases scored; 2 of 3 eligible cases drawn, corrections -0.5 and 0.1 (as in test_ipw): se^2 = 0.016875
    base = [1.0, 0.5, 1.0, 0.0]
    t = difference_mean(base, {"all": [-0.5, 0.1]}, {"all": Stratum(3, 2)})
    z = difference_mean(base, {"all": [-0.5, 0.1]}, {"all": Stratum(3, 2)}, interval="normal")
    assert t.value == z.value == pytest.approx(0.475) and t.se == z.se == pytest.approx(math.sqrt(0.016875))
    assert t.df == pytest.approx(1) and t.high - t.value == pytest.approx(T12 * t.se)
    assert z.df is None and z.high - z.value == pytest.approx(1.959963984540054 * z.se)
    # two strata (Satterthwaite): h1 N=4, n=2, corrections 0 and 1 (s^2 = 0.5); h2 N=6, n=3, corrections
    # 0, 0, 1 (s^2 = 1/3); n = 10 cases. v1 = 16 (1/2) 0.5 / 2 / 100 = 0.02; v2 = 36 (1/2) (1/3) / 3 / 100 = 0.02
    # df = (0.02 + 0.02)^2 / (0.02^2 / 1 + 0.02^2 / 2) = 0.0016 / 0.0006 = 8/3
    two = difference_mean([0.0] * 10, {"h1": [0.0, 1.0], "h2": [0.0, 0.0, 1.0]},
                          {"h1": Stratum(4, 2), "h2": Stratum(6, 3)})
    assert two.value == pytest.approx((2 * 1 + 2 * 1) / 10)
    assert two.se == pytest.approx(math.sqrt(0.04)) and two.df == pytest.approx(8 / 3)
    # t quantile at 8/3 degrees of freedom (scipy.stats.t.ppf(0.975, 8/3) = 3.41977)
    assert two.high - two.value == pytest.approx(3.41977 * two.se, rel=1e-4)
    with pytest.raises(ValueError, match="interval"):
        difference_mean(base, {}, {"all": Stratum(3, 2)}, interval="wide")


def test_the_per_case_table_gives_the_same_estimates_after_a_json_round_trip(tiny):
    """What a run logs (sampled_labels.json) is enough for compare to pair two runs later."""
    g, ids, run_a, run_b = tiny
    design = sampling_design(g.records)
    ta, tb = (json.loads(json.dumps(case_table(g, run, ids, [3], design))) for run in (run_a, run_b))
    assert (ta["population"], ta["sampled"], ta["ks"]) == (3, 2, [3])
    # case 1 of run A: base 1 (its own evidence), correction -1/3; case 3 was not drawn: no correction
    assert ta["cases"][ids[0]] == {"base": [1.0], "delta": [pytest.approx(-1 / 3)]}
    assert ta["cases"][ids[2]] == {"base": [1.0]}
    assert table_estimate(ta, 3).value == pytest.approx(0.8125)
    assert table_estimate(tb, 3).value == pytest.approx(0.5625)
    d, why = table_difference(ta, tb, 3)  # B - A, the way compare reads a candidate against its baseline
    assert why == "" and d.value == pytest.approx(-0.25) and d.se == pytest.approx(math.sqrt(3 / 16))
    ref = estimate_recall_difference(g, run_b, run_a, ids, [3], design)[3]
    assert (d.value, d.se, d.low, d.high) == pytest.approx((ref.value, ref.se, ref.low, ref.high))


def test_a_table_pairs_only_the_cases_both_runs_scored_and_only_the_same_sample(tiny):
    g, ids, run_a, run_b = tiny
    design = sampling_design(g.records)
    ta = case_table(g, run_a, ids, [3], design)
    tb = case_table(g, run_b, ids[:3], [3], design)  # run B could not search case 4
    d, _ = table_difference(ta, tb, 3)
    # cases 1-3: base differences -1, +1, -1 -> -1/3; corrections B - A: 2/3 - (-1/3) = 1 and -1/2 - 1/2 = -1,
    # sum 0; s^2 = 2, se^2 = 3^2 (1 - 2/3) 2 / 2 / 3^2 = 1/3
    assert d.value == pytest.approx(-1 / 3) and d.se == pytest.approx(math.sqrt(1 / 3))
    other = {**tb, "sample": "s-other"}
    assert table_difference(ta, other, 3) == (None, "the two runs were not scored on the same case sample of "
                                                    "the same golden set")
    assert table_difference(ta, {**tb, "golden": "another"}, 3)[0] is None
    assert table_difference(ta, tb, 5) == (None, "recall@5 is not in both runs' sampled estimates")
    assert case_table(g, run_a, ids, [3], type(design)("pair", design.strata, design.stratum_of)) is None


def test_a_table_edited_by_hand_or_cut_short_is_named_not_a_traceback(tiny):
    g, ids, run_a, _ = tiny
    t = json.loads(json.dumps(case_table(g, run_a, ids, [3], sampling_design(g.records))))
    assert table_problem(t) == ""
    assert table_problem([1, 2]) == "not a JSON object"
    assert table_problem({k: v for k, v in t.items() if k != "cases"}) == "no cases"
    assert table_problem({**t, "sampled": 5}) == "sampled 5 of population 3"
    assert table_problem({**t, "cases": {**t["cases"], ids[0]: {"base": [1.0], "delta": ["x"]}}}) == (
        f"case {ids[0]}: base / delta do not hold one number per k")
    assert table_problem({**t, "cases": {**t["cases"], ids[2]: {"base": []}}}) == (
        f"case {ids[2]}: base / delta do not hold one number per k")
