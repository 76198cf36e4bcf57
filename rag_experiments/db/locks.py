"""PostgreSQL advisory locks that say what they wait for (issue 55 probe 5: a `golden generate
--dry-run` waited 23 minutes behind an ingest and printed nothing).

Each lock is tried first; only when another session holds it is one line printed to stderr
(what is locked, which backend holds it and since when, what it is running), then the wait."""

from __future__ import annotations

import sys

import psycopg

_HOLDER = (
    "SELECT a.pid, to_char(a.backend_start, 'HH24:MI:SS'), coalesce(nullif(a.application_name, ''), '?'),"
    " left(coalesce(a.query, ''), 80) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = ((%s::bigint >> 32) & 4294967295)::oid"
    " AND l.objid = (%s::bigint & 4294967295)::oid AND l.objsubid = 1 LIMIT 1"
)


def holder_line(conn: psycopg.Connection, key: int, what: str) -> str:
    """The line printed before waiting for advisory lock ``key``."""
    try:
        row = conn.execute(_HOLDER, (key, key)).fetchone()
    except psycopg.Error:  # no rights on pg_stat_activity's details: say what is known
        row = None
    held = (f", held by PostgreSQL backend {row[0]} (connected at {row[1]}, {row[2]}: {row[3]!r})"
            if row else ", held by another session")
    return f"waiting for the database lock of {what}{held} ..."


def advisory_lock(conn: psycopg.Connection, key: int, what: str, *, xact: bool = False) -> None:
    """``pg_advisory_lock`` (``xact``: ``pg_advisory_xact_lock``, inside a transaction), saying
    on stderr what it waits for when another session holds it."""
    kind = "xact_" if xact else ""
    if conn.execute(f"SELECT pg_try_advisory_{kind}lock(%s)", (key,)).fetchone()[0]:
        return
    print(holder_line(conn, key, what), file=sys.stderr, flush=True)
    conn.execute(f"SELECT pg_advisory_{kind}lock(%s)", (key,))
