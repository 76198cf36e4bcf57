"""Process start-up and shut-down of the command-line entry points (``rag-exp``, ``run.py``).

Measured on the demo's warm ``rag-exp run`` (2 cores; issue 44, item 8), the interpreter spent:

* 25-30% of the CPU of importing MLflow, SQLAlchemy, pandas and matplotlib in the cyclic garbage
  collector (``import mlflow, pandas, matplotlib.pyplot`` + the SQLAlchemy store: 2.25-2.46 s CPU
  with the default thresholds, 1.68-1.77 s with the collector off, 1.90-1.93 s with a first
  threshold of 100,000): every import allocates thousands of long-lived objects (modules,
  classes, functions) that each young collection scans and moves on;
* 0.6-0.7 s CPU (2-3 s wall on a loaded machine) after the last line of the command, in the
  collections the interpreter runs while it tears every module down; :func:`gc.freeze` first
  leaves those objects out of them (the memory is the operating system's a moment later).

:func:`tune_for_command_line` and :func:`before_exit` are for entry points only (never called
when the package is imported as a library or by the tests' in-process ``main(argv)`` calls).
"""

from __future__ import annotations

import gc

#: first-generation threshold for a command-line process (Python's default is 700): a young
#: collection per 100,000 net allocations instead of per 700 while libraries import
GEN0_THRESHOLD = 100_000


def tune_for_command_line() -> None:
    """Fewer collections while libraries import (same collector, same guarantees: reference
    cycles are still collected, less often)."""
    gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(GEN0_THRESHOLD, gen0), gen1, gen2)


def before_exit() -> None:
    """Leave every object alive now out of the interpreter's shut-down collections (the command
    has finished; output is flushed by the caller or by the interpreter as usual)."""
    gc.freeze()
