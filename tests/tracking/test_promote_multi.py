"""The gate guards the `multi` segment (questions that need several passages) when both runs have
such cases: better overall but worse on them is refused, as for exact identifiers. (Compare's
per-kind columns needed no change: a kind is a segment, `multi` included.)"""

from __future__ import annotations

import numpy as np
import pytest

from rag_experiments.promotion import promote

from .conftest import cli, per_case_frame

KINDS = ["paraphrase"] * 40 + ["exact"] * 20 + ["multi"] * 20


def _run(make_run, paraphrase_hits: int, multi_hits: int, name: str) -> str:
    v = np.zeros(80)
    v[:paraphrase_hits] = 1
    v[40:60] = 1  # every exact case hit by both: the exact guard passes
    v[60:60 + multi_hits] = 1
    return make_run(per_case_frame(v, kinds=KINDS), name=name)


def test_better_overall_but_worse_on_multi_is_refused(store, make_run, capsys):
    _run(make_run, 10, 20, "champion")
    assert cli("promote") == 0
    _run(make_run, 40, 6, "candidate")  # +30 paraphrase wins, 14 multi losses
    capsys.readouterr()
    assert cli("promote", "--metric", "recall_at_5") == 1
    out = capsys.readouterr().out
    assert "REFUSED" in out and "recall@5 (multi): significantly worse" in out
    overall, exact, multi = promote("recall_at_5", dry_run=True).decision.checks
    assert overall.passed and overall.delta == pytest.approx(0.2)
    assert exact.passed and exact.delta == 0
    assert not multi.passed and multi.delta == pytest.approx(-0.7) and multi.wtl.losses == 14

