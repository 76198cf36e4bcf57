"""The case sample (rag-exp golden spotcheck --cases N) and the judge-corrected metrics built on it.

Golden set: 40 cases, each with its own evidence span E (grade 2) and two machine judgements: A
(YES) and B (NO). Every run ranks A, B, E, then unjudged filler. Under the machine's labels a
case's relevant spans are E and A: RR@10 = 1, recall@5 = 1. People say A is NO on even cases
(relevant: E only, RR@10 = 1/3) and agree on odd ones.
"""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from rich.console import Console

from rag_experiments.evaluation.evaluate import EvalParams, evaluate
from rag_experiments.evaluation.judge_corrected import corrected_delta, human_case, judge_corrected
from rag_experiments.golden import GoldenFile
from rag_experiments.golden import spotcheck as sc
from rag_experiments.golden.records import new_id
from rag_experiments.golden.resolve import load_golden
from rag_experiments.types import Hit, RankedList

N = 40


def _span(start: int, end: int) -> dict:
    return {"doc_id": "d1", "source_uri": "mini/d1.html", "start": start, "end": end,
            "quote": f"passage {start} " + "x" * (end - start - len(f"passage {start} ")), "doc_hash": "h"}


def _judge() -> dict:
    return {"kind": "llm", "model": "m", "prompt_version": "judge-v1"}


def build_golden(path):
    records = []
    for c in range(N):
        cid = new_id("c", c)
        base = c * 1000
        records.append({"type": "case", "id": cid, "query": f"question {c}?", "kind": "paraphrase",
                        "doc_type": "config", "evidence": [{**_span(base, base + 50), "grade": 2}],
                        "provenance": {"method": "human", "author": "t"}})
        for h, verdict in ((1, "YES"), (2, "NO")):
            records.append({"type": "judgement", "id": new_id("j", c, h), "case_id": cid,
                            "span": _span(base + h * 100, base + h * 100 + 50), "verdict": verdict, "judge": _judge()})
    GoldenFile(path).append(records)
    return path


@pytest.fixture
def golden(tmp_path):
    return build_golden(tmp_path / "experiments" / "golden" / "g.jsonl")


def _hit(start: int, rank: int) -> Hit:
    return Hit(f"ch{start}", "d1", "mini/d1.html", "config", start, start + 50, 1.0 / rank, rank)


def results_of(golden_set, order=(1, 2, 0)) -> dict[str, RankedList]:
    """Per case: A, B, E (offsets 100, 200, 0 in the case's block) in ``order``, then 3 unjudged hits."""
    out = {}
    for c, case in enumerate(sorted(golden_set.cases, key=lambda k: int(k.query.split()[1].rstrip("?")))):
        base = c * 1000
        starts = [base + o * 100 for o in order] + [base + 500 + 60 * i for i in range(3)]
        out[case.case_id] = RankedList(case.query, tuple(_hit(s, r) for r, s in enumerate(starts, start=1)))
    return out


def _people(c: int, h: int) -> str:
    return "NO" if (h == 2 or c % 2 == 0) else "YES"


def check_cases(golden, cases: list[int]) -> None:
    spot = sc.spotcheck_path(golden)
    for c in cases:
        for h in (1, 2):
            sc.append_spotcheck(spot, {"type": "spotcheck", "id": f"s{c}-{h}", "judgement_id": new_id("j", c, h),
                                       "case_id": new_id("c", c), "human_verdict": _people(c, h),
                                       "llm_verdict": "YES" if h == 1 else "NO", "judge": _judge()})


def _index(golden) -> dict[str, int]:
    return {new_id("c", c): c for c in range(N)}


def _console():
    return Console(file=io.StringIO(), width=200, highlight=False)


