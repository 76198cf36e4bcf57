"""One advisory lock per shared file or act, taken through a lock file beside it, that says what
it waits for (issue 55 probe 5: a command waiting on another printed nothing).

``flock`` locks belong to an open file description, so a process asking again for a lock it
already holds (an append re-reading its file) would wait on itself: the lock is re-entrant
within the process. Below every layer (stdlib only)."""

from __future__ import annotations

import fcntl
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

_HELD: dict[Path, int] = {}  # lock file -> depth, for the locks this process holds


@contextmanager
def file_lock(lock_path: Path, *, exclusive: bool = True, waiting_for: str = "",
              optional: bool = False) -> Iterator[None]:
    """Hold ``lock_path``'s lock (exclusive, or shared for readers). When another process holds
    it, print ``waiting for <waiting_for> ...`` to stderr once, then wait. ``optional``: a lock
    file that cannot be created (a read-only checkout) means going ahead unlocked."""
    key = Path(lock_path).resolve()
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    try:
        key.parent.mkdir(parents=True, exist_ok=True)
        handle = open(key, "a+")
    except OSError:
        if not optional:
            raise
        yield
        return
    with handle:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(handle.fileno(), mode | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for {waiting_for or key} ...", file=sys.stderr, flush=True)
            fcntl.flock(handle.fileno(), mode)
        _HELD[key] = 1
        try:
            yield
        finally:
            del _HELD[key]
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
