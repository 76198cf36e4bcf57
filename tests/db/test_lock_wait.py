"""A command waiting on another's database lock says what it waits for (issue 55 probe 5: a
`golden generate --dry-run` waited 23 minutes behind an ingest, silent). Real PostgreSQL: one
session holds the lock, another runs the real code that needs it."""

from __future__ import annotations

import threading
import time

import psycopg

from rag_experiments.chunk_index import _lock_key
from rag_experiments.db.locks import advisory_lock
from rag_experiments.db.migrations import SCHEMA_LOCK_KEY, migrate


def _behind(holder: psycopg.Connection, work, hold_s: float = 1.5) -> float:
    """Run ``work`` in a thread while ``holder`` keeps its lock for ``hold_s``; its seconds."""
    done: list[float] = []

    def run() -> None:
        start = time.monotonic()
        work()
        done.append(time.monotonic() - start)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(hold_s)
    assert not done, "did not wait for the lock"
    holder.rollback()
    holder.execute("SELECT pg_advisory_unlock_all()")
    t.join(timeout=60)
    return done[0]


def test_a_migration_behind_another_sessions_schema_lock_says_so(pg_url, capsys):
    with psycopg.connect(pg_url) as holder, psycopg.connect(pg_url, autocommit=True) as waiter:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))  # a transaction left open
        pid = holder.info.backend_pid
        assert _behind(holder, lambda: migrate(waiter)) > 1
    err = capsys.readouterr().err
    assert (f"waiting for the database lock of the schema (another command is migrating it), held by "
            f"PostgreSQL backend {pid} (connected at ") in err
    assert err.count("waiting for") == 1


def test_an_ingest_lock_behind_another_ingest_says_which_strategy(pg_url, capsys):
    key = _lock_key("heading-abc123")
    with psycopg.connect(pg_url, autocommit=True) as holder, psycopg.connect(pg_url, autocommit=True) as waiter:
        holder.execute("SELECT pg_advisory_lock(%s)", (key,))
        _behind(holder, lambda: advisory_lock(waiter, key, "building chunking strategy heading-abc123"))
        waiter.execute("SELECT pg_advisory_unlock(%s)", (key,))
    assert "waiting for the database lock of building chunking strategy heading-abc123, held by PostgreSQL " \
           "backend" in capsys.readouterr().err
