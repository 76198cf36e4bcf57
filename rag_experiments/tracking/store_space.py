"""An MLflow store on a full disk is one line, not five tracebacks (issue 55 probe 3).

SQLite answers "database or disk is full" and file writes ENOSPC; MLflow logs each failed
statement with its traceback (``mlflow.store.db.utils``) before raising, and Hydra then prints
the exception's own. :func:`out_of_space` recognises the failure anywhere in an exception's
chain; :func:`quiet_store_full_logs` drops MLflow's duplicate log records of it, since the run
reports it itself (:func:`store_full_line`)."""

from __future__ import annotations

import errno
import logging

_FULL_TEXT = ("database or disk is full", "No space left on device")


def out_of_space(exc: BaseException | None) -> bool:
    """True when ``exc`` or an exception it was raised from is a full disk."""
    return _full(exc) is not None


def _full(exc: BaseException | None) -> BaseException | None:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or any(t in str(exc) for t in _FULL_TEXT):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def store_full_line(tracking_uri: str, artifact_root: str) -> str:
    """The one line a run prints when a full disk (:func:`out_of_space`) stopped it. It names the
    store, not the file: SQLite's message names none, and a failed artifact copy names its
    temporary source."""
    return (f"out of disk space writing to the MLflow store ({tracking_uri}; artifacts under {artifact_root}): the "
            "run was not logged, or stopped as FAILED; free space there (or set MLFLOW_TRACKING_URI to a store "
            "with room) and run again")


class _DropStoreFull(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (out_of_space(exc) or any(t in record.getMessage() for t in _FULL_TEXT))


def quiet_store_full_logs() -> None:
    """Drop MLflow's logged tracebacks of a full store (the run prints one line instead); idempotent."""
    logger = logging.getLogger("mlflow.store.db.utils")
    if not any(isinstance(f, _DropStoreFull) for f in logger.filters):
        logger.addFilter(_DropStoreFull())
