"""Sampled labelling (issue 45 item 4): `golden label --sample N` / `--budget USD` judges a stratified
random sample of the pairs, records the design with each judgement, never pays twice, extends with a
larger N; --by-hand works the same way; evaluation turns the design into IPW estimates."""

from __future__ import annotations

import json
import re
import sys
import types

import pytest

from rag_experiments import cli
from rag_experiments.evaluation.sampled import estimate_recall, sampling_design
from rag_experiments.golden import GoldenFile
from rag_experiments.golden import label as lab
from rag_experiments.golden.resolve import load_golden
from rag_experiments.types import Hit

from .anthropic_stub import client_for, prompt_of, stub, text  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

DOC = "".join(f"Paragraph {i}: " + "words about topic %d. " % i * 12 + "\n\n" for i in range(40))
STEP = 200  # hit i of a case is [STEP*i + 10, STEP*i + 110): no two overlap


def span(start: int, end: int) -> dict:
    return {"doc_id": "d1", "source_uri": "mini/d1.html", "start": start, "end": end, "quote": DOC[start:end],
            "doc_hash": "hash-d1"}


def hit(i: int) -> dict:
    s = STEP * i + 10
    return {"chunk_id": f"d1:{i}", **span(s, s + 100), "text": DOC[s:s + 100], "doc_type": "config"}


def case(query: str, i: int) -> dict:
    s = STEP * i + 10
    return {"type": "case", "id": lab.new_id("c", query), "query": query, "kind": "paraphrase", "doc_type": "config",
            "evidence": [{**span(s, s + 100), "grade": 2}], "provenance": {"method": "human", "author": "t"}}


@pytest.fixture
def golden(tmp_path):
    path = tmp_path / "experiments" / "golden" / "g.jsonl"
    c1, c2 = case("question one", 39), case("question two", 38)
    GoldenFile(path).append([c1, c2])
    # each case retrieves 12 passages none of which is its evidence: 24 pairs, 6 in ranks 1-3
    hits = {c1["query"]: [hit(i) for i in range(12)], c2["query"]: [hit(i) for i in range(12, 24)]}
    return path, c1, c2, hits


def yes_for_even(body) -> dict:
    passage = re.search(r"<passage>\n(.*)\n</passage>", prompt_of(body), re.DOTALL).group(1)
    i = next(i for i in range(40) if hit(i)["text"] == passage)
    return text(json.dumps({"verdict": "YES" if i % 2 == 0 else "NO", "reason": "r"}))


def sampled_records(path) -> list[dict]:
    return [r for r in GoldenFile(path).read() if r["type"] == "judgement" and "sample" in r]


def test_sample_draws_per_stratum_records_the_design_resumes_and_extends(stub, golden):
    path, c1, c2, hits = golden
    stub.responder = yes_for_even
    spec = lab.SampleSpec(n=6, seed=7, strata="1-3,4-12", unit="pair")
    plan = lab.plan_labelling(path, lambda q: hits[q], k=12, sample=spec, source={"test": 1})
    d = plan.sample
    assert d.population == {"1-3": 6, "4-12": 18}
    # rates halve from one stratum to the next, at least 2 each: 2 + 2, then 2 left at r and r/2 over 4 and
    # 16 pairs (r = 2/12): 0.67 and 1.33 -> 1 and 1 (largest remainders: 0.67 then 0.33)
    assert d.allocated == {"1-3": 3, "4-12": 3} and len(plan.pending) == 6
    lab.run_labelling(plan, client_for(stub))
    recs = sampled_records(path)
    assert len(recs) == 6 and len(stub.requests()) == 6
    r = recs[0]["sample"]
    assert r["id"] == spec.sample_id({"test": 1}) and r["seed"] == 7
    assert sorted({(x["sample"]["stratum"], x["sample"]["population"], x["sample"]["inclusion"]) for x in recs}) == [
        ("1-3", 6, 0.5), ("4-12", 18, round(3 / 18, 6))]

    # the same seed again: the same sample, all judged, nothing sent
    plan2 = lab.plan_labelling(path, lambda q: hits[q], k=12, sample=spec, source={"test": 1})
    assert plan2.pending == () and plan2.sample.already == 6 and plan2.sample.population == d.population
    # a larger N extends it: the first 6 stay in the sample, 4 more are asked
    bigger = lab.SampleSpec(n=10, seed=7, strata="1-3,4-12", unit="pair")
    plan3 = lab.plan_labelling(path, lambda q: hits[q], k=12, sample=bigger, source={"test": 1})
    assert plan3.sample.already == 6 and len(plan3.pending) == 4
    lab.run_labelling(plan3, client_for(stub))
    assert len(stub.requests()) == 10 and len(sampled_records(path)) == 10

    # evaluation reads the design: n_h counted from the judged pairs, N_h as recorded
    g = load_golden(path)
    design = sampling_design(g.records)
    assert {k[1]: (s.population, s.sampled) for k, s in design.strata.items()} == {"1-3": (6, 4), "4-12": (18, 6)}
    # a run whose top 12 is the retrieved list: each relevant sampled pair stands for N_h / n_h pairs
    ranked = {c.case_id: [Hit(h["chunk_id"], "d1", "mini/d1.html", "", h["start"], h["end"], 0.0, i)
                          for i, h in enumerate(hits[c.query], start=1)] for c in g.cases}
    est = estimate_recall(g, ranked, [c1["id"], c2["id"]], [12], design)[12]
    expected = []
    for c in g.cases:
        x = sum(design.strata[design.stratum_of[e.ref]].weight for e in c.relevant if e.ref in design.stratum_of)
        expected.append(x / (1 + x))  # the case's own evidence (certain) is not retrieved
    assert est.value == pytest.approx(sum(expected) / 2) and est.low < est.value < est.high


