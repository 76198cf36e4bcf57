"""The append-only golden file: what an instance remembers between appends must never hide a change."""

from __future__ import annotations

import json

import pytest

from rag_experiments.errors import GoldenSetError
from rag_experiments.golden import GoldenFile
from rag_experiments.golden.records import new_id

TEXT = "The work_mem setting bounds the memory of each sort or hash operation."


def case(i: int) -> dict:
    return {"type": "case", "id": new_id("c", f"question {i}", "x"), "query": f"question {i}?", "kind": "paraphrase",
            "doc_type": "config", "provenance": {"method": "human", "author": "t"},
            "evidence": [{"doc_id": "d1", "source_uri": "mini/d1.html", "start": 4, "end": 12, "quote": TEXT[4:12],
                          "doc_hash": "h", "grade": 2}]}


def test_appends_through_one_instance_equal_a_fresh_full_read(tmp_path):
    g = GoldenFile(tmp_path / "g.jsonl")
    for i in range(0, 30, 3):
        g.append([case(i), case(i + 1), case(i + 2)])
    fresh = GoldenFile(tmp_path / "g.jsonl")
    records = fresh.read()
    assert [r["query"] for r in records] == [f"question {i}?" for i in range(30)]
    manifest = json.loads(fresh.manifest_path.read_text())
    assert manifest["records"] == 30 and manifest["cases_by_kind"] == {"paraphrase": 30}
    assert manifest["sha256"] == fresh.digest()


def test_an_untouched_file_is_not_reparsed_on_append(tmp_path, monkeypatch):
    g = GoldenFile(tmp_path / "g.jsonl")
    g.append([case(0)])
    calls = []
    original = GoldenFile._read_chain
    monkeypatch.setattr(GoldenFile, "_read_chain", lambda self: calls.append(1) or original(self))
    for i in range(1, 6):
        g.append([case(i)])
    assert calls == []
    with pytest.raises(GoldenSetError, match="already exists"):
        g.append([case(3)])  # duplicate ids are still refused from memory


def test_an_edit_between_appends_is_caught_by_the_next_append(tmp_path):
    g = GoldenFile(tmp_path / "g.jsonl")
    g.append([case(0), case(1), case(2)])
    lines = g.path.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace("question 1?", "question X?")  # same length: only the content changes
    g.path.write_text("".join(lines))
    with pytest.raises(GoldenSetError, match=r"g\.jsonl:3: hash chain broken"):
        g.append([case(3)])


def test_another_writer_between_appends_is_seen(tmp_path):
    a, b = GoldenFile(tmp_path / "g.jsonl"), GoldenFile(tmp_path / "g.jsonl")
    a.append([case(0)])
    b.append([case(1)])
    with pytest.raises(GoldenSetError, match="already exists"):
        a.append([case(1)])  # a must re-read: b's record is new to it
    a.append([case(2)])
    assert [r["query"] for r in GoldenFile(tmp_path / "g.jsonl").read()] == ["question 0?", "question 1?", "question 2?"]


def test_changing_what_read_returned_changes_nothing(tmp_path):
    g = GoldenFile(tmp_path / "g.jsonl")
    g.append([case(0)])
    for r in g.read():
        r["id"], r["kind"] = "tampered", "exact"
    g.append([case(1)])
    assert json.loads(g.manifest_path.read_text())["cases_by_kind"] == {"paraphrase": 2}


def test_a_quote_holding_unicode_line_separators_reads_back(tmp_path):
    """Lines keep UTF-8 as is; U+2028 or U+0085 inside a quote must not split a record."""
    g = GoldenFile(tmp_path / "g.jsonl")
    rec = case(0)
    rec["query"] = "what does\u2028this\x85mean?"
    g.append([rec, case(1)])
    fresh = GoldenFile(tmp_path / "g.jsonl")
    assert [r["query"] for r in fresh.read()] == ["what does\u2028this\x85mean?", "question 1?"]
    assert json.loads(fresh.manifest_path.read_text())["sha256"] == fresh.digest()


def test_a_golden_file_without_a_final_newline_is_reported_with_its_line(tmp_path):
    g = GoldenFile(tmp_path / "g.jsonl")
    g.append([case(0), case(1)])
    g.path.write_bytes(g.path.read_bytes()[:-1])
    with pytest.raises(GoldenSetError, match=r"g\.jsonl:2: last line is incomplete"):
        GoldenFile(g.path).read()


def test_read_records_gives_frozen_typed_records_over_the_same_lines(tmp_path):
    from dataclasses import FrozenInstanceError

    from rag_experiments.golden.records import Case, Retire

    g = GoldenFile(tmp_path / "g.jsonl")
    g.append([case(0), case(1), {"type": "retire", "id": "r-1", "target": case(0)["id"], "reason": "dup", "who": "t"}])
    first, second, retire = g.read_records()
    assert isinstance(first, Case) and isinstance(retire, Retire) and retire.target == first.id
    assert first.evidence[0][0].quote == TEXT[4:12] and first.evidence[0][1] == 2 and second.query == "question 1?"
    assert [r.raw for r in g.read_records()] == GoldenFile(g.path).read()  # the on-disk objects, unchanged
    with pytest.raises(FrozenInstanceError):
        first.query = "edited"  # type: ignore[misc]