def test_the_sample_is_the_complete_prefix_of_the_case_order(golden):
    idx = _index(golden)
    order = [idx[c] for c in sc.order_cases(idx)]
    assert sorted(order) == list(range(N)) and order != list(range(N))  # seeded, not file order
    check_cases(golden, order[:5] + order[6:9])  # the 6th case of the order is not checked
    records = GoldenFile(golden).read_records()
    s = sc.case_sample(records, sc.read_spotchecks(sc.spotcheck_path(golden)))
    assert [idx[c] for c in s.cases] == order[:5]  # stops at the first incomplete case
    assert s.next_case == new_id("c", order[5]) and s.next_missing == 2
    assert s.pairs == 10 and s.n_all == N and s.machine_pairs == 2 * N
    assert s.to_minimum == 2 * (30 - 8)  # 8 of the first 30 cases are checked
    assert s.grades[new_id("j", order[0], 1)] == (0 if order[0] % 2 == 0 else 2)


def test_spotcheck_cases_asks_every_pair_of_a_case_and_a_skipped_pair_again(golden):
    idx = _index(golden)
    order = [idx[c] for c in sc.order_cases(idx)]
    # 3 cases: 6 pairs; the 4th answer is a skip -> case 2 of the order stays incomplete
    result = sc.run_spotcheck(golden, cases=3, author="ann", stdin=io.StringIO("y\nn\ny\ns\nn\nn\n"),
                              console=_console())
    assert result["answered"] == 5 and result["skipped"] == 1
    assert result["case_sample"]["cases"] == 1 and result["case_sample"]["next_case"] == new_id("c", order[1])
    saved = sc.read_spotchecks(sc.spotcheck_path(golden))
    assert all(r["design"] == {"sample": "cases", "case_seed": sc.CASE_SEED} for r in saved)
    assert [r["case_id"] for r in saved] == [new_id("c", order[i]) for i in (0, 0, 1, 1, 2, 2)]
    console = _console()
    again = sc.run_spotcheck(golden, cases=3, author="ann", stdin=io.StringIO("y\n"), console=console)
    assert again["asked"] == 1  # only the skipped pair
    assert again["case_sample"]["cases"] == 3 and again["case_sample"]["pairs"] == 6
    out = console.file.getvalue()
    assert "Case sample (judge-corrected metrics): 3 of 40 cases" in out
    # below the minimum for a corrected interval: the 27 other cases of the first 30 hold 54 unchecked pairs
    assert "from 30 cases: 54 unchecked pair(s) in the first 30: rag-exp golden spotcheck --cases 30" in out
    assert "to halve" not in out


def test_report_says_how_many_more_cases_halve_the_judge_part(golden):
    idx = _index(golden)
    check_cases(golden, [idx[c] for c in sc.order_cases(idx)][:30])
    v = sc.judge_validation(golden)
    cs = v["case_sample"]
    # (1/n' - 1/40) = (1/30 - 1/40) / 4 -> n' = 1 / (0.0020833 + 0.025) = 36.9 -> 37
    assert cs["cases"] == 30 and cs["cases_to_halve"] == 37 and cs["more_cases_to_halve"] == 7
    assert cs["more_pairs_to_halve"] == 14  # 2 machine pairs per case
    console = _console()
    sc.print_report(v, console)
    assert "7 more cases (~14 more pairs at 2.0 machine pairs per case): rag-exp golden spotcheck --cases 37" \
        in console.file.getvalue()


def test_export_with_cases_writes_every_unchecked_pair_of_those_cases(golden, tmp_path):
    out = tmp_path / "sheet.csv"
    assert sc.export_pairs(golden, out, cases=4) == 8
    result = sc.import_answers(golden, out.with_name("sheet.csv"), author="ann")  # empty verdicts: skipped
    assert result["skipped"] == 8 and result["case_sample"]["cases"] == 0


