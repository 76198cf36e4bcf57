"""A tqdm progress bar that a Ctrl-C cannot leave half-built.

Why: a SIGINT that lands inside ``tqdm.__init__`` before it sets ``pos`` leaves an object whose
``__del__`` later fails with ``AttributeError: 'tqdm' object has no attribute 'pos'``, printed as an
"Exception ignored" traceback after the line that says what an interrupted ingest kept
(tests/test_ingest_interrupt.py read it as the last line once in CI, 2026-12-07). While the bar is
built, SIGINT's handler only notes the signal; once the bar is whole the old handler is back and the
signal is raised again. (Blocking SIGINT with ``pthread_sigmask`` does not hold it: a process-directed
signal goes to any thread that does not block it, tqdm's monitor thread or an ONNX one, and Python
runs the handler in the main thread at once.)
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from tqdm import tqdm


def progress_bar(**kwargs: Any) -> tqdm:
    """``tqdm(**kwargs)``, a Ctrl-C during its construction delivered once it is built (main thread
    only: Python runs signal handlers there)."""
    if threading.current_thread() is not threading.main_thread():
        return tqdm(**kwargs)
    caught: list[int] = []
    old = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        bar = tqdm(**kwargs)
    finally:
        signal.signal(signal.SIGINT, old)
        if caught:
            signal.raise_signal(signal.SIGINT)  # the old handler's turn: KeyboardInterrupt by default
    return bar
