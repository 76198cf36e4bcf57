"""`golden spotcheck --golden X --export F` prints an import command that works as printed
(issue 55 probe 6): before, it lacked --golden, so the verdicts were recorded against the
default golden set."""

from __future__ import annotations

import csv
import shlex

from rag_experiments.golden.spotcheck import read_spotchecks, spotcheck_path

from ..tracking.conftest import cli
from .test_spotcheck_cases import golden  # noqa: F401 - fixture


def test_the_printed_answers_command_records_against_the_exported_golden_set(golden, tmp_path, monkeypatch,  # noqa: F811
                                                                             capsys):
    monkeypatch.chdir(tmp_path)  # the default golden set (experiments/golden/demo.jsonl here) does not exist
    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))
    sheet = tmp_path / "sheet.csv"
    assert cli("golden", "spotcheck", "--golden", str(golden), "--export", str(sheet), "-n", "3",
               "--author", "ann smith") == 0
    printed = capsys.readouterr().out.strip().splitlines()[-1].split("then: ", 1)[1]
    argv = shlex.split(printed)
    assert argv[:3] == ["rag-exp", "golden", "spotcheck"] and argv[argv.index("--golden") + 1] == str(golden)
    assert argv[argv.index("--author") + 1] == "ann smith"
    rows = list(csv.DictReader(sheet.open(encoding="utf-8")))
    with sheet.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows({**r, "verdict": "y"} for r in rows)
    assert cli(*argv[1:]) == 0, capsys.readouterr().err
    assert "recorded 3 verdict(s)" in capsys.readouterr().out
    assert len([s for s in read_spotchecks(spotcheck_path(golden)) if s.get("author") == "ann smith"]) == 3
