"""A tqdm progress bar that a Ctrl-C cannot leave half-built.

Why: a SIGINT that lands inside ``tqdm.__init__`` before it sets ``pos`` leaves an object whose
``__del__`` later fails with ``AttributeError: 'tqdm' object has no attribute 'pos'``, printed as an
"Exception ignored" traceback after the line that says what an interrupted ingest kept
(tests/test_ingest_interrupt.py read it as the last line once in CI, 2026-12-07). The bar is built with
SIGINT held back, as the golden file's append holds it (:func:`.golden.hand_label.append_held`); the
interrupt is delivered as the mask lifts, with the bar whole.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from tqdm import tqdm


def progress_bar(**kwargs: Any) -> tqdm:
    """``tqdm(**kwargs)``, with Ctrl-C held back while it is built (main thread only: signals are
    delivered there)."""
    hold = hasattr(signal, "pthread_sigmask") and threading.current_thread() is threading.main_thread()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if hold else None
    try:
        return tqdm(**kwargs)
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
