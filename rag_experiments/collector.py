"""Python's cyclic garbage collector, paused while a run retrieves and scores.

A run allocates a few objects per hit and keeps many of them: the process's search memo
(:data:`rag_experiments.retrieval.retriever.MEMO`) holds every candidate list for the next sweep
point, tens of thousands of lists of 50 hits at 10,000 cases. Each full collection walks every
live object, so with the collector on, a run's cost grows with cases x memo, not with cases:
measured in one process at 10,000 cases (scale benchmark), a warm run took 8.0 s, then 16.1 s the
next time; with the collector off, 4.5 s (docs/reference/performance.md).

Nothing the loops allocate (hits, lists, floats, per-case rows) forms reference cycles that must
be reclaimed mid-run: reference counting frees them as before. Cycles left behind are collected
once the collector is back on. ``gc.freeze`` would also keep later collections off the memo, but
frozen cyclic garbage is never reclaimed, which a 100-point sweep in one process would pay for.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block; the collector's state is restored after it, whatever
    happens inside (a caller that had switched it off keeps it off)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
