"""Cached answers prove themselves (issue 55): a run that uses a team system's answer cache first
re-asks a random sample of its queries live and compares.

No cache key can hold everything a system depends on (a data file it reads, an environment
variable, a package reinstalled under the same version, an index behind a URL), so the key only
says which answers to try; the sample says whether they are still the system's answers:

* the sample: ``max(retrieval.external.verify, verify_share x queries)`` distinct queries (all of
  them when there are fewer), drawn with a seed (``verify_seed``, else a fresh one; logged as the
  tag ``external.cache_check_seed`` so the draw can be repeated);
* each sampled query is asked live once. A cached answer that differs in what is scored (the
  documents, offsets and texts, rank by rank; scores and ids are not scored and not compared) is
  asked a second time: the same second answer means the system changed (``stale``: nothing is
  read from the cache this run, every query is asked again and its entry replaced), another one
  means it does not answer a query the same way twice (``nondeterministic``). A sampled query
  with no cached answer (a first run) is asked twice too, so a non-deterministic system is caught
  before its first answers are frozen in the cache;
* a non-deterministic system is not cached: nothing is read, nothing is written;
* ``verify=0`` turns the check off: one line, and the run's tag ``external.cache_check=off``.

The live answers of the sample are the run's answers for those queries (they are not asked a
third time). What the check cost (live asks, seconds) is logged as ``external.cache_check.asks``
and ``external.cache_check.seconds``.
"""

from __future__ import annotations

import math
import random
import secrets
import sys
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from .passages import Passage

Answer = tuple[list[Passage], float]  # the passages and the milliseconds the system took


def sample_size(n_queries: int, verify: int, share: float) -> int:
    """How many distinct queries the check re-asks: ``max(verify, ceil(share x n))``, at most n; 0 when off."""
    if verify <= 0 or n_queries <= 0:
        return 0
    return min(n_queries, max(verify, math.ceil(share * n_queries)))


def first_difference(a: Sequence[Passage], b: Sequence[Passage]) -> int | None:
    """The first rank (1-based) at which two answers differ in what is scored (document, offsets,
    text); None when they are the same. One answer a prefix of the other differs at the rank after it."""
    for rank, (x, y) in enumerate(zip(a, b), start=1):
        if (x.document, x.start, x.end, x.text) != (y.document, y.start, y.end, y.text):
            return rank
    return None if len(a) == len(b) else min(len(a), len(b)) + 1


@dataclass(frozen=True)
class CacheCheck:
    """The outcome of the check, for the run's tags, metrics and printed lines."""

    status: str  # ok | stale | nondeterministic | off | unused (no cache: nothing to check)
    sampled: int = 0  # distinct queries asked live
    compared: int = 0  # of them, with a cached answer to compare
    asks: int = 0  # live asks the check made
    seconds: float = 0.0
    seed: int | None = None
    line: str = ""  # what the run prints; empty when all is well

    @property
    def reads_cache(self) -> bool:
        return self.status in ("ok", "off")

    @property
    def writes_cache(self) -> bool:
        return self.status != "nondeterministic"

    def tags(self) -> dict[str, str]:
        out = {"external.cache_check": self.status}
        if self.seed is not None:
            out["external.cache_check_seed"] = str(self.seed)
        if self.status == "nondeterministic":
            out["external.nondeterministic"] = "true"
        return out

    def metrics(self) -> dict[str, float]:
        if self.status in ("off", "unused"):
            return {}
        return {"external.cache_check.sampled": float(self.sampled), "external.cache_check.compared":
                float(self.compared), "external.cache_check.asks": float(self.asks),
                "external.cache_check.seconds": self.seconds}


def say(line: str) -> None:
    """A check's line on stderr, where a run's warnings go (flushed: a forked run prints it too)."""
    print(f"WARNING: {line}", file=sys.stderr, flush=True)


def check_answers(system: str, queries: Sequence[str], labels: Sequence[str], cached: Mapping[int, Answer],
                  ask: Callable[[int], Answer], n: int, seed: int | None = None,
                  total: int | None = None) -> tuple[CacheCheck, dict[int, Answer]]:
    """Re-ask ``n`` of the distinct ``queries`` (``ask(i)``: the system's live answer to query i)
    and compare with ``cached`` (query index -> cached answer). ``labels[i]`` names query i in the
    line (its case id). Returns the outcome and the live answers of the sample (index -> answer),
    which the run uses as its answers. ``total``: the run's query count, for the line."""
    seed = secrets.randbits(32) if seed is None else seed
    sample = sorted(random.Random(seed).sample(range(len(queries)), min(n, len(queries))))
    t0 = time.perf_counter()
    live: dict[int, Answer] = {}
    changed: list[tuple[int, int]] = []  # (query index, first differing rank): cached vs live, live twice alike
    unstable: list[tuple[int, int]] = []  # the same query answered two ways live
    asks = 0
    for i in sample:
        live[i] = ask(i)
        asks += 1
        old = cached.get(i)
        diff = first_difference(old[0], live[i][0]) if old is not None else None
        if old is not None and diff is None:
            continue  # the cached answer is the system's answer today
        again = ask(i)
        asks += 1
        unsteady = first_difference(live[i][0], again[0])
        if unsteady is not None:
            unstable.append((i, unsteady))
        elif diff is not None:
            changed.append((i, diff))
    seconds = time.perf_counter() - t0
    compared = sum(1 for i in sample if i in cached)
    total = len(queries) if total is None else total
    if unstable:
        i, rank = unstable[0]
        line = (f"{system} answered the same query differently twice (case {labels[i]}: first differing rank "
                f"{rank}; {len(unstable)} of {len(sample)} sampled queries): it is non-deterministic (run tag "
                "external.nondeterministic=true), so its answers are neither read from nor written to the cache")
        status = "nondeterministic"
    elif changed:
        i, rank = changed[0]
        line = (f"{system}: its cached answers are not its answers today (case {labels[i]}: first differing rank "
                f"{rank}; {len(changed)} of {compared} sampled cached answers differ): the cache for it is "
                f"invalidated and all {total} queries are asked again")
        status = "stale"
    else:
        line, status = "", "ok"
    return CacheCheck(status, len(sample), compared, asks, seconds, seed, line), live


def check_off(system: str) -> CacheCheck:
    return CacheCheck("off", line=f"retrieval.external.verify=0: the cached answers of {system} are used without "
                      "asking the system any of them again (run tag external.cache_check=off); a change the cache "
                      "key cannot see (a data file, an environment variable, a service behind the same URL) "
                      "would go unnoticed")
