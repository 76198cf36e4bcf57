"""A frozen dev/test split of the golden set's cases: select on dev, report on test.

A sweep that picks the best of N points on the same cases it reports reports an optimistic value
(the best of N is partly luck). ``rag-exp golden split`` freezes a split once: a ``split`` record
appended to the golden set like every other change (:mod:`.records`), so it is versioned with the
file's sha256 and every later run carries it. Sweeps choose their best point on the dev cases; the
sweep parent, ``compare --sweep`` and ``promote --sweep`` report that point's value on the test
cases, which took no part in the choice.

How cases are assigned (the record's ``rule`` says it in words):

* each case gets a number ``u = sha256("<seed>:<case id>")`` read as a fraction in [0, 1);
* within each stratum (kind x doc_type, the segments compare reports), the cases are ordered by
  ``u`` and the first ``round(test_fraction x n)`` (half up) go to test, the rest to dev: every
  stratum keeps the fraction, a stratum of one case stays on dev;
* a case added after the split (not named in the record) goes to test when ``u < test_fraction``,
  else to dev: the same hash, so its side never depends on when it is asked, nor on other cases.

The record lists both sides' ids, so a reader needs no code to see them, and :func:`check` recomputes
them from the cases before the record and the seed (a hand-edited list is reported).
"""

from __future__ import annotations

import getpass
import hashlib
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ..errors import GoldenSetError, UserError
from .golden_file import GoldenFile
from .records import Case, Record, Retire, Split, new_id

DEV, TEST = "dev", "test"
STRATA = ("kind", "doc_type")
DEFAULT_TEST_FRACTION = 0.3
DEFAULT_SEED = 13
RULE = ("u = sha256('<seed>:<case id>') as a fraction of 16**15 (first 15 hex digits); per stratum (kind, doc_type) "
        "the round-half-up(test_fraction x n) cases of lowest u are test, the rest dev; a case added later: test "
        "when u < test_fraction, else dev")


def unit(seed: int, case_id: str) -> float:
    """The case's place in [0, 1) for this seed (sha256 of ``"<seed>:<case id>"``)."""
    return int(hashlib.sha256(f"{seed}:{case_id}".encode()).hexdigest()[:15], 16) / 16 ** 15


@dataclass(frozen=True)
class FrozenSplit:
    """The split in force: the last ``split`` record of the golden set."""

    id: str
    seed: int
    test_fraction: float
    dev: frozenset[str]
    test: frozenset[str]

    def side(self, case_id: str) -> str:
        if case_id in self.test:
            return TEST
        if case_id in self.dev:
            return DEV
        return TEST if unit(self.seed, case_id) < self.test_fraction else DEV  # added after the split

    def sides(self, case_ids: Iterable[str]) -> list[str]:
        return [self.side(c) for c in case_ids]


def assign(cases: Sequence[Case], seed: int, test_fraction: float) -> dict[str, str]:
    """case id -> dev | test, stratified by kind and doc_type (the rule in the module docstring)."""
    strata: dict[tuple[str, str], list[str]] = defaultdict(list)
    for case in cases:
        strata[(case.kind, case.doc_type)].append(case.id)
    out: dict[str, str] = {}
    for ids in strata.values():
        ordered = sorted(ids, key=lambda i: (unit(seed, i), i))
        n_test = int(test_fraction * len(ordered) + 0.5)
        out.update({i: TEST if k < n_test else DEV for k, i in enumerate(ordered)})
    return out


def live_cases(records: Sequence[Record]) -> list[Case]:
    retired = {r.target for r in records if isinstance(r, Retire)}
    return [r for r in records if isinstance(r, Case) and r.id not in retired]


def current_split(records: Sequence[Record]) -> FrozenSplit | None:
    """The last ``split`` record, interpreted; None when the golden set has none."""
    last = next((r for r in reversed(records) if isinstance(r, Split)), None)
    if last is None:
        return None
    return FrozenSplit(last.id, last.seed, last.test_fraction, last.dev, last.test)


def check(records: Sequence[Record]) -> list[str]:
    """Problems with the split records: each one's lists must be what its seed and fraction give on the
    live cases before it. Empty when every split reproduces."""
    problems = []
    for n, rec in enumerate(records):
        if not isinstance(rec, Split):
            continue
        want = assign(live_cases(records[:n]), rec.seed, rec.test_fraction)
        got = {**{i: DEV for i in rec.dev}, **{i: TEST for i in rec.test}}
        if want != got:
            differ = sorted(set(want) ^ set(got)) or sorted(i for i in want if want[i] != got[i])
            problems.append(f"split {rec.id} does not reproduce from seed {rec.seed} and test_fraction "
                            f"{rec.test_fraction:g}: case {differ[0]} and {len(differ) - 1} more differ")
    return problems


def freeze(golden_path: str | Path, seed: int = DEFAULT_SEED, test_fraction: float = DEFAULT_TEST_FRACTION,
           reason: str = "", who: str | None = None, replace: bool = False) -> tuple[dict, dict[str, dict[str, int]]]:
    """Append the ``split`` record; return it and the counts per stratum ({"kind/doc_type": {dev, test}}).
    A second split is refused unless ``replace`` (its reason says why the first was not kept)."""
    if not 0 < test_fraction < 1:
        raise UserError(f"--test-fraction must be in (0, 1), got {test_fraction}")
    golden = GoldenFile(golden_path)
    if not golden.exists():
        raise GoldenSetError(f"{golden.path} does not exist")
    records = golden.read_records()
    earlier = current_split(records)
    if earlier is not None and not replace:
        raise UserError(f"{golden.path} already has a split ({earlier.id}: {len(earlier.dev)} dev, "
                        f"{len(earlier.test)} test cases, seed {earlier.seed})",
                        hint="a split is frozen so that test stays unseen; --replace --reason '...' records a new one")
    reason = " ".join(reason.split()) or ("first dev/test split" if earlier is None else "")
    if not reason:
        raise UserError("--reason is empty: say why the split in force is replaced (both stay in the golden set)")
    cases = live_cases(records)
    if not cases:
        raise GoldenSetError(f"{golden.path} has no case to split")
    sides = assign(cases, seed, test_fraction)
    dev = sorted(i for i, s in sides.items() if s == DEV)
    test = sorted(i for i, s in sides.items() if s == TEST)
    record = {"type": "split", "id": new_id("split", seed, test_fraction, *dev, "|", *test, len(records)),
              "seed": seed, "test_fraction": test_fraction, "strata": list(STRATA), "rule": RULE,
              "dev": dev, "test": test, "who": who or os.environ.get("USER") or getpass.getuser(),
              "reason": reason}
    written, = golden.append([record])
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {DEV: 0, TEST: 0})
    for case in cases:
        counts[f"{case.kind}/{case.doc_type}"][sides[case.id]] += 1
    return written, dict(sorted(counts.items()))
