"""The leakage bar at generation (issue 47 item 1): questions over their kind's content-word overlap
bar are rewritten once by a second prompt, then dropped if still over; counts per kind; nothing paid
twice. Driven through the real SDK against the local Anthropic API stub."""

from __future__ import annotations

import json
import re
import sys
import types

import pytest

from rag_experiments import cli
from rag_experiments.errors import ConfigError
from rag_experiments.golden import GoldenFile
from rag_experiments.golden import generate as gen
from rag_experiments.golden.quality import quality_report
from rag_experiments.golden.resolve import load_golden

from .anthropic_stub import TEST_KEY, client_for, prompt_of, status, stub, text  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

LEAD = "The server keeps a pool of shared memory buffers for table and index pages."
PROSE = (LEAD + " Setting the parameter higher lets more of the working set stay in memory, at the cost of "
         "memory that the operating system could otherwise use for its own file cache. ")
COPYING = "which shared memory buffers hold table and index pages"  # 6 of its 7 content words are the quote's


def chunk(cid: str, text_: str, *, doc: str, doc_type: str, start: int, n_tokens: int) -> dict:
    return {"chunk_id": cid, "doc_id": doc, "source_uri": f"mini/{doc}.html", "doc_type": doc_type,
            "start": start, "end": start + len(text_), "text": text_, "n_tokens": n_tokens, "doc_hash": f"hash-{doc}"}


def corpus() -> list[dict]:
    """9 chunks (doc d, section i), each naming its own identifier `param_d_i`."""
    out = []
    for d in range(3):
        for i in range(3):
            body = f"Section {d}.{i} about `param_{d}_{i}`. " + PROSE * (1 + i)
            out.append(chunk(f"ch{d}{i}", body, doc=f"doc{d}", doc_type=["config", "sql", "tutorial"][d],
                             start=1000 * i, n_tokens=50 + 70 * i))
    return out


def is_rewrite(body: dict) -> bool:
    return body.get("system") == gen.REWRITE_SYSTEM_PROMPT


def generation_answer(body: dict):
    """Every paraphrase copies the passage; the exact question of section 0 does too (beside its
    identifier), the others are the plain "what does X do?"."""
    passage = re.search(r"<passage>\n(.*)\n</passage>", prompt_of(body), re.DOTALL).group(1)
    ident = re.search(r"`([^`]+)`", passage).group(1)
    quote = passage.split(". ")[0] + ". " + LEAD
    exact = f"{ident} shared memory buffers table pages" if ident.endswith("_0") else f"what does {ident} do?"
    return text([{"kind": "paraphrase", "question": COPYING, "identifier": None, "evidence_quote": quote},
                 {"kind": "exact", "question": exact, "identifier": ident, "evidence_quote": quote}])


def rewrite_answer(body: dict):
    """Exact questions come back in a user's words; paraphrases too for docs 0 and 2, while doc 1's
    rewrite still copies (so it is dropped)."""
    prompt = prompt_of(body)
    ident = re.search(r"Identifier to keep verbatim: (\S+)", prompt)
    if ident:
        return text({"question": f"why would I change {ident.group(1)}"})
    doc = re.search(r"`param_(\d)_\d`", prompt).group(1)
    if doc == "1":
        return text({"question": "which shared memory buffers keep table and index pages"})
    return text({"question": f"how much RAM does the database set aside for caching (case {doc})"})


def responder(body: dict):
    return rewrite_answer(body) if is_rewrite(body) else generation_answer(body)


EXPECTED = {  # per kind, over the 9 chunks
    "exact": {"generated": 9, "kept": 6, "rewritten": 3, "dropped": 0, "pending": 0, "unchecked": 0},
    "paraphrase": {"generated": 9, "kept": 0, "rewritten": 6, "dropped": 3, "pending": 0, "unchecked": 0},
}


def counts_only(counts: dict) -> dict:
    return {k: {f: v for f, v in r.items() if not f.startswith("overlap")} for k, r in counts.items()}


def test_leakage_measure_and_bars():
    quote = "Set work_mem to the memory a sort may use before it spills to disk."
    assert gen.leakage("how much memory can a sort use", quote) == pytest.approx(3 / 4)  # much, memory, sort, use
    # an exact question's identifier is not counted: it is shared by design
    assert gen.leakage("work_mem sort memory", quote, "work_mem") == 1.0
    assert gen.leakage("what does work_mem do?", quote, "work_mem") is None
    assert gen.leakage("what does work_mem do?", quote) == 1.0  # the quality report's measure counts it
    assert gen.parse_bars(None) == {"paraphrase": 0.5, "exact": 0.75}
    assert gen.parse_bars(["paraphrase=0.3", "exact=off", "production=1"]) == {"paraphrase": 0.3, "production": 1.0}
    for bad in (["paraphrase"], ["paraphrase=high"], ["exact=1.5"], ["=0.2"]):
        with pytest.raises(ConfigError) as err:
            gen.parse_bars(bad)
        assert str(err.value).startswith("--leakage-bar: ")


