"""A scripted OpenAI-compatible chat server, for tests that drive the real ``openai`` SDK
(the same shape as :mod:`tests.golden.anthropic_stub`, which speaks Anthropic's wire format).

A stdlib ``ThreadingHTTPServer`` on 127.0.0.1 (port 0) speaking what vLLM / Ollama / a gateway
answer on ``POST /v1/chat/completions``: ``{"id", "object": "chat.completion", "model",
"choices": [{"index": 0, "message": {"role": "assistant", "content"}, "finish_reason"}],
"usage": {"prompt_tokens", "completion_tokens", "total_tokens"}}``; an error is
``{"error": {"message", "type", "code"}}`` with its status and a ``retry-after`` header (seconds).
Clients take :attr:`OpenAIStub.base_url`, which ends in ``/v1`` as a real server's does.

Scripting: ``stub.queue(reply, ...)`` answers the next chat requests in order; after the queue,
``stub.responder(body) -> reply`` answers (default: ``[]``). A reply is :func:`text`,
:func:`status` or :func:`hang`. ``usage=False`` on :func:`text` leaves ``usage`` out (some
servers do). Every request is logged in ``stub.log`` (method, path, body, the Authorization
header it carried).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from ..loopback_stub import LoopbackStub

ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_api_key", 403: "permission_denied",
               404: "model_not_found", 429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}
CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Reply:
    status: int = 200
    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    delay: float = 0.0
    retry_after: float | None = None
    usage: bool = True


def text(answer: str | Any, prompt_tokens: int | None = None, completion_tokens: int | None = None,
         delay: float = 0.0, usage: bool = True) -> Reply:
    """A 200 chat completion whose content is ``answer`` (non-strings are JSON-encoded)."""
    body = answer if isinstance(answer, str) else json.dumps(answer)
    return Reply(200, body, prompt_tokens, completion_tokens, delay, usage=usage)


def status(code: int, retry_after: float = 0.01) -> Reply:
    return Reply(code, retry_after=retry_after)


def hang(seconds: float, answer: str | Any = "[]") -> Reply:
    r = text(answer)
    return Reply(r.status, r.text, delay=seconds)


def prompt_of(body: dict) -> str:
    """The (last) user message of a chat request body."""
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


def system_of(body: dict) -> str | None:
    return next((m["content"] for m in body["messages"] if m["role"] == "system"), None)


class OpenAIStub(LoopbackStub):
    def __init__(self) -> None:
        self.log: list[dict] = []
        self._queue: deque[Reply] = deque()
        self.responder: Callable[[dict], Reply] = lambda body: text("[]")
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

    def requests(self, method: str = "POST", path: str = CHAT_PATH) -> list[dict]:
        with self._lock:
            return [r for r in self.log if r["method"] == method and r["path"] == path]

    def prompts(self) -> list[str]:
        return [prompt_of(r["body"]) for r in self.requests()]

    # -- server ------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """What a user passes as --base-url / llm.base_url (with the /v1 prefix)."""
        return self.root_url + "/v1"

    # -- protocol ----------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        path = h.path.split("?")[0]
        entry = {"method": method, "path": path, "body": body, "t": time.monotonic(),
                 "authorization": h.headers.get("authorization")}
        with self._lock:
            self.log.append(entry)
        if self.on_request:
            self.on_request(entry)
        if method == "POST" and path == CHAT_PATH:
            reply = self._next_reply(body)
            if reply.delay:
                time.sleep(reply.delay)
            if reply.status != 200:
                return self._error(h, reply)
            return self._send(h, 200, self._completion(body, reply))
        return self._error(h, Reply(404))

    def _completion(self, body: dict, reply: Reply) -> dict:
        sent = "".join(str(m.get("content", "")) for m in body["messages"])
        prompt_tokens = reply.prompt_tokens if reply.prompt_tokens is not None else max(1, len(sent) // 4)
        completion_tokens = (reply.completion_tokens if reply.completion_tokens is not None
                             else max(1, len(reply.text) // 4))
        out = {"id": f"chatcmpl-stub{next(self._ids)}", "object": "chat.completion", "created": int(time.time()),
               "model": body.get("model", "stub"),
               "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text},
                            "finish_reason": "stop", "logprobs": None}]}
        if reply.usage:
            out["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens}
        return out

    def _error(self, h: BaseHTTPRequestHandler, reply: Reply) -> None:
        body = {"error": {"message": f"stub status {reply.status}", "type": ERROR_TYPES.get(reply.status, "error"),
                          "param": None, "code": ERROR_TYPES.get(reply.status)}}
        headers = {"retry-after": str(reply.retry_after)} if reply.retry_after is not None else {}
        self._send(h, reply.status, body, headers)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, code: int, obj: dict, headers: dict | None = None) -> None:
        data = json.dumps(obj).encode()
        try:
            h.send_response(code)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(data)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


# -- pytest helpers (import them into a test module to use them) ----------------------------------
TEST_KEY = "sk-openai-test-DO-NOT-PRINT-7777"

try:
    import pytest

    @pytest.fixture
    def ostub():
        with OpenAIStub() as s:
            yield s
except ImportError:  # pragma: no cover - the stub also runs outside pytest
    pass


def client_for(stub: OpenAIStub, max_retries: int = 3, timeout: float = 5.0, api_key: str | None = TEST_KEY) -> Any:
    """A real ``openai`` SDK client pointed at the stub (through rag_experiments.llm)."""
    from rag_experiments import llm

    return llm.make_client(api_key=api_key, base_url=stub.base_url, max_retries=max_retries, timeout=timeout,
                           provider="openai")
