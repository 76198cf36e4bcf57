"""Golden versions as prefixes of the chain: found (chain verified) or clearly not an ancestor."""

from __future__ import annotations

import shutil

import pytest

from rag_experiments.golden.resolve import load_golden
from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.golden.versions import GoldenVersion, NotAnAncestor, current_version, locate, prefix_length


def _retire(case_id: str, rid: str = "r-1") -> dict:
    return {"type": "retire", "id": rid, "target": case_id, "reason": "duplicate of another case", "who": "tests"}


def test_a_recorded_version_is_found_as_a_prefix_of_the_grown_file(mini_golden):
    v1 = GoldenVersion.of(load_golden(mini_golden))
    assert v1.records == 10 and v1.head and v1 == current_version(mini_golden)
    first = load_golden(mini_golden).cases[0].case_id
    GoldenFile(mini_golden).append([_retire(first)])
    v2 = current_version(mini_golden)
    assert v2.records == 11 and v2.sha256 != v1.sha256

    old = locate(mini_golden, v1)
    assert old.digest == v1.sha256 and len(old.records) == 10 and old.head == v1.head
    assert first in {c.case_id for c in old.cases}  # the later retirement does not apply to v1
    assert first not in {c.case_id for c in locate(mini_golden, v2).cases}
    assert prefix_length(mini_golden, v2) == 11


def test_tags_round_trip_and_legacy_runs_are_found_by_sha_alone(mini_golden):
    v1 = current_version(mini_golden)
    assert GoldenVersion.from_tags(v1.tags()) == v1
    GoldenFile(mini_golden).append([_retire(load_golden(mini_golden).cases[0].case_id)])
    legacy = GoldenVersion.from_tags({"golden_sha256": v1.sha256})  # a run logged before golden_records
    assert legacy.records is None and prefix_length(mini_golden, legacy) == 10
    with pytest.raises(NotAnAncestor, match="no prefix of the file has sha256 ffffffffffff"):
        prefix_length(mini_golden, GoldenVersion("f" * 64))


def test_a_rewritten_history_is_not_an_ancestor(mini_golden, tmp_path):
    v1 = current_version(mini_golden)
    # another file holding the same cases in another order: same size, different chain
    other = tmp_path / "rewritten.jsonl"
    records = GoldenFile(mini_golden).read()
    GoldenFile(other).append([{k: v for k, v in r.items() if k not in ("prev",)} for r in reversed(records)])
    with pytest.raises(NotAnAncestor, match=r"rewritten.jsonl:10: line 10 hashes to .* not an ancestor"):
        locate(other, v1)


def test_a_newer_version_than_the_file_is_not_an_ancestor(mini_golden, tmp_path):
    old_copy = tmp_path / "old.jsonl"
    shutil.copy(mini_golden, old_copy)
    shutil.copy(mini_golden.with_name("mini.manifest.json"), tmp_path / "old.manifest.json")  # part of the set
    GoldenFile(mini_golden).append([_retire(load_golden(mini_golden).cases[0].case_id)])
    v2 = current_version(mini_golden)
    with pytest.raises(NotAnAncestor, match="has 11 records but the file has only 10"):
        locate(old_copy, v2)
