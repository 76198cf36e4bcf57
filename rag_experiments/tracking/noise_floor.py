"""The HNSW noise floor: how far two builds of the same index move the same config's numbers.

pgvector draws each node's HNSW layer at random, so two builds of one strategy's index are two graphs
and the vector leg's approximate lists differ a little: the same config on the same data gives other
per-case metrics after a rebuild. ``rag-exp bench`` (section ``noise``) builds the index several times
in a throwaway database, runs the golden set on each build, and records per metric (and per query
kind) the largest ``|Δ|`` of the mean between two builds: the **noise floor**. It is written to
``experiments/noise_floor.json`` (committed with the project, like the champion's record), one entry
per (strategy, variant, HNSW parameters).

Promote and the gate read it: when either run of a comparison searched HNSW (tag
``retrieval.vector.search`` starting with ``hnsw``) a difference no larger than the floor is said to
be within it (a rebuild alone moves the numbers that much). Exact runs have floor 0 and say nothing.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..errors import UserError
from ..paths import project_root

FLOOR_FILE = Path("experiments/noise_floor.json")
SEARCH_TAG = "retrieval.vector.search"


def uses_hnsw(run) -> bool:
    """Whether the run's vector leg searched the HNSW graph (its ``retrieval.vector.search`` tag)."""
    return str(run.tags.get(SEARCH_TAG, "")).startswith("hnsw")


@dataclass(frozen=True)
class MetricNoise:
    floor: float  # the largest |Δ mean| between two builds
    mean_abs_delta: float  # the mean |Δ mean| over the pairs of builds
    max_cases_differ: int  # the most cases whose value differed between two builds
    deltas: list[float] = field(default_factory=list)  # Δ mean of every pair of builds


@dataclass(frozen=True)
class NoiseFloor:
    strategy: str
    variant: str
    hnsw: dict  # m, ef_construction, ef_search
    golden_sha256: str
    corpus: str
    builds: int
    n_cases: int
    measured: str  # ISO time
    metrics: dict[str, MetricNoise]  # recall_at_5, recall_at_5.exact, ...
    cases_differ_any: int = 0  # cases whose ranked list moved on any metric, most over the pairs

    def floor(self, key: str) -> float | None:
        found = self.metrics.get(key)
        return None if found is None else found.floor

    def where(self) -> str:
        return (f"{self.variant} on strategy {self.strategy[:12]}, {self.builds} HNSW builds, "
                f"measured {self.measured[:10]} (rag-exp bench, {FLOOR_FILE})")


def measure(tables: Sequence[pd.DataFrame], metrics: Sequence[str]) -> tuple[dict[str, MetricNoise], int]:
    """The noise of ``metrics`` (and of each on every query kind) between every pair of per-case
    tables, each the same config's run on another build of the index."""
    if len(tables) < 2:
        raise ValueError("the noise floor needs at least two builds")
    kinds = sorted(set().union(*[set(t["kind"].dropna().astype(str)) for t in tables if "kind" in t]))
    out: dict[str, MetricNoise] = {}
    any_differ = 0
    for a, b in combinations(tables, 2):
        j = a.merge(b, on="case_id", suffixes=("_a", "_b"))
        moved = np.zeros(len(j), dtype=bool)
        for m in metrics:
            moved |= np.abs(j[f"{m}_a"].to_numpy(float) - j[f"{m}_b"].to_numpy(float)) > 1e-12
        any_differ = max(any_differ, int(moved.sum()))
    for m in metrics:
        for kind in [None, *kinds]:
            key = m if kind is None else f"{m}.{kind}"
            deltas, differ = [], []
            for a, b in combinations(tables, 2):
                j = a.merge(b, on="case_id", suffixes=("_a", "_b"))
                if kind is not None:
                    j = j[j["kind_a"].astype(str) == kind]
                if not len(j):
                    continue
                d = j[f"{m}_b"].to_numpy(float) - j[f"{m}_a"].to_numpy(float)
                deltas.append(float(d.mean()))
                differ.append(int(np.count_nonzero(np.abs(d) > 1e-12)))
            if deltas:
                out[key] = MetricNoise(max(abs(x) for x in deltas), float(np.mean(np.abs(deltas))), max(differ),
                                       deltas)
    return out, any_differ


