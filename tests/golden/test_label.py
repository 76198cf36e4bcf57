"""LLM judging of retrieved passages: overlap rules, never re-judging, resume, malformed answers."""

from __future__ import annotations

import json
import re

import pytest

from rag_experiments.golden import GoldenFile
from rag_experiments.golden import label as lab
from rag_experiments.golden.records import Span, new_id
from rag_experiments.golden.resolve import Evidence, load_golden

from .anthropic_stub import client_for, prompt_of, status, stub, text  # noqa: F401

# the SDK warns that the default model is deprecated; the stub does not care
pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

DOC = "".join(f"Paragraph {i}: " + "words about topic %d. " % i * 8 + "\n\n" for i in range(20))
DOC_HASH = "hash-d1"


def span(start: int, end: int, doc: str = "d1") -> dict:
    return {"doc_id": doc, "source_uri": f"mini/{doc}.html", "start": start, "end": end, "quote": DOC[start:end],
            "doc_hash": DOC_HASH}


def hit(start: int, end: int, doc: str = "d1") -> dict:
    return {"chunk_id": f"{doc}:{start}", **span(start, end, doc), "text": DOC[start:end], "doc_type": "config"}


def case(query: str, start: int, end: int) -> dict:
    return {"type": "case", "id": new_id("c", query, "x"), "query": query, "kind": "paraphrase", "doc_type": "config",
            "evidence": [{**span(start, end), "grade": 2}], "provenance": {"method": "human", "author": "t"}}


def test_overlap_rules():
    ev = Span("d1", "u", 100, 200, "x" * 100, "h")
    assert lab.covers({"doc_id": "d1", "start": 150, "end": 400}, ev)  # exactly half of the evidence
    assert not lab.covers({"doc_id": "d1", "start": 151, "end": 400}, ev)
    assert not lab.covers({"doc_id": "d2", "start": 100, "end": 200}, ev)
    assert lab.covers({"doc_id": "d1", "start": 0, "end": 1000}, ev)  # a big chunk containing it
    assert lab.covers({"doc_id": "d1", "start": 120, "end": 140}, ev)  # a small chunk inside it
    assert lab.covers({"doc_id": "d1", "start": 190, "end": 210}, ev)  # half of the hit is evidence
    assert not lab.covers({"doc_id": "d1", "start": 190, "end": 211}, ev)
    assert not lab.covers({"doc_id": "d1", "start": 200, "end": 210}, ev)  # adjacent, no overlap
    # same passage: half of the shorter span, either way round
    assert lab.same_passage(("d1", 0, 100), ("d1", 50, 1000))
    assert lab.same_passage(("d1", 50, 1000), ("d1", 0, 100))
    assert not lab.same_passage(("d1", 0, 100), ("d1", 51, 1000))
    assert not lab.same_passage(("d1", 0, 100), ("d2", 0, 100))
    assert lab.parse_pair_key(lab.pair_key("c-1", "a|b", 3, 9)) == ("c-1", ("a|b", 3, 9))


def test_parse_verdict():
    assert lab.parse_verdict('{"verdict": "PART", "reason": " half  of it "}') == ("PART", "half of it", None)
    assert lab.parse_verdict('```json\n{"verdict": "NO"}\n```') == ("NO", None, None)
    assert lab.parse_verdict("YES") == (None, None, "malformed_json")
    assert lab.parse_verdict('["YES"]') == (None, None, "not_an_object")
    assert lab.parse_verdict('{"verdict": "yes"}') == (None, None, "bad_verdict")


@pytest.fixture
def golden(tmp_path):
    path = tmp_path / "experiments" / "golden" / "g.jsonl"
    c1, c2 = case("how big is topic one", 100, 200), case("what about topic five", 600, 700)
    gf = GoldenFile(path)
    gf.append([c1, c2])
    # a human already judged [1000, 1100) for c1: never ask the LLM about it (or anything overlapping it)
    gf.append([{"type": "judgement", "id": "j-human", "case_id": c1["id"], "span": span(1000, 1100),
                "verdict": "NO", "judge": {"kind": "human", "name": "ann"}}])
    return path, c1, c2


