"""A scripted stand-in for the Anthropic API, for tests that drive the real ``anthropic`` SDK.

A stdlib ``ThreadingHTTPServer`` on 127.0.0.1 (port 0) speaking enough of the API:

* ``POST /v1/messages``: a real-shaped ``message`` JSON with ``usage``;
* ``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``,
  ``GET /v1/messages/batches/{id}/results`` (JSONL).

Scripting: ``stub.queue(reply, ...)`` replies to the next ``/v1/messages`` calls in order; after
the queue, ``stub.responder(body) -> reply`` answers (default: ``[]``). A reply is
:func:`text` (200 with a message), :func:`status` (an error status with ``retry-after-ms``) or
:func:`hang` (sleep, then a text reply). Every request is logged in ``stub.log``.
Batches answer with the responder too; they stay ``in_progress`` for ``batch_polls`` polls.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from ..loopback_stub import LoopbackStub

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


@dataclass(frozen=True)
class Reply:
    status: int = 200
    text: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    delay: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()


def text(answer: str | Any, input_tokens: int | None = None, output_tokens: int | None = None,
         delay: float = 0.0) -> Reply:
    """A 200 message whose text is ``answer`` (non-strings are JSON-encoded)."""
    body = answer if isinstance(answer, str) else json.dumps(answer)
    return Reply(200, body, input_tokens, output_tokens, delay)


def status(code: int, retry_after_ms: int = 10) -> Reply:
    return Reply(code, headers=(("retry-after-ms", str(retry_after_ms)),))


def hang(seconds: float, answer: str | Any = "[]") -> Reply:
    r = text(answer)
    return Reply(r.status, r.text, delay=seconds)


def prompt_of(body: dict) -> str:
    """The user message text of a Messages request body."""
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content)


class AnthropicStub(LoopbackStub):
    def __init__(self) -> None:
        self.log: list[dict] = []
        self._queue: deque[Reply] = deque()
        self.responder: Callable[[dict], Reply] = lambda body: text("[]")
        self.batch_polls = 0  # polls answered "in_progress" before a batch ends
        self.batches: dict[str, dict] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None
        self.on_request: Callable[[dict], None] | None = None

    # -- scripting ---------------------------------------------------------------------------
    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def _next_reply(self, body: dict) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return self.responder(body)

    def requests(self, method: str = "POST", path: str = "/v1/messages") -> list[dict]:
        with self._lock:
            return [r for r in self.log if r["method"] == method and r["path"] == path]

    def prompts(self) -> list[str]:
        return [prompt_of(r["body"]) for r in self.requests()]

    # -- server ------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return self.root_url

    # -- protocol ----------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        path = h.path.split("?")[0]
        entry = {"method": method, "path": path, "body": body, "t": time.monotonic(),
                 "has_api_key": bool(h.headers.get("x-api-key") or h.headers.get("authorization"))}
        with self._lock:
            self.log.append(entry)
        if self.on_request:
            self.on_request(entry)
        if method == "POST" and path == "/v1/messages":
            reply = self._next_reply(body)
            if reply.delay:
                time.sleep(reply.delay)
            if reply.status != 200:
                return self._error(h, reply)
            return self._send(h, 200, self._message(body, reply))
        if method == "POST" and path == "/v1/messages/batches":
            return self._send(h, 200, self._create_batch(body))
        parts = path.strip("/").split("/")
        if method == "GET" and parts[:3] == ["v1", "messages", "batches"] and len(parts) >= 4:
            batch = self.batches.get(parts[3])
            if batch is None:
                return self._error(h, Reply(404))
            if len(parts) == 5 and parts[4] == "results":
                lines = "".join(json.dumps(r) + "\n" for r in batch["results"])
                return self._send_raw(h, 200, lines.encode(), "application/binary")
            return self._send(h, 200, self._batch_status(batch))
        return self._error(h, Reply(404))

    def _message(self, body: dict, reply: Reply) -> dict:
        prompt = prompt_of(body)
        system = body.get("system") or ""
        in_tok = reply.input_tokens if reply.input_tokens is not None else max(1, (len(prompt) + len(system)) // 4)
        out_tok = reply.output_tokens if reply.output_tokens is not None else max(1, len(reply.text) // 4)
        return {"id": f"msg_stub{next(self._ids)}", "type": "message", "role": "assistant",
                "model": body.get("model", "stub"), "content": [{"type": "text", "text": reply.text}],
                "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": in_tok, "output_tokens": out_tok}}

    def _create_batch(self, body: dict) -> dict:
        batch_id = f"msgbatch_stub{next(self._ids)}"
        results = []
        for req in body["requests"]:
            reply = self.responder(req["params"])
            if reply.status == 200:
                result = {"type": "succeeded", "message": self._message(req["params"], reply)}
            else:
                result = {"type": "errored", "error": {"type": "error", "error": {
                    "type": ERROR_TYPES.get(reply.status, "api_error"), "message": "stub error"}}}
            results.append({"custom_id": req["custom_id"], "result": result})
        now = datetime.now(timezone.utc)
        batch = {"id": batch_id, "results": results, "polls": 0, "created_at": now.isoformat(),
                 "expires_at": (now + timedelta(days=1)).isoformat(), "n": len(results)}
        with self._lock:
            self.batches[batch_id] = batch
        return self._batch_status(batch, count_poll=False)

    def _batch_status(self, batch: dict, count_poll: bool = True) -> dict:
        if count_poll:
            batch["polls"] += 1
        ended = count_poll and batch["polls"] > self.batch_polls
        n_ok = sum(r["result"]["type"] == "succeeded" for r in batch["results"])
        return {"id": batch["id"], "type": "message_batch",
                "processing_status": "ended" if ended else "in_progress",
                "request_counts": {"processing": 0 if ended else batch["n"], "succeeded": n_ok if ended else 0,
                                   "errored": batch["n"] - n_ok if ended else 0, "canceled": 0, "expired": 0},
                "created_at": batch["created_at"], "expires_at": batch["expires_at"],
                "ended_at": batch["created_at"] if ended else None, "archived_at": None,
                "cancel_initiated_at": None,
                "results_url": f"{self.base_url}/v1/messages/batches/{batch['id']}/results" if ended else None}

    def _error(self, h: BaseHTTPRequestHandler, reply: Reply) -> None:
        body = {"type": "error", "error": {"type": ERROR_TYPES.get(reply.status, "api_error"),
                                           "message": f"stub status {reply.status}"}}
        self._send(h, reply.status, body, dict(reply.headers))

    def _send(self, h: BaseHTTPRequestHandler, code: int, obj: dict, headers: dict | None = None) -> None:
        self._send_raw(h, code, json.dumps(obj).encode(), "application/json", headers)

    @staticmethod
    def _send_raw(h: BaseHTTPRequestHandler, code: int, data: bytes, ctype: str,
                  headers: dict | None = None) -> None:
        try:
            h.send_response(code)
            h.send_header("content-type", ctype)
            h.send_header("content-length", str(len(data)))
            h.send_header("request-id", "req_stub")
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


# -- pytest helpers (import them into a test module to use them) ----------------------------------
TEST_KEY = "sk-ant-test-DO-NOT-PRINT-0123456789"

try:
    import pytest

    @pytest.fixture
    def stub():
        with AnthropicStub() as s:
            yield s
except ImportError:  # pragma: no cover - the stub also runs outside pytest
    pass


def client_for(stub: AnthropicStub, max_retries: int = 3, timeout: float = 5.0) -> Any:
    """A real SDK client pointed at the stub."""
    from rag_experiments import llm

    return llm.make_client(api_key=TEST_KEY, base_url=stub.base_url, max_retries=max_retries, timeout=timeout)