def floor_path(root: Path | None = None) -> Path:
    return (root or project_root()) / FLOOR_FILE


def read_floors(root: Path | None = None) -> list[NoiseFloor]:
    """Every recorded floor; [] when the file does not exist. A damaged file is one line naming it."""
    path = floor_path(root)
    if not path.exists():
        return []
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return [NoiseFloor(**{**e, "metrics": {k: MetricNoise(**v) for k, v in e["metrics"].items()}})
                for e in raw["floors"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path}: not a noise-floor file ({type(exc).__name__}: {exc})",
                        hint="measure it again with rag-exp bench -- --only noise (the file is rewritten)")


def write_floor(entry: NoiseFloor, root: Path | None = None) -> Path:
    """Add ``entry``, replacing an earlier one for the same strategy, variant and HNSW parameters."""
    path = floor_path(root)
    kept = [e for e in (read_floors(root) if path.exists() else [])
            if (e.strategy, e.variant, e.hnsw) != (entry.strategy, entry.variant, entry.hnsw)]
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"about": "HNSW noise floor per metric: the largest |delta of the mean| between two builds of the "
                     "same index (rag-exp bench, section noise); read by promote and the gate",
            "floors": [asdict(e) for e in [*kept, entry]]}
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _hnsw_of(run) -> dict:
    p = run.params
    out = {}
    for k in ("m", "ef_construction", "ef_search"):
        v = p.get(f"retrieval.hnsw.{k}")
        out[k] = None if v in (None, "None", "null") else int(v)
    return out


def floor_for(runs: Sequence, root: Path | None = None) -> tuple[NoiseFloor | None, str | None]:
    """The recorded floor that applies to a comparison of ``runs`` (champion, candidate), and a note.

    ``(None, None)``: no run searched HNSW (exact search has no build noise). ``(None, note)``: a run
    searched HNSW but no floor was measured for its strategy. Otherwise the newest entry for the HNSW
    run's strategy, preferring its variant and HNSW parameters (the note then says what differs)."""
    hnsw_runs = [r for r in runs if uses_hnsw(r)]
    if not hnsw_runs:
        return None, None
    run = hnsw_runs[-1]
    strategy, variant = run.tags.get("strategy"), run.tags.get("variant")
    try:
        floors = [f for f in read_floors(root) if f.strategy == strategy]
    except UserError as exc:
        return None, f"{exc}"
    if not floors:
        return None, (f"run {run.id[:12]} searched HNSW ({run.tags.get(SEARCH_TAG)}), whose rebuilt graph moves "
                      f"the numbers, but no noise floor is recorded for its strategy {str(strategy)[:12]}: measure it "
                      "with rag-exp bench -- --only noise --noise-variant " + str(variant or "hybrid"))
    want = _hnsw_of(run)

    def score(f: NoiseFloor):
        return (f.variant == variant, all(f.hnsw.get(k) == v for k, v in want.items() if v is not None), f.measured)

    best = max(floors, key=score)
    note = None
    if best.variant != variant:
        note = f"noise floor measured for variant {best.variant}, not {variant}"
    return best, note


def within_line(key: str, title: str, delta: float | None, floor: NoiseFloor | None) -> str | None:
    """'recall@5: Δ-0.004 is within the HNSW noise floor (±0.009, ...)' when it is; else None."""
    if floor is None or delta is None or (isinstance(delta, float) and math.isnan(delta)) or abs(delta) < 1e-12:
        return None  # no floor, or no difference to explain
    f = floor.floor(key)
    if f is None or abs(delta) > f + 1e-12:
        return None
    return (f"{title}: Δ{delta:+.3f} is within the HNSW noise floor (±{f:.3f}: two builds of the same index "
            f"differed that much; {floor.where()})")
