"""Ctrl-C held back for a short step that must not be cut in half: the golden file's append with its
count (:func:`.golden.hand_label.append_held`), a progress bar's construction (:mod:`.progress`).

While held, SIGINT's handler only notes the signal; on leaving, the old handler is back and a noted
signal is raised again (KeyboardInterrupt by default). Not ``pthread_sigmask``: a process-directed
signal goes to any thread that does not block it (tqdm's monitor thread, an xdist or ONNX thread), and
Python then runs the handler in the main thread at once, so a mask on the main thread held nothing in
a threaded process (the progress bar's first version failed its own test under xdist, 2026-12-07).
Only the main thread can set a handler; elsewhere nothing is held (signals are handled there anyway).
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def sigint_held() -> Iterator[None]:
    """Run the block with a Ctrl-C delivered after it, not during it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    old = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if caught:
            signal.raise_signal(signal.SIGINT)  # the old handler's turn
