"""The Anthropic API unreachable (a closed 127.0.0.1 port, the real SDK): one clear line, at once."""

from __future__ import annotations

import socket
import sys
import time
import types

import pytest

from rag_experiments import cli

from .test_label import golden, hit  # noqa: F401 - the fixture


@pytest.fixture
def closed_port_url() -> str:
    """A base URL nothing listens on (bound, then closed: connection refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def test_label_with_the_api_unreachable_is_one_line(golden, monkeypatch, capsys, closed_port_url):  # noqa: F811
    path, _, _ = golden

    class Session:
        def search(self, query, k):
            return [hit(300, 400), hit(1200, 1300)][:k]

        def close(self):
            pass

    monkeypatch.setitem(sys.modules, "rag_experiments.session",
                        types.SimpleNamespace(open_retriever=lambda overrides=None: Session()))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", closed_port_url)
    t0 = time.perf_counter()
    rc = cli.main(["golden", "label", "--golden", str(path), "-k", "2", "--yes", "--max-retries", "1"])
    captured = capsys.readouterr()
    assert rc == 2, captured
    (line,) = [ln for ln in captured.err.splitlines() if ln.startswith("error:")]
    assert "unreachable" in line and "127.0.0.1" in line and "sk-test" not in captured.err + captured.out
    assert "Traceback" not in captured.err
    assert time.perf_counter() - t0 < 30
