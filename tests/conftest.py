"""Shared fixtures: a real PostgreSQL + pgvector for the whole session, the mini corpus and
golden set, the bundled embedder.

The server is an embedded one started from the wheel in a temp folder, or, when
``DATABASE_URL`` is set, that server (a fresh database is created on it and dropped after).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(FIXTURES))

# ranx (the independent reference the metric, fusion and paired-test checks agree with) compiles
# its kernels with numba on first use: ~4 minutes of a fresh venv's CI on 2 cores, for inputs of a
# few dozen queries that its pure-Python path evaluates in milliseconds (the same definitions,
# numba's decorators then being plain calls). Set before anything imports numba.
os.environ.setdefault("NUMBA_DISABLE_JIT", "1")

# Every new MLflow sqlite store of the session (in-process runs and the tool's subprocesses, which
# inherit this) is a copy of one migrated, empty store made on first use, instead of MLflow's ~100
# schema migrations: 3-8 s per store on 2 cores, paid by most end-to-end tests
# (rag_experiments/tracking/server.py). Set before workers start so they share one template;
# tests/tracking/test_store_concurrency.py races real migrations without it.
if "RAG_EXP_MLFLOW_STORE_TEMPLATE" not in os.environ:
    _TEMPLATE_FOLDER = tempfile.mkdtemp(prefix="rag-exp-mlflow-template-")
    os.environ["RAG_EXP_MLFLOW_STORE_TEMPLATE"] = os.path.join(_TEMPLATE_FOLDER, "mlflow.db")
    atexit.register(shutil.rmtree, _TEMPLATE_FOLDER, ignore_errors=True)

from tests import ci_extras  # noqa: E402

ci_extras.install()  # under CI=true, pytest.importorskip of a missing extra fails instead of skipping


# the files that take minutes, longest first (measured on 2 cores): the tutorials run the demo and a project
LONG_FILES = ("test_tutorials.py", "test_new_team.py", "test_installed_wheel.py")


def pytest_collection_modifyitems(items):
    """The longest files first (the Ray cluster, then LONG_FILES), so that under ``make test``'s
    two workers (a file per worker) the rest of the suite runs beside them instead of after them."""
    def rank(item) -> int:
        if item.get_closest_marker("ray") is not None:
            return 0
        name = item.path.name
        return 1 + LONG_FILES.index(name) if name in LONG_FILES else 1 + len(LONG_FILES)

    items.sort(key=rank)  # stable: order kept otherwise


def _with_db(url: str, name: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(url)
    params["dbname"] = name
    return make_conninfo(**params)


def server_folder() -> Path:
    """A folder for an embedded server's data, outside pytest's tmp tree.

    As root, PostgreSQL runs as a separate system user that must traverse the parents of
    its data folder; pytest keeps its tmp root at mode 0700 (and resets it when another
    pytest session starts), so the data folder lives in its own world-traversable folder.
    """
    folder = Path(tempfile.mkdtemp(prefix="rag-exp-pg-", dir="/tmp"))
    folder.chmod(0o755)
    return folder


@pytest.fixture
def pg_folder():
    folder = server_folder()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server():
    """(admin url, EmbeddedPostgres or None)."""
    external = os.environ.get("DATABASE_URL")
    if external:
        yield external, None
        return
    from rag_experiments.db.embedded import EmbeddedPostgres

    folder = server_folder()
    server = EmbeddedPostgres(folder / "pgdata")
    server.ensure_running()
    yield server.url("postgres"), server
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_url(pg_server):
    """A database of its own for this test session, with the schema migrated."""
    admin, _ = pg_server
    name = f"ragtest_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = _with_db(admin, name)
    yield url
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def fresh_db_url(pg_server):
    """A brand-new empty database (for migration and ingest-from-scratch tests)."""
    admin, _ = pg_server
    name = f"ragtest_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield _with_db(admin, name)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def conn(pg_url):
    from rag_experiments.db.connect import connect

    c = connect(pg_url)
    yield c
    c.close()


@pytest.fixture(scope="session")
def embedder():
    from rag_experiments.embedding import load_embedder

    return load_embedder()


@pytest.fixture(scope="session")
def mini_docs():
    from rag_experiments.corpus.loader import load_corpus

    return load_corpus(FIXTURES / "mini_corpus", "mini")


def build_mini_golden(path: Path, docs) -> Path:
    from mini_golden_spec import MINI_CASES

    from rag_experiments.golden.build import case_record
    from rag_experiments.golden.golden_file import GoldenFile

    by_stem = {d.doc_id.split("/")[-1].removesuffix(".html"): d for d in docs}
    records = [
        case_record(by_stem[stem], quote, query, kind, {"method": "human", "author": "tests"}, identifier=ident)
        for stem, quote, query, kind, ident in MINI_CASES
    ]
    GoldenFile(path).append(records)
    return path


@pytest.fixture
def mini_golden(tmp_path, mini_docs) -> Path:
    return build_mini_golden(tmp_path / "mini.jsonl", mini_docs)


@pytest.fixture
def project(tmp_path, monkeypatch, pg_url):
    """A throwaway project folder: RAG_EXP_HOME, DATABASE_URL and an MLflow store inside it."""
    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path
