"""``golden add --kind multi``: a hand-written question that needs two passages (evidence groups),
written through the CLI, read back and scored per group; and its errors, one line each."""

from __future__ import annotations

import pytest

from rag_experiments import cli
from rag_experiments.golden import GoldenFile
from rag_experiments.golden.resolve import load_golden

REPLICATION = """# Replication

## Standby servers

The parameter wal_retrieve_retry_interval sets how long a standby waits before retrying to fetch WAL
when no source has any. It defaults to five seconds.

## Sending servers

The parameter max_wal_senders caps how many standby servers can stream from this server at once.
"""
ARCHIVE = """# Continuous archiving

Set archive_mode to on and give an archive_command that copies each finished segment away.
"""


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "replication.md").write_text(REPLICATION)
    (folder / "archive.md").write_text(ARCHIVE)
    return folder, tmp_path / "g.jsonl"


def _add(folder, golden, *argv):
    return cli.main(["golden", "add", "--golden", str(golden), "--corpus", str(folder), "--author", "agent-x",
                     "--by", "agent", *argv])


def test_add_a_multi_case_with_two_groups(docs, capsys):
    folder, golden = docs
    assert _add(folder, golden, "--query", "for a standby that archives, how many can stream and how is WAL kept?",
                "--kind", "multi", "--source-uri", "replication.md", "--quote", "caps how many standby servers",
                "--group", "archive", "give an archive_command that copies each finished segment away") == 0
    out = capsys.readouterr().out
    assert "kind multi, 2 evidence groups, all needed" in out
    rec, = GoldenFile(golden).read()
    assert rec["kind"] == "multi" and rec["provenance"]["method"] == "agent"
    assert [(ev["source_uri"], ev["group"]) for ev in rec["evidence"]] == [("replication.md", 0), ("archive.md", 1)]
    assert rec["evidence"][1]["quote"] == "give an archive_command that copies each finished segment away"
    case, = load_golden(golden).cases
    assert case.n_groups == 2 and [e.group for e in case.relevant] == [0, 1]
    # the same document's two sections are two groups too
    assert _add(folder, golden, "--query", "how long does a standby wait and how many can connect?", "--kind", "multi",
                "--source-uri", "replication.md", "--quote", "It defaults to five seconds.",
                "--group", "replication.md", "caps how many standby servers can stream") == 0
    assert len(load_golden(golden).cases) == 2


@pytest.mark.parametrize("argv, message", [
    (["--kind", "multi", "--source-uri", "replication.md", "--quote", "caps how many standby servers"],
     "--kind multi needs at least two passages"),
    (["--kind", "paraphrase", "--source-uri", "replication.md", "--quote", "caps how many standby servers",
      "--group", "archive.md", "archive_mode"], "--group goes with --kind multi"),
    (["--kind", "multi", "--source-uri", "replication.md", "--quote", "caps how many standby servers",
      "--group", "archive.md", "not in this document at all"], "--group 1: quote 'not in this document at all' not found"),
    (["--kind", "multi", "--source-uri", "replication.md", "--quote", "caps how many standby servers",
      "--group", "replication.md", "standby servers can stream"], "--group 1: the passage .* overlaps the passage of group 0"),
    (["--kind", "multi", "--source-uri", "replication.md", "--quote", "caps how many standby servers",
      "--group", "nowhere.md", "archive_mode"], "--group 1: document 'nowhere.md' is not in the corpus"),
])
def test_bad_multi_input_is_one_line(docs, capsys, argv, message):
    folder, golden = docs
    assert _add(folder, golden, "--query", "a question", *argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert __import__("re").search(message, err), err
    assert not golden.exists()
