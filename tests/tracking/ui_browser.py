"""What the MLflow UI browser tests share: Debian's Chromium driven by Playwright (``apt-get install
chromium``; nothing downloads a browser build: never ``playwright install``), one browser per test
module with a fresh context (profile) per page, a real ``mlflow server`` on 127.0.0.1 over a test's
sqlite store, and a store a whole module reads (its server started once).

Screenshots are kept in ``test-artifacts/browser/`` (git-ignored) for a person to look at.
Outside CI a missing Chromium or Playwright skips the test; in CI (``CI=true``) it fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
TIMEOUT_MS = 60_000


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"browser test cannot run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def sync_playwright():
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (the [test] extra)")
    return sync_playwright


@pytest.fixture(scope="module")
def browser(sync_playwright):
    """One Chromium for the module (a launch per test cost seconds); each page gets its own context."""
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def new_page(browser):
    """``new_page(width=1600, height=1000)``: a page in a fresh browser context (no remembered GenAI /
    Model training choice, nothing cached from another test); the contexts close after the test."""
    contexts = []

    def make(width: int = 1600, height: int = 1000):
        context = browser.new_context(viewport={"width": width, "height": height})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        return page

    yield make
    for context in contexts:
        context.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(root: Path, db: Path | None = None) -> Iterator[str]:
    """``mlflow server`` on a free 127.0.0.1 port over the sqlite store ``db`` (default
    ``root/mlruns/mlflow.db``; its log in ``root``); its base URL. tools/ui_screenshots.py serves with it too."""
    db = db or root / "mlruns" / "mlflow.db"
    port = _free_port()
    log = open(root / "mlflow-server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{db}",
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        cwd=root, stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})  # no huey job consumers
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"{base}/health", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    raise RuntimeError("mlflow server did not start:\n"
                                       + (root / "mlflow-server.log").read_text()[-3000:]) from None
                time.sleep(0.25)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@contextmanager
def own_store(root: Path, template_db: Path, experiment_tags: dict | None = None) -> Iterator[str]:
    """A store of a module's own in ``root`` (the shared ``store`` fixture is per test), the environment
    pointing at it while open, as ``store`` does; yields the experiment id. A test using it after a
    per-test store calls :func:`use_store` first (mlflow keeps the last tracking URI it was given)."""
    import mlflow

    (root / "mlruns").mkdir()
    shutil.copy(template_db, root / "mlruns" / "mlflow.db")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("RAG_EXP_HOME", str(root))
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
        mp.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        mp.delenv("RAG_EXP_PARENT_RUN_ID", raising=False)
        from rag_experiments.paths import artifact_root

        mlflow.set_tracking_uri(f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
        exp_id = mlflow.create_experiment("rag-experiments", artifact_location=artifact_root(),
                                          tags=experiment_tags)
        mlflow.set_experiment(experiment_id=exp_id)
        try:
            yield exp_id
        finally:
            mlflow.set_tracking_uri("")


def use_store(monkeypatch, root: Path) -> None:
    """Point this test at a module's store again (a per-test ``store`` before it moved mlflow away)."""
    import mlflow

    uri = f"sqlite:///{root / 'mlruns' / 'mlflow.db'}"
    monkeypatch.chdir(root)
    monkeypatch.setenv("RAG_EXP_HOME", str(root))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
