"""Honest label provenance: ``judge.kind: agent`` is a machine judge, not a human.

Agent labels (an AI coding agent, a script, a model used by hand) count as unvalidated until a
human spot-check agrees, exactly like the LLM judge's; and they do not beat a later LLM label
the way a human's does.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from rag_experiments.errors import GoldenSetError
from rag_experiments.golden import GoldenFile
from rag_experiments.golden import spotcheck as sc
from rag_experiments.golden.records import new_id, validate
from rag_experiments.golden.resolve import load_golden
from rag_experiments.pipeline import label_status


def _span(start: int, end: int = 0) -> dict:
    end = end or start + 50
    return {"doc_id": "d1", "source_uri": "mini/d1.html", "start": start, "end": end,
            "quote": ("p%05d " % start + "x" * 100)[: end - start], "doc_hash": "h"}


def _case(c: int) -> dict:
    return {"type": "case", "id": new_id("c", c), "query": f"question {c}?", "kind": "paraphrase",
            "doc_type": "config", "evidence": [{**_span(c * 1000), "grade": 2}],
            "provenance": {"method": "human", "author": "t"}}


def _judgement(jid: str, c: int, start: int, verdict: str, kind: str, **extra) -> dict:
    judge = {"kind": kind, "prompt_version": "v1"}
    judge["model" if kind == "llm" else "name"] = {"llm": "m", "agent": "coding agent", "human": "ann"}[kind]
    return {"type": "judgement", "id": jid, "case_id": new_id("c", c), "span": _span(start), "verdict": verdict,
            "judge": judge, **extra}


def _grade(golden, c: int, start: int) -> int:
    case = next(x for x in golden.cases if x.case_id == new_id("c", c))
    return next(e.grade for e in case.evidence if e.span.start == start)


def test_agent_is_a_judge_kind():
    rec = _judgement("j1", 0, 100, "YES", "agent") | {"created_at": "t", "prev": ""}
    assert validate(rec, "f:1") is rec
    with pytest.raises(GoldenSetError, match="judge.kind must be one of llm, human, agent"):
        validate({**rec, "judge": {"kind": "robot"}}, "f:1")


def test_a_later_llm_label_beats_an_agent_label_but_not_a_human_one(tmp_path):
    path = tmp_path / "g.jsonl"
    GoldenFile(path).append([
        _case(0), _case(1),
        _judgement("j-agent", 0, 100, "YES", "agent"), _judgement("j-llm0", 0, 100, "NO", "llm"),
        _judgement("j-human", 1, 1100, "YES", "human"), _judgement("j-llm1", 1, 1100, "NO", "llm"),
    ])
    golden = load_golden(path)
    assert _grade(golden, 0, 100) == 0  # the later LLM label wins over the agent's
    assert _grade(golden, 1, 1100) == 2  # a human's still beats a later LLM label


def _golden_with(tmp_path, judgements: list[dict]):
    path = tmp_path / "experiments" / "golden" / "g.jsonl"
    GoldenFile(path).append([_case(c) for c in range(10)] + judgements)
    return path


def _status(path):
    golden = load_golden(path)
    return label_status(SimpleNamespace(settings=SimpleNamespace(golden=SimpleNamespace(file=path)), golden=golden))


def _spotcheck(path, judgements: list[dict], wrong: int = 0) -> None:
    spot = sc.spotcheck_path(path)
    spot.parent.mkdir(parents=True, exist_ok=True)
    with open(spot, "a") as fh:
        for k, j in enumerate(judgements):
            human = j["verdict"] if k >= wrong else ("NO" if j["verdict"] != "NO" else "YES")
            fh.write(json.dumps({"type": "spotcheck", "judgement_id": j["id"], "human_verdict": human,
                                 "llm_verdict": j["verdict"], "judge": {"kind": j["judge"]["kind"],
                                 "model": j["judge"].get("model") or j["judge"]["name"], "prompt_version": "v1"}}) + "\n")


def _machine(kind: str, n: int = 40) -> list[dict]:
    verdicts = ["YES", "PART", "NO", "NO"]
    return [_judgement(f"j-{kind}-{i}", i % 10, (i % 10) * 1000 + 100 + (i // 10) * 60 + (kind == "agent") * 3,
                       verdicts[i % 4], kind) for i in range(n)]


def test_agent_labels_are_not_validated_until_a_human_spot_check_passes(tmp_path):
    agent = _machine("agent")
    path = _golden_with(tmp_path, agent)
    status = _status(path)
    assert status["status"] == "NOT-VALIDATED" and status["agent_judgements"] == 40 and not status["validated"]
    _spotcheck(path, agent[:30], wrong=3)
    status = _status(path)
    assert status["status"] == "validated" and status["judge_model"] == "coding agent"


def test_every_machine_judge_must_pass_its_own_spot_check(tmp_path):
    llm, agent = _machine("llm"), _machine("agent", 20)
    path = _golden_with(tmp_path, llm + agent)
    _spotcheck(path, llm[:30])  # the LLM judge is validated, the agent never checked
    v = sc.judge_validation(path)
    assert [j["validated"] for j in v["judges"]] == [True, False] and not v["validated"]
    assert _status(path)["status"] == "NOT-VALIDATED"


def test_superseding_a_human_kind_label_with_an_agent_one_makes_it_a_machine_label(tmp_path):
    """The demo-set correction in miniature: the old line stays, a superseding one re-attributes it."""
    wrong = _judgement("j-old", 0, 100, "YES", "human")
    path = _golden_with(tmp_path, [wrong])
    assert _status(path)["status"] == "no-machine-labels"
    fixed = _judgement("j-new", 0, 100, "YES", "agent", supersedes="j-old", reason="made by an agent")
    GoldenFile(path).append([fixed])
    status = _status(path)
    assert status["status"] == "NOT-VALIDATED" and status["machine_judgements"] == 1
    later = _judgement("j-llm", 0, 100, "NO", "llm")
    GoldenFile(path).append([later])
    assert _grade(load_golden(path), 0, 100) == 0


def test_golden_stats_counts_live_judgements_not_superseded_ones(tmp_path, capsys):
    from rag_experiments import cli

    path = _golden_with(tmp_path, [_judgement("j-old", 0, 100, "YES", "human")])
    GoldenFile(path).append([_judgement("j-new", 0, 100, "YES", "agent", supersedes="j-old", reason="agent-made")])
    assert cli.main(["golden", "stats", "--golden", str(path)]) == 0
    out = capsys.readouterr().out
    assert "judgements: 1 live (1 superseded)" in out
    table = out.split("judgements by judge")[1]
    assert "agent" in table and "human" not in table
