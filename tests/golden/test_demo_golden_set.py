"""The shipped demo golden set (experiments/golden/demo.jsonl): integrity and coverage.

No database: everything is checked against the demo corpus files.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from rag_experiments.corpus.loader import load_corpus
from rag_experiments.golden.resolve import load_golden
from rag_experiments.golden.golden_file import GoldenFile

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "experiments" / "golden" / "demo.jsonl"


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return GoldenFile(GOLDEN).read()  # verifies the hash chain and the manifest


@pytest.fixture(scope="module")
def docs() -> dict:
    return {d.doc_id: d for d in load_corpus("demo")}


@pytest.fixture(scope="module")
def cases(records) -> list[dict]:
    return [r for r in records if r["type"] == "case"]


def _spans(records):
    for r in records:
        if r["type"] == "case":
            for ev in r["evidence"]:
                yield r["id"], ev
        elif r["type"] == "judgement":
            yield r["id"], r["span"]


def test_file_verifies_and_manifest_matches(records, cases):
    gf = GoldenFile(GOLDEN)
    assert gf.manifest_path.exists()
    manifest = json.loads(gf.manifest_path.read_text())
    assert manifest["records"] == len(records)
    assert manifest["cases"] == len(cases)
    assert manifest["sha256"] == gf.digest()
    assert len(records) == len({r["id"] for r in records})


def test_every_span_resolves_in_the_demo_corpus(records, docs):
    n = 0
    for rid, span in _spans(records):
        doc = docs.get(span["doc_id"])
        assert doc is not None, f"{rid}: unknown document {span['doc_id']}"
        assert span["doc_hash"] == doc.content_hash, f"{rid}: document {span['doc_id']} changed"
        assert doc.text[span["start"]:span["end"]] == span["quote"], f"{rid}: span text differs from quote"
        assert span["source_uri"] == doc.source_uri
        n += 1
    assert n >= 200


def test_exact_cases_carry_a_verbatim_identifier(cases):
    exact = [c for c in cases if c["kind"] == "exact"]
    assert exact
    for c in exact:
        ident = c.get("identifier")
        assert ident, f"{c['id']}: exact case without identifier"
        assert ident in c["query"], f"{c['id']}: identifier {ident!r} not in the query"
        assert any(ident in ev["quote"] for ev in c["evidence"]), f"{c['id']}: identifier {ident!r} not in the evidence"


def test_size_and_balance(cases, docs):
    assert len(cases) >= 200
    chunks = {c["provenance"]["source_chunk"] for c in cases}
    assert len(chunks) >= 100
    kinds = Counter(c["kind"] for c in cases)
    assert set(kinds) == {"paraphrase", "exact"}
    for kind in ("paraphrase", "exact"):
        assert 0.40 <= kinds[kind] / len(cases) <= 0.60, kinds
    assert {c["doc_type"] for c in cases} == {d.doc_type for d in docs.values()}


def test_provenance_is_truthful(cases):
    for c in cases:
        prov = c["provenance"]
        assert prov["method"] == "agent"
        assert "no API call" in prov["author"]
        assert prov["chunking"] == "heading-200-breadcrumbs"


def test_near_miss_judgements_are_recorded_as_agent_labels(records, cases):
    """The 320 near-miss verdicts were made by an AI coding agent. They were first written with
    judge.kind "human" (lines 231-550 stay as they are: append-only); each is superseded by an
    agent judgement with the same case, span and verdict and a reason (issue 12)."""
    case_ids = {c["id"] for c in cases}
    judgements = [r for r in records if r["type"] == "judgement"]
    assert all(j["case_id"] in case_ids for j in judgements)
    by_id = {j["id"]: j for j in judgements}
    human = [j for j in judgements if j["judge"]["kind"] == "human"]
    agent = [j for j in judgements if j["judge"]["kind"] == "agent" and j["judge"].get("prompt_version") != POOL_PROMPT]
    assert len(human) == 320 and len(agent) == 320
    superseded = {j["supersedes"] for j in agent}
    assert superseded == {j["id"] for j in human}  # no human-kind label is live any more
    for j in agent:
        old = by_id[j["supersedes"]]
        assert (j["case_id"], j["span"], j["verdict"]) == (old["case_id"], old["span"], old["verdict"])
        assert "AI coding agent" in j["reason"] and j["verdict_reason"] == old["reason"]
        assert "AI coding agent" in j["judge"]["name"]
    resolved = load_golden(GOLDEN)
    assert not any("human" in c.judge_kinds for c in resolved.cases)
    assert sum(1 for c in resolved.cases if "agent" in c.judge_kinds) >= 50


def test_demo_runs_report_unvalidated_labels():
    """What every run on the demo set tags and warns: agent labels with no human spot-check."""
    from types import SimpleNamespace

    from rag_experiments.pipeline import label_status

    golden = load_golden(GOLDEN)
    status = label_status(SimpleNamespace(settings=SimpleNamespace(golden=SimpleNamespace(file=GOLDEN)), golden=golden))
    assert status["status"] == "NOT-VALIDATED"
    assert status["agent_judgements"] == 320 + 1719 and status["llm_judgements"] == 0


POOL_PROMPT = "pool-manual-v1"


def test_variant_pool_judgements_are_agent_labels_with_their_pool(records, cases):
    """The pool of the four variants' top 5 (issue 29, label_variant_pool.py): 1719 pairs judged
    by AI coding agents, appended after the earlier records (none rewritten), each with the pool
    it came from, none re-judging a span its case already had a label for."""
    judgements = [r for r in records if r["type"] == "judgement"]
    pool = [j for j in judgements if j["judge"].get("prompt_version") == POOL_PROMPT]
    assert len(pool) == 1719
    assert Counter(j["verdict"] for j in pool) == {"NO": 1453, "PART": 204, "YES": 62}
    first = min(records.index(j) for j in pool)
    assert all(r["type"] == "judgement" and r["judge"].get("prompt_version") == POOL_PROMPT
               for r in records[first:]), "the pool judgements are one appended block"
    for j in pool:
        assert j["judge"]["kind"] == "agent" and "AI coding agents" in j["judge"]["name"]
        assert j["reason"].strip() and "supersedes" not in j
        definition = j["provenance"]["pool"]
        assert definition["k"] == 5 and len(definition["runs"]) == 4
        assert definition["sweep"] == "e756507f6b2348ecb021a0ffbfd482c2"
    earlier = {(j["case_id"], j["span"]["doc_id"], j["span"]["start"], j["span"]["end"])
               for j in judgements if j["judge"].get("prompt_version") != POOL_PROMPT}
    for c in cases:
        for ev in c["evidence"]:
            earlier.add((c["id"], ev["doc_id"], ev["start"], ev["end"]))
    keys = [(j["case_id"], j["span"]["doc_id"], j["span"]["start"], j["span"]["end"]) for j in pool]
    assert len(set(keys)) == len(keys) and not set(keys) & earlier
