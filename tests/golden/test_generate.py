"""Golden-set generation: sampling, validation, checkpoint/resume, batches, the CLI (real SDK + stub)."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
import types
from collections import Counter
from pathlib import Path

import pytest

from rag_experiments import cli, llm
from rag_experiments.golden import GoldenFile
from rag_experiments.golden import generate as gen
from rag_experiments.golden.records import new_id

from .anthropic_stub import TEST_KEY, client_for, hang, prompt_of, status, stub, text  # noqa: F401

# the SDK warns that the default model is deprecated; the stub does not care
pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

PROSE = ("The server keeps a pool of shared memory buffers for table and index pages. Setting the "
         "parameter higher lets more of the working set stay in memory, at the cost of memory that "
         "the operating system could otherwise use for its own file cache. ")


def chunk(cid: str, text_: str, *, doc: str = "d1", doc_type: str = "config", start: int = 0,
          n_tokens: int | None = None) -> dict:
    return {"chunk_id": cid, "doc_id": doc, "source_uri": f"mini/{doc}.html", "doc_type": doc_type,
            "start": start, "end": start + len(text_), "text": text_,
            "n_tokens": n_tokens if n_tokens is not None else len(text_.split()), "doc_hash": f"hash-{doc}"}


def passage_of(body: dict) -> str:
    return re.search(r"<passage>\n(.*)\n</passage>", prompt_of(body), re.DOTALL).group(1)


def good_answer(passage: str) -> list[dict]:
    """A well-formed answer: a paraphrase and, if the passage has a `backticked` identifier, an exact."""
    first = passage.split(". ")[0]
    items = [{"kind": "paraphrase", "question": f"how big should my cache be for case {len(passage)}",
              "identifier": None, "evidence_quote": first}]
    ident = re.search(r"`([^`]+)`", passage)
    if ident:
        items.append({"kind": "exact", "question": f"what does {ident.group(1)} do?", "identifier": ident.group(1),
                      "evidence_quote": first})
    return items


def good_responder(body: dict):
    return text(good_answer(passage_of(body)))


def corpus(n_docs: int = 6) -> list[dict]:
    """Chunks over several docs and doc types; each text is unique and has an identifier."""
    out = []
    for d in range(n_docs):
        doc_type = ["config", "sql", "tutorial"][d % 3]
        for i in range(3):
            body = f"Section {d}.{i} about `param_{d}_{i}`. " + PROSE * (1 + i)
            out.append(chunk(f"ch{d}{i}", body, doc=f"doc{d}", doc_type=doc_type, start=100 * i,
                             n_tokens=50 + 70 * i))
    return out


# == sampling ===================================================================================
def test_token_buckets():
    assert [gen.token_bucket(n) for n in (40, 63, 64, 127, 128, 255, 256, 9000)] == \
        ["<64", "<64", "64-127", "64-127", "128-255", "128-255", "256+", "256+"]


@pytest.mark.parametrize("text_, n_tokens, reason", [
    ("A short stub.", 5, "too_short"),
    ("# Chapter 19. Server Configuration and Operation in Detail With a Very Long Title Here\n\n"
     "## Section One Of The Chapter That Goes On And On\n", 45, "heading_only"),
    ("| --- | --- | --- |\n" * 20, 80, "table_punctuation"),
    ("## Contents\n" + "".join(f"- [Chapter {i}](ch{i}.html)\n" for i in range(12)), 60, "navigation"),
    ("Prev | Up | Next\n" * 2 + "Home\n" + "[Index](i.html) [Top](t.html)\n", 41, "navigation"),
    (PROSE * 2, 80, None),
    ("| Code | Condition |\n|---|---|\n| `40P01` | deadlock_detected |\n| `40001` | serialization_failure |\n"
     "| `23505` | unique_violation |\n| `42P01` | undefined_table |\n", 60, None),
    ("```sql\nCREATE INDEX CONCURRENTLY idx ON t (a);\n```\nBuilding an index concurrently avoids locking "
     "out writes; see [the docs](x.html) for caveats.\n", 45, None),
])
def test_boilerplate_rules(text_, n_tokens, reason):
    assert gen.boilerplate_reason(chunk("x", text_, n_tokens=n_tokens)) == reason


def test_allocate_is_proportional_with_a_floor_of_one():
    q = gen.allocate({"a": 100, "b": 50, "c": 3, "d": 1}, 20)
    assert sum(q.values()) == 20 and q["c"] >= 1 and q["d"] == 1
    assert q["a"] > q["b"] > q["c"]
    assert gen.allocate({"a": 2, "b": 3}, 10) == {"a": 2, "b": 3}  # fewer chunks than n: take all
    assert gen.allocate({k: 5 for k in "abcdef"}, 3) == {k: 1 for k in "abcdef"}  # more strata than n


def _sampling_corpus() -> list[dict]:
    rng = random.Random(0)
    chunks = []
    for i in range(400):
        doc_type = rng.choice(["config", "sql", "tutorial", "errcodes"])
        n_tok = rng.choice([45, 70, 100, 150, 200, 300, 500])
        chunks.append(chunk(f"c{i:04d}", f"chunk {i} " + PROSE, doc=f"doc{i % 37}", doc_type=doc_type,
                            n_tokens=n_tok))
    # a rare stratum with a single chunk, and boilerplate that must never be sampled
    chunks.append(chunk("rare", "a rare faq entry " + PROSE, doc_type="faq", n_tokens=60))
    chunks += [chunk(f"stub{i}", "Tiny.", doc_type="config", n_tokens=3) for i in range(30)]
    chunks += [chunk(f"nav{i}", "".join(f"* [Part {j}](p{j}.html)\n" for j in range(15)), doc_type="sql",
                     n_tokens=90) for i in range(30)]
    return chunks


def test_stratified_sample_covers_strata_is_reproducible_and_skips_boilerplate():
    chunks = _sampling_corpus()
    result = gen.stratified_sample(chunks, n=40, seed=13)
    picked = result.chunks
    assert len(picked) == len({c["chunk_id"] for c in picked})
    assert {c["doc_type"] for c in picked} == {"config", "sql", "tutorial", "errcodes", "faq"}
    assert "rare" in {c["chunk_id"] for c in picked}  # at least one per non-empty stratum
    assert all(taken >= 1 for _, taken in result.strata.values())
    strata = {(c["doc_type"], gen.token_bucket(c["n_tokens"])) for c in picked}
    assert strata == set(result.strata)
    assert not any(c["chunk_id"].startswith(("stub", "nav")) for c in picked)
    assert result.skipped == {"too_short": 30, "navigation": 30}
    # fixed seed: same sample whatever the input order; another seed: another sample
    shuffled = chunks[:]
    random.Random(5).shuffle(shuffled)
    assert [c["chunk_id"] for c in gen.sample_chunks(shuffled, n=40, seed=13)] == [c["chunk_id"] for c in picked]
    assert {c["chunk_id"] for c in gen.sample_chunks(chunks, n=40, seed=14)} != {c["chunk_id"] for c in picked}
    # proportional: the big strata get more than the rare one
    sizes = Counter((c["doc_type"]) for c in picked)
    assert sizes["faq"] == 1 and max(sizes.values()) > 5


# == validation =================================================================================
PASSAGE = "Sets `work_mem` for sorts. The default value is four megabytes (4MB). Larger values help."


@pytest.mark.parametrize("answer, problems, n_ok", [
    ("not json at all", {"malformed_json": 1}, 0),
    ('{"kind": "paraphrase"}', {"not_a_list": 1}, 0),
    ("[]", {"empty_answer": 1}, 0),
    ('```json\n[{"kind": "paraphrase", "question": "how much memory can one sort use", "identifier": null, '
     '"evidence_quote": "Sets `work_mem` for sorts."}]\n```', {}, 1),
    ('[1, {"kind": "other", "question": "q", "evidence_quote": "x"}, {"kind": "exact", "question": "",'
     ' "evidence_quote": "x"}, {"kind": "paraphrase", "question": "q", "evidence_quote": 3}]', {"bad_item": 4}, 0),
    ('[{"kind": "exact", "question": "what is work_mem", "identifier": null, "evidence_quote": "x"}]',
     {"exact_without_identifier": 1}, 0),
    ('[{"kind": "exact", "question": "what is WORK_MEM", "identifier": "WORK_MEM", "evidence_quote": "x"}]',
     {"identifier_not_verbatim": 1}, 0),
    ('[{"kind": "exact", "question": "what is the sort memory", "identifier": "work_mem", "evidence_quote": "x"}]',
     {"identifier_not_in_question": 1}, 0),
    ('[{"kind": "paraphrase", "question": "so the default value is four megabytes (4MB). Larger values help?", "identifier": null,'
     ' "evidence_quote": "x"}]', {"paraphrase_copies_passage": 1}, 0),
    ('[{"kind": "paraphrase", "question": "a", "identifier": null, "evidence_quote": "x"},'
     ' {"kind": "paraphrase", "question": "b", "identifier": null, "evidence_quote": "x"},'
     ' {"kind": "exact", "question": "a work_mem", "identifier": "work_mem", "evidence_quote": "x"}]',
     {"duplicate_kind": 1}, 2),
])
def test_parse_generation_counts_each_problem(answer, problems, n_ok):
    items, got = gen.parse_generation(answer, PASSAGE)
    assert dict(got) == problems
    assert len(items) == n_ok


def test_build_cases_locates_quotes_in_document_coordinates():
    c = chunk("ch1", PASSAGE, doc="rc", start=1000)
    items = [
        {"kind": "paraphrase", "question": "how much memory for a sort", "identifier": None,
         "evidence_quote": "The default value is four megabytes (4MB)."},
        {"kind": "exact", "question": "work_mem default?", "identifier": "work_mem",
         "evidence_quote": "The default  value is\nfour megabytes"},  # whitespace differs
        {"kind": "paraphrase", "question": "invented", "identifier": None, "evidence_quote": "not in the passage"},
    ]
    cases, notes = gen.build_cases(c, items, "m")
    assert notes == Counter({"quote_whitespace_located": 1, "quote_not_found": 1})
    doc_text = " " * 1000 + PASSAGE
    for case in cases:
        ev = case["evidence"][0]
        assert doc_text[ev["start"]:ev["end"]] == ev["quote"]
        assert ev["grade"] == 2 and ev["doc_hash"] == "hash-rc"
        prov = case["provenance"]
        assert (prov["method"], prov["model"], prov["prompt_version"], prov["source_chunk"]) == \
            ("llm", "m", gen.PROMPT_VERSION, "ch1")
        assert case["id"] == new_id("c", case["query"], "ch1")
    assert cases[0]["evidence"][0]["quote"] == "The default value is four megabytes (4MB)."
    assert cases[1]["identifier"] == "work_mem" and cases[1]["evidence"][0]["quote"] == "The default value is four megabytes"
    assert (cases[2]["evidence"][0]["start"], cases[2]["evidence"][0]["end"]) == (1000, 1000 + len(PASSAGE))
    assert [c_["provenance"]["evidence_located"] for c_ in cases] == ["exact", "whitespace", "chunk_fallback"]
    assert "identifier" not in cases[0]
    from rag_experiments.golden.records import validate

    for i, case in enumerate(cases):  # valid golden records
        validate({**case, "created_at": "t", "prev": ""}, f"case {i}")


def test_check_chunk_rejects_indexed_text():
    c = chunk("x", "abc")
    c["text"] = "Page > Section\nabc"
    with pytest.raises(ValueError, match="indexed text"):
        gen.check_chunk(c)


# == end to end against the stub ================================================================
def _golden(tmp_path: Path) -> Path:
    return tmp_path / "experiments" / "golden" / "g.jsonl"


def test_generate_end_to_end_with_retries_validation_and_resume(stub, tmp_path):
    chunks = corpus(3)  # 9 chunks
    golden_path = _golden(tmp_path)
    special = {"ch00": "malformed", "ch10": "empty", "ch20": "bad_ident"}

    def responder(body):
        p = passage_of(body)
        cid = next(c["chunk_id"] for c in chunks if c["text"] == p)
        kind = special.get(cid)
        if kind == "malformed":
            return text('[{"kind": "paraphrase", "question": ')
        if kind == "empty":
            return text("[]")
        if kind == "bad_ident":
            return text([{"kind": "exact", "question": "what is PARAM_X", "identifier": "PARAM_X",
                          "evidence_quote": "x"},
                         {"kind": "paraphrase", "question": "why is my server slow", "identifier": None,
                          "evidence_quote": "not a quote from the passage"}])
        return good_responder(body)

    stub.responder = responder
    stub.queue(status(429), status(529))  # the first call is refused twice, then answered
    plan = gen.plan_generation(chunks, golden_path, n=150, model="claude-sonnet-4-5")
    assert len(plan.pending) == 9 and plan.already_done == 0
    assert plan.estimate.requests == 9 and plan.estimate.usd > 0
    report = gen.run_generation(plan, client_for(stub), concurrency=3)
    assert len(stub.requests()) == 9 + 2
    assert report.processed == 9 and report.api_errors == 0
    assert report.problems["malformed_json"] == 1
    assert report.problems["empty_answer"] == 1
    assert report.problems["identifier_not_verbatim"] == 1
    assert report.problems["quote_not_found"] == 1
    # 6 good chunks x 2 questions + 1 paraphrase falling back to the chunk span
    assert report.cases_appended == 13
    assert report.usage.requests == 9 and report.usage.input_tokens > 0 and report.cost_usd > 0
    records = GoldenFile(golden_path).read()
    assert len(records) == 13 and {r["kind"] for r in records} == {"paraphrase", "exact"}
    fallback = next(r for r in records if r["provenance"]["source_chunk"] == "ch20")
    c20 = next(c for c in chunks if c["chunk_id"] == "ch20")
    assert (fallback["evidence"][0]["start"], fallback["evidence"][0]["end"]) == (c20["start"], c20["end"])
    log = [json.loads(x) for x in plan.checkpoint_path.read_text().splitlines()]
    assert plan.checkpoint_path.name == "g.generate.log.jsonl"
    assert {e["key"] for e in log} == {c["chunk_id"] for c in chunks}
    malformed = next(e for e in log if e["key"] == "ch00")
    assert malformed["unusable"] and malformed["raw"].startswith("[{")

    # rerun: nothing is sent again, nothing appended twice
    digest = GoldenFile(golden_path).digest()
    plan2 = gen.plan_generation(chunks, golden_path)
    assert plan2.pending == () and plan2.already_done == 9 and plan2.estimate.requests == 0
    report2 = gen.run_generation(plan2, None)
    assert len(stub.requests()) == 11 and report2.cases_appended == 0
    assert GoldenFile(golden_path).digest() == digest

    # --retry-malformed asks again only for the malformed one
    stub.responder = good_responder
    plan3 = gen.plan_generation(chunks, golden_path, retry_failed=True)
    assert [j.key for j in plan3.pending] == ["ch00"]
    report3 = gen.run_generation(plan3, client_for(stub))
    assert report3.cases_appended == 2 and len(stub.requests()) == 12
    assert gen.plan_generation(chunks, golden_path, retry_failed=True).pending == ()


def test_api_errors_are_not_checkpointed_as_done(stub, tmp_path):
    chunks = corpus(1)
    stub.responder = good_responder
    stub.queue(status(529), status(529))  # max_retries=1: the first request fails for good
    plan = gen.plan_generation(chunks, _golden(tmp_path))
    report = gen.run_generation(plan, client_for(stub, max_retries=1), concurrency=1)
    assert report.api_errors == 1 and report.processed == 2 and "529" in report.errors[0]
    plan2 = gen.plan_generation(chunks, _golden(tmp_path))
    assert len(plan2.pending) == 1  # retried on the next run
    gen.run_generation(plan2, client_for(stub))
    assert gen.plan_generation(chunks, _golden(tmp_path)).pending == ()


def test_a_torn_checkpoint_line_is_asked_again_and_reported(stub, tmp_path):
    chunks = corpus(1)  # 3 chunks
    stub.responder = good_responder
    golden_path = _golden(tmp_path)
    gen.run_generation(gen.plan_generation(chunks, golden_path), client_for(stub), concurrency=1)
    cp_path = gen.checkpoint_path(golden_path, "generate")
    lines = cp_path.read_text().splitlines(keepends=True)
    cp_path.write_text("".join(lines[:-1]) + lines[-1][:25])  # the last outcome killed mid-write
    plan = gen.plan_generation(chunks, golden_path)
    assert len(plan.pending) == 1
    n = len(stub.requests())
    report = gen.run_generation(plan, client_for(stub))
    assert report.torn_checkpoint_lines == 1 and len(stub.requests()) == n + 1
    assert report.cases_appended == 0 and report.cases_already_present == 2  # its cases were already in


def test_fatal_auth_error_stops_the_run(stub, tmp_path):
    stub.responder = lambda body: status(401)
    plan = gen.plan_generation(corpus(2), _golden(tmp_path))
    with pytest.raises(llm.LLMFatalError, match="credentials"):
        gen.run_generation(plan, client_for(stub, max_retries=0), concurrency=2)
    assert len(stub.requests()) < 6  # the pending chunks were cancelled


class Crash(Exception):
    pass


def test_crash_halfway_then_resume_makes_no_repeated_calls(stub, tmp_path):
    chunks = corpus(4)  # 12 chunks
    golden_path = _golden(tmp_path)
    stub.responder = lambda body: text(good_answer(passage_of(body)), output_tokens=30)
    seen = []

    def crash_after_4(entry):
        seen.append(entry["key"])
        if len(seen) == 4:
            raise Crash("injected")

    plan = gen.plan_generation(chunks, golden_path)
    with pytest.raises(Crash):
        gen.run_generation(plan, client_for(stub), concurrency=2, on_progress=crash_after_4)
    first_prompts = stub.prompts()
    checkpointed = {json.loads(x)["key"] for x in plan.checkpoint_path.read_text().splitlines()}
    assert 4 <= len(checkpointed) < 12
    # every answer received was checkpointed (the in-flight ones too): nothing paid for is lost
    assert len(checkpointed) == len(first_prompts)

    plan2 = gen.plan_generation(chunks, golden_path)
    assert {j.key for j in plan2.pending} == {c["chunk_id"] for c in chunks} - checkpointed
    report = gen.run_generation(plan2, client_for(stub), concurrency=2)
    second_prompts = stub.prompts()[len(first_prompts):]
    by_text = {c["text"]: c["chunk_id"] for c in chunks}
    resumed = [by_text[re.search(r"<passage>\n(.*)\n</passage>", p, re.DOTALL).group(1)] for p in second_prompts]
    assert not set(resumed) & checkpointed  # no repeated call for a finished chunk
    assert sorted(resumed + sorted(checkpointed)) == sorted(c["chunk_id"] for c in chunks)
    records = GoldenFile(golden_path).read()
    assert len(records) == 24  # 2 per chunk, none twice, none lost (reconciled from the checkpoint)
    assert report.cases_appended + report.cases_reconciled + 2 * 4 >= 24


SUBPROCESS_SCRIPT = textwrap.dedent("""
    import json, sys
    from rag_experiments import llm
    from rag_experiments.golden import generate as gen
    chunks = json.load(open(sys.argv[1]))
    plan = gen.plan_generation(chunks, sys.argv[2])
    client = llm.make_client(api_key="sk-test", base_url=sys.argv[3], max_retries=0)
    gen.run_generation(plan, client, concurrency=1)
