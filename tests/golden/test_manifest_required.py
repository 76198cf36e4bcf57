"""The manifest is part of the golden set (issue 12).

Before: deleting ``demo.manifest.json`` and then the last 100 lines made ``golden verify`` exit 0
and runs evaluate the truncated set without a word. Now a missing manifest is an error for every
reader; ``rag-exp golden manifest --rebuild`` re-creates it only after a confirmation, and the
rebuild is an appended ``manifest`` record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rag_experiments.cli import main
from rag_experiments.errors import GoldenSetError
from rag_experiments.golden import GoldenFile
from rag_experiments.golden.resolve import load_golden
from tests.golden.test_golden_file import case

DEMO = Path(__file__).resolve().parents[2] / "experiments" / "golden" / "demo.jsonl"


@pytest.fixture
def demo_copy(tmp_path) -> GoldenFile:
    shutil.copy(DEMO, tmp_path / "demo.jsonl")
    shutil.copy(DEMO.with_name("demo.manifest.json"), tmp_path / "demo.manifest.json")
    return GoldenFile(tmp_path / "demo.jsonl")


def _drop_last_lines(path: Path, n: int) -> None:
    lines = path.read_bytes().split(b"\n")[:-1]
    path.write_bytes(b"".join(line + b"\n" for line in lines[:-n]))


def test_truncation_with_the_manifest_present_is_caught(demo_copy):
    _drop_last_lines(demo_copy.path, 100)
    with pytest.raises(GoldenSetError, match="file truncated"):
        demo_copy.read()


def test_manifest_deleted_then_truncated_is_refused_by_verify_and_runs(demo_copy, capsys):
    demo_copy.manifest_path.unlink()
    _drop_last_lines(demo_copy.path, 100)
    assert main(["golden", "verify", "--golden", str(demo_copy.path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {demo_copy.manifest_path}: missing.")
    with pytest.raises(GoldenSetError, match="manifest.json: missing"):
        load_golden(demo_copy.path)  # what run_experiment loads first, before any work


def test_appending_to_a_file_without_its_manifest_is_refused(tmp_path):
    g = GoldenFile(tmp_path / "g.jsonl")
    g.append([case(1)])
    g.manifest_path.unlink()
    with pytest.raises(GoldenSetError, match="missing"):
        GoldenFile(g.path).append([case(2)])


def test_rebuild_needs_a_confirmation(demo_copy, capsys, monkeypatch):
    demo_copy.manifest_path.unlink()
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert main(["golden", "manifest", "--golden", str(demo_copy.path), "--rebuild"]) == 2
    assert "without a confirmation" in capsys.readouterr().err
    assert not demo_copy.manifest_path.exists()


def test_rebuild_answering_no_writes_nothing(demo_copy, monkeypatch):
    demo_copy.manifest_path.unlink()
    before = demo_copy.path.read_bytes()
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    assert main(["golden", "manifest", "--golden", str(demo_copy.path), "--rebuild"]) == 1
    assert demo_copy.path.read_bytes() == before and not demo_copy.manifest_path.exists()


def test_confirmed_rebuild_is_recorded_in_the_chain(demo_copy, monkeypatch):
    n = len(demo_copy.read())
    demo_copy.manifest_path.unlink()
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "yes")
    assert main(["golden", "manifest", "--golden", str(demo_copy.path), "--rebuild", "--author", "alice",
                 "--reason", "lost in a bad merge; file checked against git"]) == 0
    records = GoldenFile(demo_copy.path).read()  # verifies again, manifest included
    assert len(records) == n + 1
    last = records[-1]
    assert last["type"] == "manifest" and last["who"] == "alice" and last["records"] == n
    assert "bad merge" in last["reason"]
    assert json.loads(demo_copy.manifest_path.read_text())["records"] == n + 1
    golden = load_golden(demo_copy.path)  # the record changes no case
    assert len(golden.cases) == len(load_golden(DEMO).cases)


def test_a_present_manifest_is_not_rebuilt(demo_copy):
    with pytest.raises(GoldenSetError, match="nothing to rebuild"):
        demo_copy.rebuild_manifest("bob", "why not")