def retriever(hits_by_query):
    return lambda q: hits_by_query[q]


def test_label_judges_only_new_pairs_and_resumes(stub, golden):
    path, c1, c2 = golden
    bad_text = hit(300, 400)
    bad_text["text"] = "not the span"
    hits = {
        c1["query"]: [hit(50, 250),      # covers c1's evidence -> skipped
                      hit(1000, 1100),   # judged by a human already -> skipped
                      hit(1040, 1300),   # overlaps the human-judged span by >= half of the shorter -> skipped
                      hit(300, 400),     # judged
                      hit(320, 420),     # overlaps the previous hit in this run -> skipped
                      hit(1500, 1600),   # judged (malformed answer)
                      bad_text,          # text is not the span -> skipped
                      hit(1700, 1800)],  # beyond k=7 -> never considered
        c2["query"]: [hit(300, 400), hit(660, 800), hit(0, 90, doc="d2")],
    }
    answers = {"300": '{"verdict": "YES", "reason": "it says so"}', "1500": "I think YES",
               "660": '{"verdict": "PART"}', "0": '```json\n{"verdict": "NO"}\n```'}

    def responder(body):
        passage = re.search(r"<passage>\n(.*)\n</passage>", prompt_of(body), re.DOTALL).group(1)
        start = next(s for s in ("300", "1500", "660", "0")
                     if passage == DOC[int(s):int(s) + len(passage)] and (s != "0" or len(passage) == 90))
        return text(answers[start])

    stub.responder = responder
    stub.queue(status(529))
    plan = lab.plan_labelling(path, retriever(hits), k=7)
    # the overlap with an earlier hit of this plan is not "already judged": it is offered once (before: counted
    # as already_judged, which read as judgements that did not exist)
    assert plan.skipped == {"covers_evidence": 1, "already_judged": 2, "offered_already": 1, "hit_text_mismatch": 1}
    keys = [j.key for j in plan.jobs]
    assert keys == [lab.pair_key(c1["id"], "d1", 300, 400), lab.pair_key(c1["id"], "d1", 1500, 1600),
                    lab.pair_key(c2["id"], "d1", 300, 400), lab.pair_key(c2["id"], "d1", 660, 800),
                    lab.pair_key(c2["id"], "d2", 0, 90)]
    assert plan.estimate.requests == 5
    report = lab.run_labelling(plan, client_for(stub), concurrency=2)
    assert len(stub.requests()) == 6  # 5 pairs + one 529 retried by the SDK
    assert report.processed == 5 and report.judgements_appended == 4
    assert report.problems["malformed_json"] == 1
    assert report.problems["verdict_YES"] == 2 and report.problems["verdict_PART"] == 1
    judgements = [r for r in GoldenFile(path).read() if r["type"] == "judgement" and r["judge"]["kind"] == "llm"]
    assert len(judgements) == 4
    j = next(r for r in judgements if r["case_id"] == c1["id"])
    assert j["span"] == span(300, 400) and j["verdict"] == "YES" and j["reason"] == "it says so"
    assert j["judge"] == {"kind": "llm", "provider": "anthropic", "model": plan.model, "prompt_version": "judge-v1"}
    assert j["id"] == new_id("j", c1["id"], "d1", 300, 400, "llm", plan.model, "judge-v1")  # as before providers
    assert plan.checkpoint_path.name == "g.label.log.jsonl"

    # rerun with the same retriever: nothing to ask (the malformed one is not re-asked by default)
    plan2 = lab.plan_labelling(path, retriever(hits), k=7)
    assert plan2.pending == ()
    lab.run_labelling(plan2, None)
    assert len(stub.requests()) == 6

    # a different retriever (another chunking) returning overlapping spans: still no re-judging
    hits3 = {c1["query"]: [hit(290, 410), hit(1550, 1650)], c2["query"]: [hit(670, 810), hit(900, 1000)]}
    plan3 = lab.plan_labelling(path, retriever(hits3), k=20)
    assert [j.key for j in plan3.pending] == [lab.pair_key(c2["id"], "d1", 900, 1000)]
    # 290-410 and 670-810 now cover spans judged YES / PART (relevant evidence); 1550-1650 overlaps
    # the pair whose answer was malformed (checkpointed: not asked again)
    assert plan3.skipped == {"covers_evidence": 2, "already_judged": 1}

    # --retry-malformed asks again for exactly the malformed pair
    stub.responder = lambda body: text('{"verdict": "NO"}')
    plan4 = lab.plan_labelling(path, retriever(hits), k=7, retry_failed=True)
    assert [j.key for j in plan4.pending] == [lab.pair_key(c1["id"], "d1", 1500, 1600)]
    r4 = lab.run_labelling(plan4, client_for(stub))
    assert r4.judgements_appended == 1


