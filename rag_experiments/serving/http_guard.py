"""What a client of the served champion may see when its request is wrong (issue 55 probe 8).

MLflow's scoring server answers some bad requests with its own error bodies: a ``text/csv``
request got a 400 whose JSON carried a Python ``stack_trace``, a request it could not use was
quoted back in the message (a 1 MB query, or the whole body), and a 100,000-deep JSON body
raised RecursionError inside the server: a plain-text 500. :class:`GuardedApp` sits in front of
that server (an ASGI wrapper, ``rag-exp serve`` runs it, :mod:`.http_app`):

* only ``application/json`` is accepted (the model takes ``{"inputs": [...], "params": {...}}``);
  anything else is a JSON 415;
* the body is parsed here first: invalid JSON, or JSON nested deeper than Python's parser goes,
  is a JSON 400 naming the position, never the text;
* every error response leaves as JSON ``{"error_code", "message"}``: no ``stack_trace``, the
  message's first line only, without the input MLflow quotes after ``Input:`` or in ``Failed to
  predict data '...'``, and at most :data:`MAX_MESSAGE` characters.

The successful path is untouched: the same body reaches MLflow's app.
"""

from __future__ import annotations

import json
import re
from typing import Any, Awaitable, Callable

MAX_MESSAGE = 300
JSON_TYPE = "application/json"
_ECHO = re.compile(r"^Failed to predict data .*?\nError: ", re.S)  # MLflow quotes the whole input first
# MLflow's parameter check quotes each bad value: ``Invalid parameters found: {'k': MlflowException(...)}``
_BAD_PARAMS = re.compile(r"^Invalid parameters found: \{(.*)", re.S)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


def clean_message(message: str) -> str:
    """An error message without the request it may quote: MLflow's echo cut, first line, bounded."""
    message = _ECHO.sub("", message or "")
    bad = _BAD_PARAMS.match(message)
    if bad:
        names = ", ".join(dict.fromkeys(re.findall(r"'(\w+)': ", bad.group(1)))) or "?"
        message = f"invalid parameter(s): {names}; send \"params\": {{\"k\": 5}} (k: an integer)"
    message = message.split("\nInput:", 1)[0].strip()
    first = (message.splitlines() or ["bad request"])[0].strip()
    return first if len(first) <= MAX_MESSAGE else first[: MAX_MESSAGE - 1] + "…"


def error_body(status: int, raw: bytes) -> bytes:
    """An error response's body as the client gets it: JSON, cleaned (:func:`clean_message`)."""
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, dict):
        code, message = str(parsed.get("error_code") or ""), str(parsed.get("message") or "")
    else:  # MLflow's text/plain 415s, Starlette's "Internal Server Error"
        code, message = "", raw.decode("utf-8", "replace")
    if status >= 500:  # the cause is in the server's log, not for the client
        code, message = code or "INTERNAL_ERROR", "the server could not answer this request; see its log"
    return json.dumps({"error_code": code or ("BAD_REQUEST" if status < 500 else "INTERNAL_ERROR"),
                       "message": clean_message(message)}).encode()


def body_problem(content_type: str, body: bytes) -> tuple[int, str] | None:
    """(status, message) when the request cannot go to the model, else None."""
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime != JSON_TYPE:
        return 415, (f"content type {mime or 'none'!r} is not accepted; send {JSON_TYPE}: "
                     '{"inputs": ["a question"], "params": {"k": 5}}')
    try:
        json.loads(body)
    except RecursionError:
        return 400, "the JSON body is nested too deeply; send {\"inputs\": [\"a question\"], \"params\": {\"k\": 5}}"
    except UnicodeDecodeError as exc:
        return 400, f"the body is not valid UTF-8 (byte {exc.start})"
    except ValueError as exc:
        pos = getattr(exc, "pos", None)
        return 400, f"the body is not valid JSON{f' (at character {pos})' if pos is not None else ''}"
    return None


class GuardedApp:
    """An ASGI app: ``inner`` (MLflow's scoring server) behind the checks above."""

    def __init__(self, inner: Callable) -> None:
        self.inner = inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != "/invocations":
            await self.inner(scope, receive, send)
            return
        body = await _read_body(receive)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        problem = body_problem(headers.get("content-type", ""), body)
        if problem is not None:
            status, message = problem
            await _send_json(send, status, json.dumps({"error_code": "BAD_REQUEST" if status == 400 else
                                                       "UNSUPPORTED_MEDIA_TYPE", "message": message}).encode())
            return
        await self._forward(scope, body, send)

    async def _forward(self, scope: Scope, body: bytes, send: Send) -> None:
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        start: dict = {}
        chunks: list[bytes] = []

        async def capture(message: dict) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                if message["status"] < 400:
                    await send(message)
            elif message["type"] == "http.response.body":
                if start.get("status", 200) < 400:
                    await send(message)
                    return
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    await _send_json(send, start["status"], error_body(start["status"], b"".join(chunks)))
            else:
                await send(message)

        try:
            await self.inner(scope, replay, capture)
        except Exception:  # noqa: BLE001 - the server logs it; the client gets one JSON line
            if start:
                raise  # a response already started: nothing clean can follow
            await _send_json(send, 500, error_body(500, b""))


async def _read_body(receive: Receive) -> bytes:
    parts = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(parts)


async def _send_json(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", JSON_TYPE.encode()), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
