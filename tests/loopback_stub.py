"""The HTTP plumbing every paid-API stand-in shares (tests/golden/anthropic_stub.py,
tests/golden/openai_stub.py, tests/embedding/provider_stub.py): a stdlib ThreadingHTTPServer on
127.0.0.1 (port 0), started and stopped by the test, each GET / POST handed to the subclass's
``_handle(handler, method)``; the wire formats stay in the subclasses."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LoopbackStub:
    server: ThreadingHTTPServer | None = None

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        raise NotImplementedError

    @property
    def root_url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                stub._handle(self, "POST")

            def do_GET(self) -> None:
                stub._handle(self, "GET")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