def test_rewrite_answers_are_checked():
    held = {"case": {"id": "c-1", "query": "work_mem sort memory", "kind": "exact", "identifier": "work_mem",
                     "evidence": [{"quote": "Set work_mem to the memory a sort may use."}],
                     "provenance": {"source_chunk": "ch1"}}, "overlap": 1.0, "bar": 0.75}
    interpret = gen.interpret_rewrite("m")
    lost = interpret(held, json.dumps({"question": "how big can sorts get before spilling"}))
    assert lost["outcome"] == "dropped" and lost["problems"] == {"rewrite_lost_identifier": 1}
    assert interpret(held, "no json")["problems"] == {"rewrite_malformed_json": 1}
    still = interpret(held, json.dumps({"question": "work_mem memory for a sort"}))
    assert still["outcome"] == "dropped" and still["overlap_after"] == 1.0
    ok = interpret(held, json.dumps({"question": "is work_mem why my query writes temp files?"}))
    rec = ok["records"][0]
    assert ok["outcome"] == "rewritten" and rec["query"] == "is work_mem why my query writes temp files?"
    assert rec["id"] != "c-1" and rec["provenance"]["rewritten_from"] == "work_mem sort memory"
    assert rec["provenance"]["leakage"] == {"overlap": 0.0, "bar": 0.75, "before": 1.0}


def test_generate_rewrites_then_drops_and_never_pays_twice(stub, tmp_path):
    golden_path = tmp_path / "experiments" / "golden" / "g.jsonl"
    chunks = corpus()
    # first run: every rewrite request fails (HTTP 500, no SDK retry): the held questions wait
    stub.responder = lambda body: status(500) if is_rewrite(body) else generation_answer(body)
    plan = gen.plan_generation(chunks, golden_path, n=150, model="claude-sonnet-4-5")
    assert plan.bars == gen.LEAKAGE_BARS and plan.rewrite_estimate.requests == 9 * 2
    report = gen.run_generation(plan, client_for(stub, max_retries=0), concurrency=2)
    assert len(stub.requests()) == 9 + 12 and report.processed == 9 and report.api_errors == 12
    assert report.problems["over_leakage_bar"] == 12
    assert {k: r["pending"] for k, r in report.leakage.items()} == {"exact": 3, "paraphrase": 9}
    assert [r["query"] for r in GoldenFile(golden_path).read()].count(COPYING) == 0  # held, not appended
    assert len(GoldenFile(golden_path).read()) == 6  # the clean exact questions

    # second run: no chunk is asked again; only the 12 rewrites are sent
    stub.responder = responder
    plan = gen.plan_generation(chunks, golden_path, n=150, model="claude-sonnet-4-5")
    assert not plan.pending and plan.rewrites_pending == 12
    report = gen.run_generation(plan, client_for(stub), concurrency=2)
    sent = stub.requests()[21:]
    assert len(sent) == 12 and all(r["body"]["system"] == gen.REWRITE_SYSTEM_PROMPT for r in sent)
    assert counts_only(report.leakage) == EXPECTED and report.rewrites_processed == 12
    assert report.problems["rewrite_still_over_bar"] == 3 and report.problems["rewritten"] == 9
    records = GoldenFile(golden_path).read()
    assert len(records) == 6 + 9 and COPYING not in {r["query"] for r in records}
    rewritten = [r for r in records if "rewritten_from" in r["provenance"]]
    assert len(rewritten) == 9
    assert all(r["provenance"]["leakage"]["overlap"] <= r["provenance"]["leakage"]["bar"] <
               r["provenance"]["leakage"]["before"] for r in rewritten)
    assert all(r["identifier"] in r["query"] for r in rewritten if r["kind"] == "exact")
    before, after = report.leakage["paraphrase"]["overlap_before"], report.leakage["paraphrase"]["overlap_after"]
    assert before == pytest.approx(6 / 7, abs=1e-3) and after == 0.0

    # third run: nothing is sent, the counts are the same, the golden set is unchanged
    digest = GoldenFile(golden_path).digest()
    plan = gen.plan_generation(chunks, golden_path, n=150, model="claude-sonnet-4-5")
    assert not plan.pending and plan.rewrites_pending == 0
    report = gen.run_generation(plan, None)
    assert len(stub.requests()) == 33 and counts_only(report.leakage) == EXPECTED
    assert GoldenFile(golden_path).digest() == digest
    log = golden_path.with_name("g.rewrite.log.jsonl").read_text().splitlines()
    summaries = [json.loads(x) for x in log if '"leakage_summary"' in x]
    assert counts_only(summaries[-1]["counts"]) == EXPECTED