def test_label_crash_then_resume_and_batch(stub, golden):
    path, c1, c2 = golden
    hits = {c1["query"]: [hit(300 + 100 * i, 390 + 100 * i) for i in range(5)],
            c2["query"]: [hit(1200 + 100 * i, 1290 + 100 * i) for i in range(5)]}
    stub.responder = lambda body: text('{"verdict": "NO", "reason": "other topic"}')

    def crash(entry):
        if entry["key"].endswith("|400|490"):
            raise KeyboardInterrupt

    plan = lab.plan_labelling(path, retriever(hits))
    with pytest.raises(KeyboardInterrupt):
        lab.run_labelling(plan, client_for(stub), concurrency=1, on_progress=crash)
    done = {json.loads(x)["key"] for x in plan.checkpoint_path.read_text().splitlines()}
    asked = len(stub.requests())
    # the answer in flight when the interrupt came is checkpointed too (it is paid for)
    assert asked == len(done) and 2 <= asked < 10

    # resume through the Message Batches API: only the remaining pairs are submitted
    plan2 = lab.plan_labelling(path, retriever(hits), batch=True)
    assert len(plan2.pending) == 10 - asked and not {j.key for j in plan2.pending} & done
    report = lab.run_labelling(plan2, client_for(stub), poll_interval=0.01)
    (batch_req,) = stub.requests("POST", "/v1/messages/batches")
    assert len(batch_req["body"]["requests"]) == 10 - asked and len(stub.requests()) == asked
    assert report.judgements_appended == 10 - asked and report.batch_usage.requests == 10 - asked
    assert report.judgements_reconciled == asked - 2  # checkpointed in flight, appended on resume
    golden_set = load_golden(path)
    c1_eval = next(c for c in golden_set.cases if c.case_id == c1["id"])
    assert sum(e.grade == 0 for e in c1_eval.evidence) == 5 + 1  # 5 LLM NOs + the human NO
    assert all(isinstance(e, Evidence) for e in c1_eval.evidence)
    assert lab.plan_labelling(path, retriever(hits)).pending == ()


def test_cli_label(stub, golden, monkeypatch, capsys):
    import sys
    import types

    from rag_experiments import cli

    path, c1, c2 = golden
    searched = []

    class Session:
        def search(self, query, k):
            searched.append(k)
            return [hit(300, 400), hit(1200, 1300)][:k]

        def close(self):
            pass

    monkeypatch.setitem(sys.modules, "rag_experiments.session",
                        types.SimpleNamespace(open_retriever=lambda overrides=None: Session()))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
    stub.responder = lambda body: text('{"verdict": "NO", "reason": "[bracketed] reason"}')
    assert cli.main(["golden", "label", "--golden", str(path), "-k", "2", "--dry-run"]) == 0
    assert "Estimate: 4 requests" in capsys.readouterr().out and not stub.requests()
    assert cli.main(["golden", "label", "--golden", str(path), "-k", "2", "--yes", "--concurrency", "2"]) == 0
    out = capsys.readouterr().out
    assert "judgements appended: 4" in out and "verdict_NO 4" in out and searched == [2, 2, 2, 2]
    assert cli.main(["golden", "label", "--golden", str(path), "-k", "2"]) == 0  # nothing to send: no prompt
    assert "to send: 0" in capsys.readouterr().out and len(stub.requests()) == 4
    assert cli.main(["golden", "stats", "--golden", str(path)]) == 0
    out = capsys.readouterr().out
    assert "judge-v1" in out and "not validated" in out
