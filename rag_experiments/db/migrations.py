"""Versioned, idempotent schema migrations.

Each ``migrations/NNNN_name.sql`` runs once, in order, inside a transaction, and is recorded in
``schema_migrations``. An advisory lock serialises concurrent processes (parallel sweep jobs)
so two of them never apply the same migration at once.
"""

from __future__ import annotations

from importlib import resources

import psycopg

from .locks import advisory_lock

SCHEMA_LOCK_KEY = 727_001  # pg_advisory_xact_lock key: migrations and CREATE EXTENSION, one at a time


def available() -> list[tuple[int, str, str]]:
    files = resources.files(__package__).joinpath("migrations")
    out = []
    for entry in sorted(files.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            out.append((version, entry.name, entry.read_text(encoding="utf-8")))
    return out


def migrate(conn: psycopg.Connection) -> list[str]:
    """Apply pending migrations; return the names applied (empty when up to date)."""
    applied_now: list[str] = []
    with conn.transaction():
        advisory_lock(conn, SCHEMA_LOCK_KEY, "the schema (another command is migrating it)", xact=True)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
        for version, name, sql in available():
            if version in done:
                continue
            conn.execute(sql)
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name))
            applied_now.append(name)
    return applied_now
