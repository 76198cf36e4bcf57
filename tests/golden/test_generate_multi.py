"""``golden generate --multi N``: questions that need two passages, from pairs of chunks that belong
together, through the real anthropic SDK against the local stub; resumable (no pair asked twice)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from rag_experiments import cli
from rag_experiments.golden import GoldenFile
from rag_experiments.golden import generate_multi as gm
from rag_experiments.golden.resolve import load_golden

from .anthropic_stub import TEST_KEY, client_for, prompt_of, stub, text  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

FILL = ("Each paragraph here says something different about how the server behaves under load, so that "
        "the passage is long enough to be worth a question of its own. ")


def chunk(cid: str, body: str, doc: str, start: int) -> dict:
    text_ = body + " " + FILL * 3
    return {"chunk_id": cid, "doc_id": doc, "source_uri": f"mini/{doc}.html", "doc_type": "config",
            "start": start, "end": start + len(text_), "text": text_, "n_tokens": len(text_.split()),
            "doc_hash": f"hash-{doc}"}


def corpus() -> list[dict]:
    return [
        # one document, three sections: a/c are two sections (b is between them); a/b, b/c are neighbours
        chunk("a", "The standby retries fetching WAL after a pause.", "repl", 0),
        chunk("b", "Sending servers stream WAL to standbys.", "repl", 1000),
        chunk("c", "At most ten standbys connect at once.", "repl", 2000),
        # two documents sharing a rare identifier
        chunk("d", "Raise zork_level_limit when the queue overflows.", "tuning", 0),
        chunk("e", "The zork_level_limit parameter is read at start-up.", "startup", 0),
        chunk("f", "Unrelated words about nothing in particular.", "misc", 0),
    ]


def passages(body: dict) -> tuple[str, str]:
    p = prompt_of(body)
    a = re.search(r"<passage_a>\n(.*?)\n</passage_a>", p, re.DOTALL).group(1)
    b = re.search(r"<passage_b>\n(.*?)\n</passage_b>", p, re.DOTALL).group(1)
    return a, b


def good_responder(body: dict):
    a, b = passages(body)
    return text([{"question": f"what should I know, case {len(a)}-{len(b)}?", "quote_a": a.split(". ")[0],
                  "quote_b": b.split(". ")[0]}])


def test_pairs_are_two_sections_of_a_document_or_two_documents_sharing_an_identifier():
    pairs = gm.pair_chunks(corpus(), n=10)
    keys = {(p.a["chunk_id"], p.b["chunk_id"], p.kind, p.identifier) for p in pairs}
    assert keys == {("a", "c", "same_document", None), ("d", "e", "shared_identifier", "zork_level_limit")}
    assert [p.key for p in gm.pair_chunks(list(reversed(corpus())), n=10)] == [p.key for p in pairs]  # order-free
    assert len(gm.pair_chunks(corpus(), n=1)) == 1


def test_generate_multi_end_to_end_and_resume(stub, tmp_path):
    golden_path = tmp_path / "g.jsonl"
    stub.responder = good_responder
    plan = gm.plan_multi(corpus(), golden_path, n=10, model="claude-sonnet-4-5")
    assert len(plan.pending) == 2 and plan.estimate.usd > 0
    report = gm.run_multi(plan, client_for(stub), concurrency=2)
    assert report.processed == 2 and report.cases_appended == 2 and len(stub.requests()) == 2
    system = stub.requests()[0]["body"]["system"]
    assert "needs BOTH passages" in (system if isinstance(system, str) else system[0]["text"])
    records = GoldenFile(golden_path).read()
    assert {r["kind"] for r in records} == {"multi"}
    for rec in records:
        assert [ev["group"] for ev in rec["evidence"]] == [0, 1]
        assert rec["provenance"]["prompt_version"] == gm.PROMPT_VERSION
        assert rec["provenance"]["pairing"]["kind"] in gm.PAIR_KINDS
    by_pair = {tuple(r["provenance"]["source_chunks"]): r for r in records}
    assert by_pair[("d", "e")]["provenance"]["pairing"]["identifier"] == "zork_level_limit"
    ev = by_pair[("a", "c")]["evidence"]
    assert ev[1]["start"] == 2000 and ev[1]["quote"] == "At most ten standbys connect at once"
    cases = load_golden(golden_path).cases
    assert all(c.n_groups == 2 for c in cases)
    # resume: nothing is asked again, nothing appended twice
    plan2 = gm.plan_multi(corpus(), golden_path, n=10, model="claude-sonnet-4-5")
    assert plan2.pending == () and plan2.already_done == 2
    report2 = gm.run_multi(plan2, None)
    assert len(stub.requests()) == 2 and report2.cases_appended == 0
    assert len(GoldenFile(golden_path).read()) == 2


@pytest.mark.parametrize("answer, problem", [
    ("[]", "empty_answer"),
    ('[{"question": ', "malformed_json"),
    ('[{"question": "q?", "quote_a": "x"}]', "bad_item"),
])
def test_bad_answers_are_counted_not_appended(stub, tmp_path, answer, problem):
    golden_path = tmp_path / "g.jsonl"
    stub.responder = lambda body: text(answer)
    report = gm.run_multi(gm.plan_multi(corpus(), golden_path, n=1, model="claude-sonnet-4-5"), client_for(stub))
    assert report.problems[problem] == 1 and report.cases_appended == 0


def test_a_copied_question_and_the_multi_leakage_bar(stub, tmp_path):
    def copying(body):
        a, b = passages(body)
        return text([{"question": "Each paragraph here says something different about how the server behaves",
                      "quote_a": a.split(". ")[0], "quote_b": b.split(". ")[0]}])
    stub.responder = copying
    report = gm.run_multi(gm.plan_multi(corpus(), tmp_path / "g.jsonl", n=1, model="claude-sonnet-4-5"),
                          client_for(stub))
    assert report.problems["question_copies_passage"] == 1 and report.cases_appended == 0

    def leaky(body):
        a, b = passages(body)
        return text([{"question": "standby retries fetching WAL pause", "quote_a": a.split(". ")[0],
                      "quote_b": b.split(". ")[0]}])
    stub.responder = leaky
    report = gm.run_multi(gm.plan_multi(corpus(), tmp_path / "h.jsonl", n=10, model="claude-sonnet-4-5", bar=0.5),
                          client_for(stub))
    assert report.problems["over_leakage_bar"] == 1 and report.cases_appended == 1  # the pair a+c is over


class FakeSession:
    def __init__(self, chunks):
        self._chunks = chunks

    def chunks(self):
        return list(self._chunks)

    def close(self):
        pass


def test_cli_generate_multi(stub, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "rag_experiments.session",
                        types.SimpleNamespace(open_retriever=lambda overrides=None: FakeSession(corpus())))
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
    stub.responder = good_responder
    golden_path = Path(tmp_path / "g.jsonl")
    argv = ["golden", "generate", "--golden", str(golden_path), "--multi", "5", "--yes", "--max-retries", "1"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "2 pairs that belong together: same_document 1, shared_identifier 1" in out
    assert "multi cases appended: 2" in out and len(stub.requests()) == 2
    assert cli.main(argv) == 0  # resumed: nothing sent
    assert "already done" in capsys.readouterr().out and len(stub.requests()) == 2
    assert cli.main(["golden", "generate", "--golden", str(golden_path), "--multi", "0", "--yes"]) == 2
    assert "--multi must be >= 1" in capsys.readouterr().err
