"""rag-exp golden split: an append-only, deterministic, stratified dev/test split; new cases' side."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from rag_experiments.errors import UserError
from rag_experiments.golden import GoldenFile
from rag_experiments.golden.records import new_id
from rag_experiments.golden.split import TEST, check, current_split, freeze
from rag_experiments.golden.versions import GoldenVersion, prefix_length

TEXT = "The work_mem setting bounds the memory of each sort or hash operation."
STRATA = {("paraphrase", "config"): 20, ("exact", "config"): 10, ("exact", "functions"): 7, ("paraphrase", "faq"): 1}


def case(i: int, kind: str, doc_type: str) -> dict:
    return {"type": "case", "id": new_id("c", f"question {i}", kind), "query": f"question {i}?", "kind": kind,
            "doc_type": doc_type, "provenance": {"method": "human", "author": "t"},
            "evidence": [{"doc_id": "d1", "source_uri": "mini/d1.html", "start": 4, "end": 12, "quote": TEXT[4:12],
                          "doc_hash": "h", "grade": 2}]}


def golden(path) -> GoldenFile:
    g = GoldenFile(path)
    i = 0
    for (kind, doc_type), n in STRATA.items():
        g.append([case(i + k, kind, doc_type) for k in range(n)])
        i += n
    return g


def u(seed: int, case_id: str) -> float:  # the rule as the record states it, written out here
    return int(hashlib.sha256(f"{seed}:{case_id}".encode()).hexdigest()[:15], 16) / 16 ** 15


def test_the_split_is_stratified_deterministic_and_appended(tmp_path):
    g = golden(tmp_path / "a.jsonl")
    before = g.path.read_bytes()
    version_before = GoldenVersion(g.digest(), len(g.read()), g.head())
    record, counts = freeze(g.path, seed=7, test_fraction=0.3, who="t")
    after = g.path.read_bytes()
    # append-only: the old file is a prefix, one line added, the chain and manifest verify, the old version
    # is still found as a prefix of the chain
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1
    records = GoldenFile(g.path).read_records()
    assert prefix_length(g.path, version_before) == len(records) - 1
    # stratified: round-half-up(0.3 n) per stratum, the lowest hashes on test
    assert counts == {"exact/config": {"dev": 7, "test": 3}, "exact/functions": {"dev": 5, "test": 2},
                      "paraphrase/config": {"dev": 14, "test": 6}, "paraphrase/faq": {"dev": 1, "test": 0}}
    by_stratum: dict[tuple, list] = {}
    for r in records[:-1]:
        by_stratum.setdefault((r.kind, r.doc_type), []).append(r.id)
    for ids in by_stratum.values():
        lowest = sorted(ids, key=lambda i: u(7, i))[:int(0.3 * len(ids) + 0.5)]
        assert sorted(lowest) == sorted(i for i in ids if i in record["test"])
    # deterministic: the same cases and seed give the same record on another copy; another seed does not
    other = golden(tmp_path / "b.jsonl")
    again, _ = freeze(other.path, seed=7, test_fraction=0.3, who="t")
    assert (again["id"], again["dev"], again["test"]) == (record["id"], record["dev"], record["test"])
    third, _ = freeze(golden(tmp_path / "c.jsonl").path, seed=8, test_fraction=0.3, who="t")
    assert third["test"] != record["test"]
    assert check(records) == []


def test_a_case_added_later_lands_by_its_hash_and_a_second_split_needs_a_reason(tmp_path):
    g = golden(tmp_path / "g.jsonl")
    record, _ = freeze(g.path, seed=13, test_fraction=0.3, who="t")
    added = [case(100 + k, "exact", "config") for k in range(40)]
    g.append(added)
    split = current_split(GoldenFile(g.path).read_records())
    sides = Counter(split.side(c["id"]) for c in added)
    assert all(split.side(c["id"]) == ("test" if u(13, c["id"]) < 0.3 else "dev") for c in added)
    assert 0 < sides[TEST] < 40
    assert all(split.side(i) == "test" for i in record["test"]) and all(split.side(i) == "dev" for i in record["dev"])
    with pytest.raises(UserError, match="already has a split"):
        freeze(g.path, seed=14)
    with pytest.raises(UserError, match="--reason is empty"):
        freeze(g.path, seed=14, replace=True)
    newer, _ = freeze(g.path, seed=14, replace=True, reason="the first one was made before the exact cases")
    records = GoldenFile(g.path).read_records()
    assert current_split(records).id == newer["id"] and len(newer["dev"]) + len(newer["test"]) == 38 + 40
    assert check(records) == []


def test_the_command_freezes_and_refuses_a_second(tmp_path, capsys):
    from rag_experiments.cli import main

    g = golden(tmp_path / "g.jsonl")
    assert main(["golden", "split", "--golden", str(g.path)]) == 0
    out = capsys.readouterr().out
    assert "27 dev, 11 test cases (seed 13, test fraction 0.3)" in " ".join(out.split()), out
    assert main(["golden", "split", "--golden", str(g.path)]) == 2
    err = capsys.readouterr().err
    assert "already has a split" in err and "Traceback" not in err
