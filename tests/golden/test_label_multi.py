"""Judging a multi case's pooled passages per evidence group: the judge is shown the question and
the part each reference passage answers, names the part a passage answers, and the judgement
records that ``group`` (resolution then credits it to that group; :mod:`rag_experiments.golden.resolve`)."""

from __future__ import annotations

from rag_experiments.golden import GoldenFile
from rag_experiments.golden import label as lab
from rag_experiments.golden.records import new_id
from rag_experiments.golden.resolve import load_golden

from .anthropic_stub import client_for, prompt_of, stub, text  # noqa: F401

DOC = "".join(f"Paragraph {i}: " + "words about topic %d. " % i * 8 + "\n\n" for i in range(20))


def span(start: int, end: int, doc: str = "d1", **extra) -> dict:
    return {"doc_id": doc, "source_uri": f"mini/{doc}.html", "start": start, "end": end, "quote": DOC[start:end],
            "doc_hash": "hash-d1", **extra}


def hit(start: int, end: int, doc: str = "d1") -> dict:
    return {"chunk_id": f"{doc}:{start}", **span(start, end, doc), "text": DOC[start:end], "doc_type": "config"}


def test_the_judge_names_the_part_and_the_judgement_its_group(stub, tmp_path):
    path = tmp_path / "g.jsonl"
    multi = {"type": "case", "id": new_id("c", "multi"), "query": "what about topics 1 and 9?", "kind": "multi",
             "doc_type": "config", "provenance": {"method": "agent", "author": "t"},
             "evidence": [span(0, 60, grade=2, group=0), span(0, 60, "d2", grade=2, group=1)]}
    single = {"type": "case", "id": new_id("c", "one"), "query": "what about topic 3?", "kind": "paraphrase",
              "doc_type": "config", "provenance": {"method": "agent", "author": "t"},
              "evidence": [span(0, 60, grade=2)]}
    GoldenFile(path).append([multi, single])
    def responder(body):
        prompt = prompt_of(body)
        if "Part 1:" not in prompt:
            return text({"verdict": "NO", "reason": "single"})
        return text({"verdict": "PART", "part": 2 if "topic 9" in prompt.split("<passage>")[1] else 5,
                     "reason": "x"})

    stub.responder = responder
    hits = [hit(DOC.index("Paragraph 9"), DOC.index("Paragraph 9") + 80),
            hit(DOC.index("Paragraph 4"), DOC.index("Paragraph 4") + 80)]
    plan = lab.plan_labelling(path, lambda q: hits, k=5)
    assert len(plan.pending) == 4
    report = lab.run_labelling(plan, client_for(stub), concurrency=1)
    prompts = [prompt_of(r["body"]) for r in stub.requests()]
    multi_prompts = [p for p in prompts if "what about topics 1 and 9?" in p]
    assert len(multi_prompts) == 2 and all("Part 1: <reference>" + DOC[0:60] in p and "Part 2: <reference>" in p
                                           for p in multi_prompts)
    assert not any("Part 1:" in p for p in prompts if "topic 3?" in p)  # a one-group case: the prompt as before
    judged = {(r["case_id"], r["span"]["start"]): r for r in GoldenFile(path).read() if r["type"] == "judgement"}
    on_9 = judged[(multi["id"], DOC.index("Paragraph 9"))]
    on_4 = judged[(multi["id"], DOC.index("Paragraph 4"))]
    assert on_9["group"] == 1 and "group" not in on_4  # part 5 does not exist: no group, counted
    assert report.problems["part_missing"] == 1
    assert all("group" not in r for (cid, _), r in judged.items() if cid == single["id"])
    case = next(c for c in load_golden(path).cases if c.case_id == multi["id"])
    assert {e.ref: e.group for e in case.relevant}[on_9["id"]] == 1
    # an ungrouped relevant judgement on a multi case: the group with evidence in its document (d1: group 0)
    assert {e.ref: e.group for e in case.relevant}[on_4["id"]] == 0
