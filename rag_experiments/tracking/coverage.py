"""How complete the labels behind a comparison are: judged@k per run, and whether it differs.

A hit nobody judged counts as a miss, so a run whose top k holds more unjudged chunks than the
baseline's is measured against a harder standard. That happens when its chunks were never in
the pool the near-misses were judged from: another variant, another chunking, an external
system. judged@k (``judged_at_<k>``, the share of the top k covering a judged span, any grade)
is logged per case. Here its paired difference against the baseline is tested like any metric
(paired randomization test, Holm across the runs). When it differs significantly, the comparison
says so in one line with the command that judges the two runs' pool. ``promote`` refuses when
the champion is the less judged of the two (its unjudged hits may be relevant, so the
candidate's win may be an artefact of the labels; ``--force`` overrides, recorded); a candidate
that wins while less judged than the champion wins conservatively, and is not refused.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Sequence

from .runs import RunView

JUDGED_PREFIX = "judged_at_"


def judged_columns(runs: Sequence[RunView]) -> list[str]:
    """The judged@k columns the runs' per-case tables share, smallest k first."""
    tables = [r.per_case for r in runs if r.per_case is not None]
    if not tables:
        return []
    common = set.intersection(*[{c for c in t.columns if str(c).startswith(JUDGED_PREFIX)} for t in tables])
    return sorted(common, key=lambda c: int(c[len(JUDGED_PREFIX):]) if c[len(JUDGED_PREFIX):].isdigit() else 0)


def fix_command(runs: Sequence[RunView], k: int) -> str:
    """`rag-exp golden label --pool` over these runs: their unjudged hits in the top k are judged
    (a span judged once is never paid for again), after which their judged@k is comparable."""
    return shlex.join(["rag-exp", "golden", "label", "--pool", *[r.id for r in runs], "-k", str(k)])


@dataclass(frozen=True)
class CoverageGap:
    label: str
    column: str  # judged_at_10
    base: float
    value: float
    delta: float
    p: float  # Holm-adjusted where it came from a comparison
    command: str

    def line(self) -> str:
        k = self.column[len(JUDGED_PREFIX):]
        side = "fewer" if self.delta < 0 else "more"
        p = "p<0.001" if self.p < 0.001 else f"p={self.p:.3f}"
        return (f"LABEL COVERAGE DIFFERS: {self.label} has judged@{k} {self.value:.3f} vs the baseline's "
                f"{self.base:.3f} (Δ{self.delta:+.3f}, {p}): {side} of its top {k} were ever judged, "
                f"and an unjudged hit counts as a miss, so the comparison is biased "
                f"{'against' if self.delta < 0 else 'for'} it; judge the pool of both first: {self.command}")
