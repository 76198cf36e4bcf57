from __future__ import annotations

import psycopg
import pytest

from rag_experiments.db.connect import connect, redact_url
from rag_experiments.db.migrations import available, migrate
from rag_experiments.errors import DatabaseError


def test_redact_url_hides_password():
    assert redact_url("postgresql://alice:s3cret@db.example:5432/rag") == "postgresql://alice:***@db.example:5432/rag"
    assert redact_url("postgresql://postgres@/rag?host=/tmp") == "postgresql://postgres@/rag?host=/tmp"


def test_unreachable_database_is_a_clear_error():
    with pytest.raises(DatabaseError) as err:
        connect("postgresql://nobody:pw@127.0.0.1:1/none")
    assert "cannot connect" in str(err.value) and "pw" not in str(err.value)


def test_migrations_are_versioned_and_idempotent(fresh_db_url):
    with psycopg.connect(fresh_db_url, autocommit=True) as conn:
        applied = migrate(conn)
        assert applied == [name for _, name, _ in available()]
        assert migrate(conn) == []  # second run: nothing to do
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
        assert versions == [v for v, _, _ in available()]


def test_server_without_pgvector_gets_install_hint(fresh_db_url, monkeypatch):
    # Simulate a server lacking the extension by hiding it from pg_available_extensions.
    from rag_experiments.db import connect as connect_mod

    class FakeConn:
        def __init__(self):
            self.calls = 0

        def execute(self, sql, *a):
            class R:
                def fetchone(self_inner):
                    return None
            return R()

    with pytest.raises(DatabaseError) as err:
        connect_mod.ensure_vector_extension(FakeConn(), "postgresql://u:pw@h/db")
    msg = str(err.value)
    assert "no 'vector' extension" in msg and "pgvector" in msg and "pw" not in msg
