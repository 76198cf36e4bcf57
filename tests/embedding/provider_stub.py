"""Scripted stand-ins for the Voyage, OpenAI and Cohere APIs, for tests that drive the real
``voyageai``, ``openai`` and ``cohere`` SDKs (model: tests/golden/anthropic_stub.py).

One stdlib ``ThreadingHTTPServer`` on 127.0.0.1 (port 0); the path prefix picks the wire format:

* ``POST /voyage/v1/embeddings``: ``{"object": "list", "data": [{"embedding", "index"}], "usage":
  {"total_tokens"}}``, embeddings base64 float32 when the SDK asks (it does by default);
* ``POST /voyage/v1/rerank``: ``{"data": [{"index", "relevance_score"}], "usage": {"total_tokens"}}``
  sorted by score;
* ``POST /openai/v1/embeddings``: OpenAI's ``CreateEmbeddingResponse`` (base64 or float);
* ``POST /cohere/v2/rerank``: ``{"id", "results": [{"index", "relevance_score"}], "meta":
  {"billed_units": {"search_units": 1}}}``.

The "models" are deterministic: a vector is the signed feature hash of the text's lower-cased
words into ``dim`` dimensions, seeded by the model name (so two model names give two different
embedding spaces that still retrieve sensibly); a rerank score is the share of query words in
the document, damped by its length. ``dims`` maps a model name to its native dimension (default 32); a request's
``output_dimension`` / ``dimensions`` wins. Tokens billed = whitespace-separated words.

Scripting: ``stub.queue(reply, ...)`` answers the next requests (any route) in order: :func:`status`
(an error with ``retry-after``), :func:`malformed` (200 with a body that is not JSON),
:func:`wrong_dim` (vectors of another size). ``stub.on_request(entry)`` runs before each answer
(a test kills its client there). Every request is logged in ``stub.log`` with the texts it sent.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

import numpy as np

from ..loopback_stub import LoopbackStub

TEST_KEYS = {"VOYAGE_API_KEY": "pa-voyage-test-DO-NOT-PRINT-0123",
             "OPENAI_API_KEY": "sk-openai-test-DO-NOT-PRINT-4567",
             "CO_API_KEY": "co-cohere-test-DO-NOT-PRINT-89ab"}
_WORD = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes | None = None  # raw body instead of the well-formed answer
    dim: int | None = None  # answer with vectors of this size
    retry_after: float | None = None


def status(code: int, retry_after: float = 0.01) -> Reply:
    return Reply(code, retry_after=retry_after)


def malformed() -> Reply:
    return Reply(200, body=b'{"object": "list", "data": [{"embedding": [0.1, ')


def wrong_dim(dim: int) -> Reply:
    return Reply(200, dim=dim)


def fake_vector(model: str, text: str, dim: int) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    for w in _WORD.findall(text.lower()):
        h = hashlib.blake2b(f"{model}\x00{w}".encode(), digest_size=8).digest()
        v[int.from_bytes(h[:4], "little") % dim] += 1.0 if h[4] & 1 else -1.0
    if not v.any():
        v[0] = 1.0
    return v / np.linalg.norm(v)


def overlap_score(query: str, doc: str) -> float:
    q = set(_WORD.findall(query.lower()))
    d = set(_WORD.findall(doc.lower()))
    return round(len(q & d) / max(1, len(q)) / (1 + len(d)) ** 0.5, 6)


class ProviderStub(LoopbackStub):
    def __init__(self, dims: dict[str, int] | None = None, default_dim: int = 32) -> None:
        self.dims = dict(dims or {})
        self.default_dim = default_dim
        self.log: list[dict] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.server: ThreadingHTTPServer | None = None
        self.on_request: Callable[[dict], None] | None = None

    # -- scripting ---------------------------------------------------------------------------------
    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def requests(self, route: str | None = None) -> list[dict]:
        with self._lock:
            return [r for r in self.log if route is None or r["route"] == route]

    def texts_sent(self, route: str = "voyage/embeddings") -> list[str]:
        return [t for r in self.requests(route) for t in r["texts"]]

    def url(self, provider: str) -> str:
        """The base_url to give the SDK for ``provider`` (voyage | openai | cohere)."""
        return f"{self.root_url}/{provider}" + ("/v1" if provider in ("voyage", "openai") else "")

    # -- protocol ----------------------------------------------------------------------------------
    _ROUTES = {"/voyage/v1/embeddings": "voyage/embeddings", "/voyage/v1/rerank": "voyage/rerank",
               "/openai/v1/embeddings": "openai/embeddings", "/cohere/v2/rerank": "cohere/rerank"}

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:  # POST only
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else {}
        route = self._ROUTES.get(h.path.split("?")[0])
        texts = body.get("input") or body.get("documents") or []
        entry = {"route": route, "path": h.path, "body": body, "texts": list(texts) if isinstance(texts, list) else [texts],
                 "auth": h.headers.get("authorization") or h.headers.get("x-api-key") or ""}
        with self._lock:
            self.log.append(entry)
        if self.on_request:
            self.on_request(entry)
        if route is None:
            return self._send(h, 404, {"detail": f"no route {h.path}"})
        with self._lock:
            reply = self._queue.popleft() if self._queue else Reply()
        if reply.status != 200:
            headers = {"retry-after": str(reply.retry_after)} if reply.retry_after is not None else {}
            return self._send(h, reply.status, self._error(route, reply.status), headers)
        if reply.body is not None:
            return self._send_raw(h, 200, reply.body)
        if route.endswith("embeddings"):
            return self._send(h, 200, self._embeddings(route, body, reply))
        return self._send(h, 200, self._rerank(route, body))

    def _embeddings(self, route: str, body: dict, reply: Reply) -> dict:
        model = body.get("model", "stub")
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dim = reply.dim or body.get("output_dimension") or body.get("dimensions") or self.dims.get(model, self.default_dim)
        b64 = body.get("encoding_format") == "base64"
        data = []
        for i, t in enumerate(texts):
            v = fake_vector(model, t, dim)
            emb = base64.b64encode(v.astype("<f4").tobytes()).decode() if b64 else [float(x) for x in v]
            data.append({"object": "embedding", "embedding": emb, "index": i})
        tokens = sum(len(t.split()) for t in texts)
        if route.startswith("voyage"):
            return {"object": "list", "data": data, "model": model, "usage": {"total_tokens": tokens}}
        return {"object": "list", "data": data, "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def _rerank(self, route: str, body: dict) -> dict:
        docs, query = body["documents"], body["query"]
        scored = sorted(((i, overlap_score(query, d)) for i, d in enumerate(docs)), key=lambda p: -p[1])
        if route.startswith("voyage"):
            tokens = len(query.split()) * len(docs) + sum(len(d.split()) for d in docs)
            return {"object": "list", "model": body.get("model"),
                    "data": [{"index": i, "relevance_score": s} for i, s in scored], "usage": {"total_tokens": tokens}}
        return {"id": f"rerank-{next(self._ids)}", "results": [{"index": i, "relevance_score": s} for i, s in scored],
                "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}}

    @staticmethod
    def _error(route: str, code: int) -> dict:
        if route.startswith("openai"):
            return {"error": {"message": f"stub status {code}", "type": "rate_limit_error" if code == 429 else "api_error",
                              "code": None, "param": None}}
        if route.startswith("cohere"):
            return {"message": f"stub status {code}"}
        return {"detail": f"stub status {code}"}

    def _send(self, h: BaseHTTPRequestHandler, code: int, obj: dict, headers: dict | None = None) -> None:
        self._send_raw(h, code, json.dumps(obj).encode(), headers)

    @staticmethod
    def _send_raw(h: BaseHTTPRequestHandler, code: int, data: bytes, headers: dict | None = None) -> None:
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


if __name__ == "__main__":  # serve until killed: python tests/embedding/provider_stub.py [dims json]
    import sys
    import time

    stub = ProviderStub(json.loads(sys.argv[1]) if len(sys.argv) > 1 else None).start()
    print(stub.url("voyage"), stub.url("openai"), stub.url("cohere"), flush=True)
    while True:
        time.sleep(3600)
