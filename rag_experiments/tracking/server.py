"""Is the tracking store there, and is it ready? Asked before any work on it.

* An HTTP tracking server that is down, or a database-backed store (``postgresql://``,
  ``mysql://``, ``mssql://``) that refuses the connection (a wrong password, an unknown
  database, a closed port), is one line at once, naming the store with its password masked: not
  minutes of MLflow's retries (HTTP retries; ten engine attempts, ~100 s, for a database)
  followed by a traceback per point.
* A fresh sqlite store is created (tables, then MLflow's schema migrations) by the first process
  that opens it. MLflow's tracking store checks "do the tables exist?" and migrates without a
  lock (its jobs and workspace stores use one, its tracking store does not), so two runs started
  at once on a fresh store both migrate and one dies (``duplicate column name: step``,
  ``table ... already exists``). :func:`open_store` takes an exclusive ``flock`` on a file beside
  the database while the store is opened for the first time in the process: the second process
  waits, then finds the tables made.
* ``$RAG_EXP_MLFLOW_STORE_TEMPLATE`` (set by the test suite, which makes hundreds of stores): a new
  sqlite store is a copy of that migrated, empty store instead of MLflow's ~100 schema migrations
  (3-8 s per store on 2 cores). The template is made there on first use, under the same lock, and
  keeps no experiment: MLflow adds its Default experiment, with this store's artifact location, when
  it opens the copy.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import UserError
from ..redaction import redact_dsn, redact_text

TIMEOUT_S = 5
#: the sqlalchemy-backed stores MLflow opens itself (``sqlite`` is a file: nothing to reach)
_NETWORK_DATABASES = ("postgresql", "mysql", "mssql")
#: suffix of the lock file beside a sqlite store (``mlruns/mlflow.db.init-lock``)
LOCK_SUFFIX = ".init-lock"
#: a migrated, empty sqlite store copied to make a new one (the tests set it; see the module's doc)
TEMPLATE_ENV = "RAG_EXP_MLFLOW_STORE_TEMPLATE"

_opened: set[str] = set()  # stores this process has opened (created/migrated) already


def unreachable_reason(uri: str) -> str | None:
    """None when ``uri`` is neither an HTTP server nor a network database, or it answers; else why
    not (one line, secrets masked)."""
    if uri.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=TIMEOUT_S) as r:
                return None if r.status == 200 else f"HTTP {r.status}"
        except OSError as exc:
            return redact_text(str(getattr(exc, "reason", exc)))
    if _scheme(uri) in _NETWORK_DATABASES:
        return _database_reason(uri)
    return None


def _scheme(uri: str) -> str:
    """``postgresql+psycopg://...`` -> ``postgresql``."""
    head = uri.split("://", 1)[0] if "://" in uri else ""
    return head.split("+", 1)[0].lower()


def _one_line(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return redact_text(text[:500])


def _database_reason(uri: str) -> str | None:
    """Open one connection the way MLflow will (SQLAlchemy, the URI as given), once, with a
    connect timeout: a refused password is known in milliseconds."""
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    redact_dsn(uri)  # remembers the password: any later text quoting it is masked
    args = {"connect_timeout": TIMEOUT_S} if _scheme(uri) in ("postgresql", "mysql") else {}
    try:
        engine = sqlalchemy.create_engine(uri, poolclass=NullPool, connect_args=args)
    except Exception as exc:  # noqa: BLE001 - a malformed URL, no driver for the dialect
        return _one_line(f"{type(exc).__name__}: {exc}")
    try:
        with engine.connect():
            return None
    except sqlalchemy.exc.DBAPIError as exc:
        return _one_line(str(exc.orig))
    except Exception as exc:  # noqa: BLE001 - anything else the driver raises while connecting
        return _one_line(f"{type(exc).__name__}: {exc}")
    finally:
        engine.dispose()


def check_store(uri: str) -> None:
    """A :class:`UserError` naming the store (password masked) when it does not answer."""
    why = unreachable_reason(uri)
    if why is None:
        return
    shown = redact_text(uri)
    if uri.startswith(("http://", "https://")):
        raise UserError(f"the MLflow tracking server at {shown} does not answer: {why}",
                        hint="start it (mlflow server ...) or fix MLFLOW_TRACKING_URI / tracking.uri")
    raise UserError(f"the MLflow tracking store at {shown} refused the connection: {why}",
                    hint="fix the user, password, host or database in MLFLOW_TRACKING_URI / tracking.uri")


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (None for anything else or an in-memory db)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///"):].split("?", 1)[0]
    if not path or path == ":memory:":
        return None
    return Path(path)  # sqlite:////abs/db -> /abs/db; sqlite:///rel/db -> rel/db


@contextmanager
def init_lock(uri: str) -> Iterator[None]:
    """An exclusive lock held across processes while a sqlite store is created or migrated (a
    no-op for other stores, and where ``fcntl`` does not exist)."""
    path = sqlite_path(uri)
    try:
        import fcntl
    except ImportError:  # Windows: MLflow's own lock for its other stores skips it too
        fcntl = None
    if path is None or fcntl is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + LOCK_SUFFIX), "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def open_store(uri: str, *, check: bool = True) -> None:
    """Check the store answers (:func:`check_store`; ``check=False``: the caller just did), then
    open it once in this process under :func:`init_lock`, so a fresh sqlite store is created and
    migrated by one process only."""
    if uri in _opened:
        return
    if check:
        check_store(uri)
    if sqlite_path(uri) is not None:
        from mlflow.tracking import MlflowClient

        with init_lock(uri):
            copy_template(sqlite_path(uri))
            # the first request builds MLflow's store: tables, then every schema migration
            MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
    _opened.add(uri)


def copy_template(path: Path) -> None:
    """A new store at ``path`` copied from ``$RAG_EXP_MLFLOW_STORE_TEMPLATE`` (made first if it does
    not exist yet); nothing when the variable is unset or the store exists. Under the caller's lock
    (or before anything else opens ``path``: the Ray test's ``mlflow server`` store)."""
    template = os.environ.get(TEMPLATE_ENV)
    if not template or path.exists():
        return
    template_path = Path(template)
    uri = f"sqlite:///{template_path}"
    with init_lock(uri):
        if not template_path.exists():
            from mlflow.tracking import MlflowClient

            made = template_path.with_name(template_path.name + ".making")
            made.unlink(missing_ok=True)
            MlflowClient(tracking_uri=f"sqlite:///{made}").search_experiments(max_results=1)
            db = sqlite3.connect(made)
            try:  # the Default experiment names the template's folder: MLflow re-adds it per copy
                with db:
                    db.execute("DELETE FROM experiment_tags")
                    db.execute("DELETE FROM experiments")
            finally:
                db.close()
            os.replace(made, template_path)
    copying = path.with_name(path.name + ".copying")
    shutil.copyfile(template_path, copying)
    os.replace(copying, path)