""")


def test_killed_process_resumes_without_repeating(stub, tmp_path):
    chunks = corpus(3)  # 9 chunks
    golden_path = _golden(tmp_path)
    chunks_file = tmp_path / "chunks.json"
    chunks_file.write_text(json.dumps(chunks))
    stub.responder = lambda body: hang(0.15, good_answer(passage_of(body)))
    env = {**os.environ, "PYTHONPATH": str(Path(gen.__file__).parents[2])}
    env.pop("ANTHROPIC_API_KEY", None)
    proc = subprocess.Popen([sys.executable, "-c", SUBPROCESS_SCRIPT, str(chunks_file), str(golden_path),
                             stub.base_url], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    cp_path = gen.checkpoint_path(golden_path, "generate")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if cp_path.exists() and len(cp_path.read_text().splitlines()) >= 3:
            break
        if proc.poll() is not None:
            pytest.fail(f"generation ended early: {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    proc.stdout.close()
    proc.stderr.close()
    checkpointed = {json.loads(x)["key"] for x in cp_path.read_text().splitlines() if x.strip().endswith("}")}
    n_before = len(stub.requests())
    assert 3 <= len(checkpointed) < 9

    stub.responder = good_responder
    plan = gen.plan_generation(chunks, golden_path)
    gen.run_generation(plan, client_for(stub), concurrency=3)
    resumed = {passage_of(r["body"]) for r in stub.requests()[n_before:]}
    texts = {c["chunk_id"]: c["text"] for c in chunks}
    assert not resumed & {texts[k] for k in checkpointed}
    assert len(GoldenFile(golden_path).read()) == 18


def test_batch_mode_checkpoints_the_batch_and_resumes_polling(stub, tmp_path):
    chunks = corpus(2)  # 6 chunks
    golden_path = _golden(tmp_path)
    stub.responder = good_responder
    stub.batch_polls = 10_000  # never ends during the first run
    plan = gen.plan_generation(chunks, golden_path, batch=True)
    assert plan.estimate.batch and plan.estimate.usd == pytest.approx(
        llm.cost_usd(plan.model, plan.estimate.input_tokens, plan.estimate.output_tokens) / 2)
    client = client_for(stub)
    with pytest.raises(llm.BatchPending):
        gen.run_generation(plan, client, poll_interval=0.01, poll_timeout=0.05)
    assert len(stub.requests("POST", "/v1/messages/batches")) == 1
    log = [json.loads(x) for x in plan.checkpoint_path.read_text().splitlines()]
    assert [e["event"] for e in log] == ["batch_submitted"]
    assert not GoldenFile(golden_path).exists()

    # rerun (even without --batch): resumes the same batch; no resubmission, no direct calls
    stub.batch_polls = 0
    plan2 = gen.plan_generation(chunks, golden_path, batch=False)
    assert plan2.pending == () and plan2.in_open_batches == 6
    report = gen.run_generation(plan2, client, poll_interval=0.01)
    assert len(stub.requests("POST", "/v1/messages/batches")) == 1 and not stub.requests()
    assert report.cases_appended == 12 and report.processed == 6
    assert report.batch_usage.requests == 6 and report.cost_usd == pytest.approx(
        llm.cost_usd(plan.model, report.batch_usage.input_tokens, report.batch_usage.output_tokens, batch=True))
    events = [json.loads(x)["event"] for x in plan.checkpoint_path.read_text().splitlines()]
    assert events[0] == "batch_submitted" and events[-1] == "batch_collected" and events.count("item") == 6
    # a third run has nothing to do
    plan3 = gen.plan_generation(chunks, golden_path, batch=True)
    assert plan3.pending == () and plan3.in_open_batches == 0
    gen.run_generation(plan3, None)
    assert len(stub.requests("POST", "/v1/messages/batches")) == 1


# == the command ================================================================================
class FakeSession:
    def __init__(self, chunks):
        self._chunks = chunks
        self.closed = False

    def chunks(self):
        return list(self._chunks)

    def close(self):
        self.closed = True


def test_cli_generate_and_stats(stub, tmp_path, monkeypatch, capsys):
    chunks = corpus(2)
    session = FakeSession(chunks)
    calls = []

    def open_retriever(overrides=None):
        calls.append(overrides)
        return session

    monkeypatch.setitem(sys.modules, "rag_experiments.session", types.SimpleNamespace(open_retriever=open_retriever))
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
    stub.responder = good_responder
    golden_path = _golden(tmp_path)
    rc = cli.main(["golden", "generate", "--golden", str(golden_path), "--yes", "--set", "retrieval=hybrid",
                   "--set", "chunking.max_tokens=128", "--max-retries", "1"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert calls == [["retrieval=hybrid", "chunking.max_tokens=128"]] and session.closed
    assert "Estimate:" in out.out and "cases appended: 12" in out.out and "Usage:" in out.out
    assert TEST_KEY not in out.out + out.err
    assert len(stub.requests()) == 6

    assert cli.main(["golden", "verify", "--golden", str(golden_path)]) == 0
    assert "OK, 12 records" in capsys.readouterr().out
    assert cli.main(["golden", "stats", "--golden", str(golden_path)]) == 0
    out = capsys.readouterr().out
    assert "paraphrase" in out and "exact" in out and "no LLM judgements" in out

    # no key: one clear error, nothing sent
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    rc = cli.main(["golden", "generate", "--golden", str(tmp_path / "other.jsonl"), "--yes"])
    err = capsys.readouterr().err
    assert rc == 2 and "ANTHROPIC_API_KEY" in err and len(stub.requests()) == 6