def test_no_bar_keeps_every_question(stub, tmp_path):
    golden_path = tmp_path / "g.jsonl"
    stub.responder = responder
    plan = gen.plan_generation(corpus(), golden_path, n=150, model="claude-sonnet-4-5", bars={})
    report = gen.run_generation(plan, client_for(stub))
    assert len(stub.requests()) == 9 and report.cases_appended == 18
    assert counts_only(report.leakage) == {k: {"generated": 9, "kept": 9, "rewritten": 0, "dropped": 0, "pending": 0,
                                               "unchecked": 0} for k in ("exact", "paraphrase")}


class FakeSession:
    def __init__(self, chunks):
        self._chunks = chunks

    def chunks(self):
        return list(self._chunks)

    def close(self):
        pass


def test_cli_prints_counts_and_refuses_a_bad_bar(stub, tmp_path, monkeypatch, capsys):
    session = FakeSession(corpus())
    monkeypatch.setitem(sys.modules, "rag_experiments.session",
                        types.SimpleNamespace(open_retriever=lambda overrides=None: session))
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
    stub.responder = responder
    golden_path = tmp_path / "experiments" / "golden" / "g.jsonl"
    rc = cli.main(["golden", "generate", "--golden", str(golden_path), "--yes", "--max-retries", "0"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "leakage bar (content-word overlap" in out and "exact 0.75, paraphrase 0.5" in out
    assert "exact: 9 generated, 6 kept, 3 rewritten, 0 dropped" in out
    assert "paraphrase: 9 generated, 0 kept, 6 rewritten, 3 dropped; mean overlap 0.86 -> 0.00" in out
    assert len(stub.requests()) == 21

    rc = cli.main(["golden", "generate", "--golden", str(tmp_path / "other.jsonl"), "--yes",
                   "--leakage-bar", "paraphrase=lots"])
    err = capsys.readouterr().err
    assert rc == 2 and "--leakage-bar: paraphrase='lots'" in err and "Traceback" not in err
    assert len(stub.requests()) == 21


def _case(cid: str, query: str, quote: str, kind: str, method: str) -> dict:
    return {"type": "case", "id": cid, "query": query, "kind": kind, "doc_type": "config",
            "evidence": [{"doc_id": "d", "source_uri": "d.md", "start": 0, "end": len(quote), "quote": quote,
                          "doc_hash": "h", "grade": 2}],
            "provenance": {"method": method}}


def test_quality_report_compares_with_hand_written_questions(tmp_path):
    quote = "Set work_mem to the memory a sort or hash may use before it spills to temporary files on disk."
    golden_path = tmp_path / "g.jsonl"
    GoldenFile(golden_path).append([
        _case("c1", "work_mem memory sort hash spills", quote, "paraphrase", "llm"),  # 1.0
        _case("c2", "how much memory before a sort spills to disk", quote, "paraphrase", "llm"),  # all but "much": 5/6
        _case("h1", "why are my queries writing temp files today", quote, "production", "human"),  # files: 1/5
        _case("h2", "queries slow with big joins", quote, "paraphrase", "human"),  # 0
    ])
    golden = load_golden(golden_path)
    report = quality_report(golden.scorable, reference=gen_reference(golden))
    ref = report.reference
    assert ref["generated"] == {"n": 2, "mean_overlap": 0.917} and ref["reference"] == {"n": 2, "mean_overlap": 0.1}
    assert ref["who"].startswith("cases written by a person")
    assert any("hand-written" in w for w in report.warnings)
    # a query imported from a log is not a reference (its relevant passages come from a pool)
    imported = {"c1": "generated", "c2": "generated"}
    assert gen_reference_of([{"type": "case", "id": "q1", "kind": "production", "provenance": {"method": "import"}},
                             {"type": "case", "id": "c1", "kind": "paraphrase", "provenance": {"method": "agent"}},
                             {"type": "case", "id": "c2", "kind": "exact", "provenance": {"method": "llm"}}]) == imported
    # without hand-written cases there is nothing to compare with
    alone = quality_report([c for c in golden.scorable if c.case_id.startswith("c")],
                           reference=gen_reference(golden))
    assert alone.reference is None


def gen_reference_of(raws: list[dict]) -> dict[str, str]:
    from rag_experiments.golden.quality import reference_groups

    return reference_groups([types.SimpleNamespace(raw=r) for r in raws])


def gen_reference(golden) -> dict[str, str]:
    from rag_experiments.golden.quality import reference_groups

    return reference_groups(golden.records)


def test_stats_shows_the_reference_comparison(tmp_path, capsys):
    quote = "Set work_mem to the memory a sort or hash may use before it spills to temporary files on disk."
    golden_path = tmp_path / "g.jsonl"
    GoldenFile(golden_path).append([
        _case("c1", "work_mem memory sort hash spills", quote, "paraphrase", "llm"),
        _case("h1", "why are my queries writing temp files today", quote, "production", "human"),
    ])
    assert cli.main(["golden", "stats", "--golden", str(golden_path)]) == 0
    out = capsys.readouterr().out
    assert "hand-written reference" in out and "1.00" in out and "0.20" in out
