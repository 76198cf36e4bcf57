"""promote's and the gate's verdict table reads in one 120-column screen (issue 48: "the verdict table
reads in one screen (measure its width)"). Before, the demo's table was 139-141 characters wide: an
MDE column ('n/a (no case differs)'), a check's note in its result cell ('FAIL (within the HNSW noise
floor)') and, once the golden set grew, the 'champion, newest golden' column. Now the MDE values are a
line under the table and a check's note a ``note:`` line: no number is lost."""

from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from rag_experiments.stats.paired import WinTieLoss
from rag_experiments.stats.power import PowerEstimate
from rag_experiments.tracking.compare_render import TABLE_WIDTH, decision_markdown, decision_table
from rag_experiments.tracking.promote import Check

BOX = "┏┃┡│└"


def _widest_case() -> SimpleNamespace:
    """The widest rows the checks make on the demo's 230 cases: a not-significant Δ with an MDE, one
    whose cases never differ, a note in the result cell, the guard segment with the longest kind name,
    and the champion's value on a newer golden version."""
    power = PowerEstimate(n=230, delta=0.004, sd=0.21, mde=0.047, n_for_delta=19_000, differing=12)
    flat = PowerEstimate(n=1_150, delta=0.0, sd=0.0, mde=None, n_for_delta=None, differing=0)
    checks = [
        Check("recall_at_5", "recall@5", 0.8127, 0.8171, 0.0044, 0.6123, 1_150, WinTieLoss(118, 1_003, 29), False,
              power=power, noise="within the HNSW noise floor", champion_newest=0.7964),
        Check("recall_at_5.paraphrase", "recall@5 (paraphrase)", 0.7001, 0.7001, 0.0, 1.0, 1_150,
              WinTieLoss(0, 1_150, 0), True, power=flat, champion_newest=0.6912),
        Check("recall_at_5.multi", "recall@5 (multi)", None, None, None, None, 0, None, True,
              "no cases in this segment: skipped"),
    ]
    notes = ["recall@5: Δ+0.004 is within the HNSW noise floor (±0.009: two builds of the same index differed "
             "that much; measured on this corpus)"]
    return SimpleNamespace(alpha=0.05, checks=checks, notes=notes)


def _printed(decision, width: int = 250) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, no_color=True).print(decision_table(decision, "candidate vs champion 5ad9dad1e3c1"))
    return buf.getvalue()


def test_the_verdict_table_fits_120_columns_with_every_number():
    out = _printed(_widest_case())  # a wide console: the table takes its natural width, nothing folded
    table = [line for line in out.splitlines() if line[:1] in BOX]
    assert max(len(line) for line in table) <= TABLE_WIDTH == 120, "\n".join(table)
    rows = [line for line in table if line.startswith("│")]
    assert len(rows) == 3, "\n".join(table)  # one line per check: no cell wrapped
    flat = " ".join(out.split())
    assert "│ recall@5 │ 0.813 │ 0.796 │ 0.817 │ +0.004 │ 0.612 │ 118/1003/29 │ 1150 │ FAIL │" in flat, out
    assert "│ recall@5 (paraphrase) │ 0.700 │ 0.691 │ 0.700 │ +0.000 │ 1.000 │ 0/1150/0 │ 1150 │ ok │" in flat, out
    assert ("MDE (n for Δ): recall@5 0.047 (n≈19,000); recall@5 (paraphrase) n/a (no case differs). MDE = the "
            "smallest |Δ|") in flat, flat
    assert "note: recall@5 (multi): no cases in this segment: skipped" in flat
    assert "note: recall@5: Δ+0.004 is within the HNSW noise floor" in flat
    assert flat.count("within the HNSW noise floor") == 1  # the check's own note is the decision's line, not twice
    assert "┃ check" in out and "champion," in out and "newest golden" in out


def test_a_120_column_terminal_shows_the_table_unsqueezed():
    wide, narrow = _printed(_widest_case()), _printed(_widest_case(), width=120)
    def table(text):
        return [line for line in text.splitlines() if line[:1] in BOX]
    assert table(narrow) == table(wide)


def test_the_markdown_summary_keeps_the_mde_column_and_the_notes_in_the_cells():
    md = decision_markdown(_widest_case())
    assert "| check | champion | champion, newest golden | candidate | Δ | p (paired) | W/T/L | cases | MDE (n for Δ) |" in md
    assert "0.047 (n≈19,000)" in md and "(no cases in this segment: skipped)" in md
