"""The manifest vouches for a prefix of the chain, whatever follows it (issue 33).

Before: edit the last line of ``demo.jsonl`` (or any line), re-link the chain after it, append one
correctly chained line, and ``rag-exp golden verify`` printed ``OK, 871 records ... manifest
checked``: when the file was longer than the manifest said, nothing checked that line N (the
manifest's record count) still hashed to the manifest's head."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rag_experiments.cli import main
from rag_experiments.errors import GoldenSetError
from rag_experiments.golden import GoldenFile
from rag_experiments.golden.records import canonical, line_hash

DEMO = Path(__file__).resolve().parents[2] / "experiments" / "golden" / "demo.jsonl"


@pytest.fixture
def demo_copy(tmp_path) -> GoldenFile:
    shutil.copy(DEMO, tmp_path / "demo.jsonl")
    shutil.copy(DEMO.with_name("demo.manifest.json"), tmp_path / "demo.manifest.json")
    return GoldenFile(tmp_path / "demo.jsonl")


def _rechained(records: list[dict]) -> bytes:
    """The records as lines whose ``prev`` links are recomputed: what a forger would write."""
    out, prev = [], ""
    for rec in records:
        rec = {**rec, "prev": prev}
        line = canonical(rec)
        out.append(line + "\n")
        prev = line_hash(line)
    return "".join(out).encode("utf-8")


def _extra_record(n: int) -> dict:
    return {"type": "retire", "id": f"retire-forged-{n}", "target": "nothing", "who": "test", "reason": "forged",
            "created_at": "2026-12-02T00:00:00+00:00"}


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("edited_line", [50, -1])
def test_an_edited_line_does_not_verify_when_a_chained_line_follows(demo_copy, edited_line, capsys):
    recs = _records(demo_copy.path)
    n = len(recs)
    i = edited_line if edited_line > 0 else n
    target = recs[i - 1]
    target["created_at"] = "2020-01-01T00:00:00+00:00"  # any change to the line's bytes
    demo_copy.path.write_bytes(_rechained(recs + [_extra_record(1)]))
    with pytest.raises(GoldenSetError, match=rf"demo.jsonl:{n}: line {n} is not the line the manifest vouches for"):
        GoldenFile(demo_copy.path).read()
    assert main(["golden", "verify", "--golden", str(demo_copy.path)]) == 2
    err = capsys.readouterr().err
    assert "OK" not in err and f"demo.jsonl:{n}:" in err


def test_truncated_then_rechained_and_regrown_past_the_manifest_is_refused(demo_copy):
    recs = _records(demo_copy.path)
    n = len(recs)
    kept = recs[:-50] + [_extra_record(i) for i in range(51)]  # longer than the manifest again
    demo_copy.path.write_bytes(_rechained(kept))
    with pytest.raises(GoldenSetError, match=rf"demo.jsonl:{n}: line {n} is not the line the manifest vouches for"):
        GoldenFile(demo_copy.path).read()


def test_lines_appended_beyond_the_manifest_are_accepted_and_reported(demo_copy, capsys):
    """A chain continuing the vouched prefix (records appended on another branch, merged without the
    manifest) verifies, and verify says how many lines and from where."""
    recs = _records(demo_copy.path)
    n = len(recs)
    head = line_hash(demo_copy.path.read_text(encoding="utf-8").splitlines()[-1])
    extra = [_extra_record(1), _extra_record(2)]
    lines, prev = [], head
    for rec in extra:
        line = canonical({**rec, "prev": prev})
        lines.append(line + "\n")
        prev = line_hash(line)
    with open(demo_copy.path, "ab") as fh:
        fh.write("".join(lines).encode("utf-8"))
    g = GoldenFile(demo_copy.path)
    assert len(g.read()) == n + 2
    assert g.beyond_manifest() == 2
    assert main(["golden", "verify", "--golden", str(demo_copy.path)]) == 0
    out = capsys.readouterr().out
    assert f"it vouches for lines 1-{n}; the 2 line(s) after it, {n + 1}-{n + 2}, continue its chain" in out
