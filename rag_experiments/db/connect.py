"""Which database to use, and a connection to it that is ready for our schema.

``DATABASE_URL`` wins when set (a production PostgreSQL with pgvector); otherwise an embedded
server is started in a project-local, git-ignored folder (``.rag-exp/pgdata``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import psycopg
from pgvector.psycopg import register_vector

from ..errors import DatabaseError
from .embedded import EmbeddedPostgres
from .migrations import migrate


def state_dir() -> Path:
    """Project-local state (embedded database, caches): ``$RAG_EXP_HOME/.rag-exp`` or ``./.rag-exp``."""
    return Path(os.environ.get("RAG_EXP_HOME", os.getcwd())).resolve() / ".rag-exp"


def redact_url(url: str) -> str:
    """The URL with any password replaced by ``***`` (for logs, MLflow params and errors)."""
    return re.sub(r"(://[^:/@?#]+):[^@/?#]*@", r"\1:***@", url)


def resolve_database_url(url: str | None = None, pgdata: Path | None = None) -> str:
    """An explicit URL, else ``DATABASE_URL``, else a running embedded server's URL."""
    url = url or os.environ.get("DATABASE_URL")
    if url:
        return url
    server = EmbeddedPostgres(pgdata or state_dir() / "pgdata")
    return server.ensure_running()


def connect(url: str, *, migrate_schema: bool = True, autocommit: bool = True) -> psycopg.Connection:
    """Open a connection, check pgvector, apply pending migrations, register the vector type."""
    try:
        conn = psycopg.connect(url, autocommit=autocommit, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise DatabaseError(
            f"cannot connect to PostgreSQL at {redact_url(url)}: {str(exc).strip().splitlines()[0]}",
            hint="check DATABASE_URL (unset it to use the embedded server)",
        ) from None
    ensure_vector_extension(conn, url)
    if migrate_schema:
        migrate(conn)
    register_vector(conn)
    return conn


def ensure_vector_extension(conn: psycopg.Connection, url: str) -> None:
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    if row:
        return
    available = conn.execute(
        "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
    ).fetchone()
    if available is None:
        raise DatabaseError(
            f"the PostgreSQL server at {redact_url(url)} has no 'vector' extension (pgvector)",
            hint="install pgvector on that server (e.g. apt install postgresql-NN-pgvector, or "
            "build from https://github.com/pgvector/pgvector), then run CREATE EXTENSION vector; "
            "or unset DATABASE_URL to use the embedded server, which ships it",
        )
    try:
        with conn.transaction():
            # serialise with other processes doing the same on a fresh database (parallel jobs):
            # IF NOT EXISTS alone still races on the catalog's unique index
            conn.execute("SELECT pg_advisory_xact_lock(727001)")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as exc:
        raise DatabaseError(
            f"pgvector is installed on {redact_url(url)} but CREATE EXTENSION vector failed: {exc}",
            hint="ask a superuser to run CREATE EXTENSION vector; in that database",
        ) from None