def _retriever_answering(monkeypatch, hits: dict) -> None:
    """rag-exp golden label's retriever (session.open_retriever) answers each query with its hits."""

    class Session:
        def search(self, query, k):
            return hits[query][:k]

        def close(self):
            pass

    monkeypatch.setitem(sys.modules, "rag_experiments.session",
                        types.SimpleNamespace(open_retriever=lambda overrides=None: Session()))


def test_cli_sample_and_budget_through_the_stub(stub, golden, monkeypatch, capsys, tmp_path):
    path, c1, c2, hits = golden

    _retriever_answering(monkeypatch, hits)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
    stub.responder = yes_for_even
    base = ["golden", "label", "--golden", str(path), "-k", "12"]
    assert cli.main(base + ["--sample", "5", "--sample-unit", "pair", "--strata", "1-5,6-12", "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "5 of 24 pairs (ranks 1-5: 3 of 10, ranks 6-12: 2 of 14)" in out and "Estimate: 5 requests" in out
    assert not stub.requests()
    assert cli.main(base + ["--sample", "5", "--sample-unit", "pair", "--strata", "1-5,6-12", "--yes"]) == 0
    assert "judgements appended: 5" in capsys.readouterr().out and len(stub.requests()) == 5
    assert cli.main(base + ["--sample", "5", "--sample-unit", "pair", "--strata", "1-5,6-12", "--yes"]) == 0  # same seed: nothing paid twice
    assert "to send: 0" in capsys.readouterr().out and len(stub.requests()) == 5
    assert len(sampled_records(path)) == 5

    # --budget: the estimate's price per pair decides N (another seed: another sample)
    assert cli.main(base + ["--budget", "0.01", "--seed", "99", "--sample-unit", "pair", "--price", "3,15", "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    n = int(re.search(r"Estimate: (\d+) requests", out).group(1))
    usd = float(re.search(r"\$([0-9.]+)", out.split("Estimate:")[1]).group(1))
    assert 0 < n < 19 and usd <= 0.01 and "budget $0.01" in out
    # bad input: one line each
    assert cli.main(base + ["--sample", "5", "--sample-unit", "pair", "--strata", "2-5", "--dry-run"]) != 0
    assert "--strata: '2-5' must start at rank 1" in capsys.readouterr().err
    assert cli.main(base + ["--sample", "0", "--dry-run"]) != 0
    assert "--sample: must be >= 1 pair, got 0" in capsys.readouterr().err
    assert cli.main(base + ["--strata", "1-5,6-12", "--dry-run"]) != 0
    assert "--strata goes with --sample N" in capsys.readouterr().err
    assert cli.main(base + ["--sample", "5", "--strata", "1-5,6-12", "--dry-run"]) != 0
    assert "--strata are rank ranges of pairs: they go with --sample-unit pair" in capsys.readouterr().err


def test_by_hand_sample_export_import(golden, monkeypatch, capsys, tmp_path):
    path, c1, c2, hits = golden

    _retriever_answering(monkeypatch, hits)
    monkeypatch.setattr("rag_experiments.corpus.loader.load_corpus", lambda *a, **k: [types.SimpleNamespace(
        doc_id="d1", source_uri="mini/d1.html", text=DOC, content_hash="hash-d1")])
    sheet = tmp_path / "sheet.csv"
    base = ["golden", "label", "--golden", str(path), "-k", "12", "--by-hand", "--labeller", "ann"]
    assert cli.main(base + ["--sample", "4", "--seed", "3", "--sample-unit", "pair", "--strata", "1-5,6-12", "--export", str(sheet)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "4 of 24 pairs" in out and "wrote 4 passage(s)" in out
    assert "stratum" not in sheet.read_text()  # blind: the design is beside the sheet, not in it
    import csv

    rows = list(csv.DictReader(sheet.read_text().splitlines(keepends=True)))
    for row in rows:
        row["verdict"] = "y"
    with sheet.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert cli.main(["golden", "label", "--golden", str(path), "--by-hand", "--labeller", "ann",
                     "--import", str(sheet)]) == 0
    assert "recorded 4 verdict(s)" in capsys.readouterr().out
    recs = sampled_records(path)
    assert len(recs) == 4 and {r["judge"]["kind"] for r in recs} == {"human"}
    assert sorted(r["sample"]["population"] for r in recs) == [10, 10, 14, 14]  # 2 per stratum at least
    # the terminal loop offers nothing more for the same sample
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO(""))
    assert cli.main(base + ["--sample", "4", "--seed", "3", "--sample-unit", "pair", "--strata", "1-5,6-12"]) == 0
    assert "0 passage(s) to label by hand" in capsys.readouterr().out


def test_case_sample_judges_whole_cases_and_the_estimate_is_the_difference_estimator(stub, golden, tmp_path):
    path, c1, c2, hits = golden
    c3 = case("question three", 37)
    GoldenFile(path).append([c3])
    hits[c3["query"]] = [hit(i) for i in range(24, 30)]  # 6 more pairs: 30 in 3 cases
    stub.responder = yes_for_even
    spec = lab.SampleSpec(n=10, seed=5)  # unit case: 10 of 30 pairs -> 1 of 3 cases, but at least 2
    plan = lab.plan_labelling(path, lambda q: hits[q], k=12, sample=spec, source={"t": 2})
    d = plan.sample
    assert d.unit == "case" and d.population == {"cases": 3} and d.allocated == {"cases": 2}
    drawn = {j.payload["case_id"] for j in plan.jobs}
    assert len(drawn) == 2 and len(plan.jobs) == sum(len(hits[c["query"]]) for c in (c1, c2, c3) if c["id"] in drawn)
    lab.run_labelling(plan, client_for(stub))
    recs = sampled_records(path)
    assert {r["sample"]["unit"] for r in recs} == {"case"} and {r["case_id"] for r in recs} == drawn
    assert lab.plan_labelling(path, lambda q: hits[q], k=12, sample=spec, source={"t": 2}).pending == ()

    g = load_golden(path)
    design = sampling_design(g.records)
    assert design.unit == "case" and [(s.population, s.sampled) for s in design.strata.values()] == [(3, 2)]
    ranked = {c.case_id: [Hit(h["chunk_id"], "d1", "mini/d1.html", "", h["start"], h["end"], 0.0, i)
                          for i, h in enumerate(hits[c.query], start=1)] for c in g.cases}
    est = estimate_recall(g, ranked, [c["id"] for c in (c1, c2, c3)], [12], design)[12]
    # base: every case's own evidence is not retrieved -> recall 0 without the sample's labels; a drawn
    # case with its even-numbered hits judged YES: r YES found / (1 + r); the mean of base (0) plus
    # (3 / 2) * the sum of the drawn cases' corrections / 3 cases
    corrections = []
    for c in (c1, c2, c3):
        if c["id"] in drawn:
            r = sum(1 for h in hits[c["query"]] if int(h["chunk_id"].split(":")[1]) % 2 == 0)
            corrections.append(r / (1 + r))
    assert est.value == pytest.approx(1.5 * sum(corrections) / 3)
    assert est.low < est.value < est.high