def test_with_every_case_checked_the_corrected_metric_is_the_people_metric(golden):
    check_cases(golden, list(range(N)))
    g = load_golden(golden)
    results = results_of(g)
    params = EvalParams()
    machine = evaluate(g, results, params)
    assert machine.metrics["mrr_at_10"] == pytest.approx(1.0)
    jc = judge_corrected(g, results, params, machine.per_case)
    c = jc.estimates["mrr_at_10"]
    assert c.estimate == pytest.approx((1 + 1 / 3) / 2) and c.uncorrected == pytest.approx(1.0)
    assert c.se_judge == 0.0 and len(jc.cases) == N
    # independently: the people's verdicts written into the golden set as judgements, scored as usual
    people = [{"type": "judgement", "id": f"p{c}-{h}", "case_id": new_id("c", c),
               "span": _span(c * 1000 + h * 100, c * 1000 + h * 100 + 50), "verdict": _people(c, h),
               "judge": {"kind": "human", "name": "ann"}} for c in range(N) for h in (1, 2)]
    GoldenFile(golden).append(people)
    truth = evaluate(load_golden(golden), results, params).metrics
    for name, est in jc.estimates.items():
        assert est.estimate == pytest.approx(truth[name]), name
    m = jc.metrics()
    assert m["judge_corrected_mrr_at_10"] == pytest.approx(2 / 3) and m["judge_corrected.cases"] == N
    assert m["judge_corrected_mrr_at_10.ci_low"] <= 2 / 3 <= m["judge_corrected_mrr_at_10.ci_high"]
    assert "mrr@10 0.667" in "\n".join(jc.lines())


def test_a_sample_below_the_minimum_gives_no_corrected_metric(golden):
    idx = _index(golden)
    order = [idx[c] for c in sc.order_cases(idx)]
    check_cases(golden, order[:29])
    g = load_golden(golden)
    results = results_of(g)
    per_case = evaluate(g, results).per_case
    assert judge_corrected(g, results, EvalParams(), per_case) is None
    check_cases(golden, order[29:30])
    jc = judge_corrected(load_golden(golden), results, EvalParams(), per_case)
    assert jc is not None and len(jc.cases) == 30
    # the sample's people-label RR: 1/3 on even cases, 1 on odd ones
    for cid in jc.cases:
        assert jc.human[cid]["mrr_at_10"] == pytest.approx(1 / 3 if idx[cid] % 2 == 0 else 1.0)


def test_human_case_replaces_only_the_machine_verdicts_it_is_given(golden):
    g = load_golden(golden)
    case = next(c for c in g.cases if c.case_id == new_id("c", 0))
    swapped = human_case(case, {new_id("j", 0, 1): 0})
    assert {e.ref: e.grade for e in swapped.evidence} == {**{e.ref: e.grade for e in case.evidence},
                                                         new_id("j", 0, 1): 0}
    assert replace(swapped, evidence=case.evidence) == case


def test_the_paired_difference_is_corrected_per_case(golden):
    check_cases(golden, list(range(N)))
    g = load_golden(golden)
    a_res, b_res = results_of(g), results_of(g, order=(0, 1, 2))  # b ranks the evidence first
    pa, pb = evaluate(g, a_res).per_case, evaluate(g, b_res).per_case
    ja = judge_corrected(g, a_res, EvalParams(), pa).to_json()
    jb = judge_corrected(g, b_res, EvalParams(), pb).to_json()
    d = corrected_delta(pa, pb, ja, jb, "mrr_at_10")
    # machine: both RR 1 -> delta 0; people: a has 1/3 on even cases, b always 1 -> delta (2/3) / 2
    assert d.uncorrected == pytest.approx(0.0)
    assert d.estimate == pytest.approx(1 / 3)
    assert corrected_delta(pa, pb, ja, None, "mrr_at_10") is None


def test_cli_spotcheck_cases_reads_piped_stdin_and_refuses_a_bad_count(golden, monkeypatch, capsys):
    from rag_experiments import cli

    monkeypatch.setattr("sys.stdin", io.StringIO("y\nn\n" * 2))
    assert cli.main(["golden", "spotcheck", "--golden", str(golden), "--cases", "2"]) == 0
    out = capsys.readouterr().out
    assert "Case sample (judge-corrected metrics): 2 of 40 cases" in out
    assert len(sc.read_spotchecks(sc.spotcheck_path(golden))) == 4
    assert cli.main(["golden", "spotcheck", "--golden", str(golden), "--cases", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --cases must be >= 1, got 0"]
