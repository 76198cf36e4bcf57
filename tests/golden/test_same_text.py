"""A verdict applies to the same text in every document, for every labeller kind (issue 57 item 4):
the LLM judge is never sent a passage whose text already has a verdict for the question (a
person's, an agent's or its own), sends a text repeated in the pool once, and records the copies
with the original judge and ``applied_from``; labelling by hand (a person or an agent) applies
the judge's verdicts the same way. Real golden file, the real SDK against a local stub.

On the old code the judge was sent each copy (3 requests here, not 1) and a person was offered a
passage the judge had judged in another document."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from rag_experiments.golden import GoldenFile
from rag_experiments.golden import hand_label as hl
from rag_experiments.golden import label as lab
from rag_experiments.golden.records import new_id
from rag_experiments.golden.resolve import load_golden
from rag_experiments.golden.same_text import applied_record

from .anthropic_stub import client_for, stub, text  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

P = "Set the worktree path with core.worktree; relative paths resolve from the git directory."
Q = "A merge commit records two parents and the merge base is found by git merge-base."
EVIDENCE = "The index holds the snapshot that becomes the next commit."
TEXTS = {"page.html": f"Intro.\n\n{EVIDENCE}\n\n{P}\n\nMore.\n\n{Q}\n",  # the original page
         "all.html": f"All commands.\n\n{P}\n\nOther.\n\n{Q}\n",  # the all-in-one page repeating it
         "page.txt": f"Source.\n\n{Q}\n"}  # the page's source text


def hit(doc: str, passage: str) -> dict:
    start = TEXTS[doc].index(passage)
    return {"chunk_id": f"{doc}:{start}", "doc_id": doc, "source_uri": doc, "start": start,
            "end": start + len(passage), "text": passage, "doc_hash": f"h-{doc}", "doc_type": "doc"}


def span_of(doc: str, passage: str) -> dict:
    h = hit(doc, passage)
    return {k: h[k] for k in ("doc_id", "source_uri", "start", "end", "doc_hash")} | {"quote": passage}


@pytest.fixture
def golden(tmp_path):
    path = tmp_path / "g.jsonl"
    case = {"type": "case", "id": "c-1", "query": "where does the worktree live", "kind": "paraphrase",
            "doc_type": "doc", "evidence": [{**span_of("page.html", EVIDENCE), "grade": 2}],
            "provenance": {"method": "human", "author": "t"}}
    GoldenFile(path).append([case])
    return path


def judged(path, who: dict, doc: str = "page.html", passage: str = P, verdict: str = "YES") -> str:
    rid = f"j-{who['kind']}"
    GoldenFile(path).append([{"type": "judgement", "id": rid, "case_id": "c-1", "span": span_of(doc, passage),
                              "verdict": verdict, "judge": who}])
    return rid


POOL = [hit("page.html", Q), hit("all.html", P), hit("all.html", Q), hit("page.txt", Q)]


def judgements(path) -> list[dict]:
    return [r for r in GoldenFile(path).read() if r["type"] == "judgement"]


@pytest.mark.parametrize("who", [{"kind": "human", "name": "ann"}, {"kind": "agent", "name": "claude"}])
def test_the_judge_is_sent_each_text_once_and_earlier_verdicts_are_copied(stub, golden, who):
    original = judged(golden, who)  # P judged in page.html by a person / an agent
    stub.responder = lambda body: text('{"verdict": "NO", "reason": "about merges"}')
    plan = lab.plan_labelling(golden, lambda q: POOL, k=10)
    # P in all.html has a verdict already; Q is in three documents: one request
    q = hit("page.html", Q)
    assert [j.key for j in plan.jobs] == [lab.pair_key("c-1", "page.html", q["start"], q["end"])]
    assert plan.skipped == {"same_text_already_judged": 1, "same_text_sent_once": 2}
    report = lab.run_labelling(plan, client_for(stub))
    assert len(stub.requests()) == 1 and report.judgements_applied == 1 and report.judgements_appended == 3

    by_doc = {(r["span"]["doc_id"], r["span"]["quote"]): r for r in judgements(golden)}
    copy_p = by_doc[("all.html", P)]  # the earlier verdict, with its judge (kind kept) and where it came from
    assert copy_p["verdict"] == "YES" and copy_p["judge"] == who and copy_p["applied_from"] == original
    assert copy_p["provenance"]["method"] == "applied" and copy_p["similarity"] == 1.0
    sent = by_doc[("page.html", Q)]
    assert sent["judge"]["kind"] == "llm" and "applied_from" not in sent
    for doc in ("all.html", "page.txt"):
        assert by_doc[(doc, Q)]["applied_from"] == sent["id"] and by_doc[(doc, Q)]["judge"] == sent["judge"]
        assert by_doc[(doc, Q)]["verdict"] == "NO"
    # every copy counts in evaluation like any judgement of its kind
    (case,) = load_golden(golden).cases
    assert {e.span.doc_id for e in case.evidence if e.grade == 2} == {"page.html", "all.html"}

    again = lab.plan_labelling(golden, lambda q: POOL, k=10)
    assert again.jobs == () and again.applied == ()  # nothing left to send or copy


def test_a_person_is_not_offered_a_text_the_judge_already_judged(golden):
    llm = {"kind": "llm", "provider": "anthropic", "model": "m", "prompt_version": "judge-v1"}
    original = judged(golden, llm, passage=Q, verdict="PART")
    plan = hl.plan_hand_labelling(golden, lambda q: POOL, k=10)
    assert [o.pair.hit["text"] for o in plan.offers] == [P]  # only P; every copy of Q has the judge's verdict
    assert {(r["span"]["doc_id"], r["judge"]["kind"], r["applied_from"]) for r in plan.applied} == {
        ("all.html", "llm", original), ("page.txt", "llm", original)}
    report = hl.run_terminal(plan, labeller="ann", stdin=io.StringIO("y\n"), console=Console(file=io.StringIO()))
    assert report.labels == 1 and report.applied_earlier == 2
    got = {(r["span"]["doc_id"], r["span"]["quote"]): r for r in judgements(golden)}
    assert got[("page.txt", Q)]["verdict"] == "PART" and got[("page.txt", Q)]["judge"] == llm


def test_an_agents_verdict_by_hand_reaches_the_copies_the_judge_would_see(golden):
    plan = hl.plan_hand_labelling(golden, lambda q: POOL[:1], k=10)  # the agent sees Q in page.html only
    hl.run_terminal(plan, labeller="claude", stdin=io.StringIO("n\n"), console=Console(file=io.StringIO()),
                    judge_kind="agent")
    (agents,) = judgements(golden)
    # the judge then pools more documents: Q's copies get the agent's verdict (kind agent), only P is sent
    later = lab.plan_labelling(golden, lambda q: POOL, k=10)
    assert [j.payload["hit"]["text"] for j in later.jobs] == [P]
    assert {(r["span"]["doc_id"], r["judge"]["kind"], r["verdict"], r["applied_from"]) for r in later.applied} == {
        ("all.html", "agent", "NO", agents["id"]), ("page.txt", "agent", "NO", agents["id"])}


def test_the_copy_id_is_its_own_and_keeps_the_evidence_group():
    rec = lab.judgement_record("c-1", hit("page.html", Q), "PART", None, "m")
    rec["group"] = 1
    at = hit("page.txt", Q)
    copy = applied_record(rec, "c-1", at, 1.0)
    assert copy["id"] == new_id("j", "c-1", "page.txt", at["start"], at["end"], "applied", rec["id"]) != rec["id"]
    assert copy["group"] == 1 and copy["verdict"] == "PART"
