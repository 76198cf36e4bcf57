"""Which database to use, and a connection to it that is ready for our schema.

``DATABASE_URL`` wins when set (a production PostgreSQL with pgvector); otherwise an embedded
server is started in a project-local, git-ignored folder (``.rag-exp/pgdata``).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import psycopg
from pgvector.psycopg import register_vector

from ..errors import DatabaseError
from ..redaction import misread_password, redact_dsn, redact_text
from .embedded import EmbeddedPostgres
from .locks import advisory_lock
from . import native
from .migrations import SCHEMA_LOCK_KEY, migrate


def state_dir() -> Path:
    """Project-local state (embedded database, caches): ``$RAG_EXP_HOME/.rag-exp`` or ``./.rag-exp``."""
    return Path(os.environ.get("RAG_EXP_HOME", os.getcwd())).resolve() / ".rag-exp"


def redact_url(url: str) -> str:
    """The connection string (any form libpq accepts) with every password replaced by ``***``
    (for logs, MLflow params and errors): :func:`rag_experiments.redaction.redact_dsn`."""
    return redact_dsn(url)


def resolve_database_url(url: str | None = None, pgdata: Path | None = None) -> str:
    """An explicit URL, else ``DATABASE_URL``, else a running embedded server's URL."""
    url = url or os.environ.get("DATABASE_URL")
    if url:
        return url
    server = EmbeddedPostgres(pgdata or state_dir() / "pgdata")
    return server.ensure_running()


def connect(url: str, *, migrate_schema: bool = True, autocommit: bool = True) -> psycopg.Connection:
    """Open a connection, check pgvector, apply pending migrations, register the vector type."""
    safe_url = redact_url(url)  # also remembers the password, so the driver's message is masked too
    try:
        conn = psycopg.connect(url, autocommit=autocommit, connect_timeout=10)
    except psycopg.Error as exc:  # OperationalError (unreachable), ProgrammingError (malformed string)
        misread = misread_password(url)
        if misread:  # the driver's message would quote a piece of the password as a host or port
            raise DatabaseError(
                f"cannot connect to PostgreSQL at {safe_url}: the password holds "
                f"{' '.join(repr(c) for c in misread)} unencoded, and libpq reads the URL differently",
                hint="percent-encode those characters in the password "
                f"({', '.join(f'{c!r} as {quote(c, safe=str())}' for c in misread)})",
            ) from None
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DatabaseError(
            f"cannot connect to PostgreSQL at {safe_url}: {redact_text(first)}",
            hint="check DATABASE_URL or db.url (unset both to use the embedded server)",
        ) from None
    ensure_vector_extension(conn, url)
    if migrate_schema:
        migrate(conn)
        native.ensure(conn)  # the BM25 leg's C accumulator, where this server can load it
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
            advisory_lock(conn, SCHEMA_LOCK_KEY, "the schema (another command is creating the vector extension)",
                          xact=True)
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as exc:
        raise DatabaseError(
            f"pgvector is installed on {redact_url(url)} but CREATE EXTENSION vector failed: "
            f"{redact_text(str(exc))}",
            hint="ask a superuser to run CREATE EXTENSION vector; in that database",
        ) from None
