"""A tqdm progress bar that a Ctrl-C cannot leave half-built.

Why: a SIGINT that lands inside ``tqdm.__init__`` before it sets ``pos`` leaves an object whose
``__del__`` later fails with ``AttributeError: 'tqdm' object has no attribute 'pos'``, printed as an
"Exception ignored" traceback after the line that says what an interrupted ingest kept
(tests/test_ingest_interrupt.py read it as the last line once in CI, 2026-12-07). The bar is built
with Ctrl-C held (:func:`.interrupts.sigint_held`) and the signal delivered once it is whole.
"""

from __future__ import annotations

from typing import Any

from tqdm import tqdm

from .interrupts import sigint_held


def progress_bar(**kwargs: Any) -> tqdm:
    """``tqdm(**kwargs)``, a Ctrl-C during its construction delivered once it is built."""
    with sigint_held():
        return tqdm(**kwargs)
