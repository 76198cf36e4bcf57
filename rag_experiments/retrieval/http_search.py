"""``retrieval=http``: a team's search service asked over HTTP, bounded in time and size (the
callable a :class:`~.external.System` wraps)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ..errors import ConfigError
from .external_params import HttpParams
from .passages import ExternalResultError


class HttpSearch:
    """POST ``{"query", "k", "params"}`` to the URL; retries connection errors, timeouts, 429 and
    5xx with exponential backoff; any other failure is one line naming the URL.

    Every answer is bounded in time and size: one query (its attempts, their backoff and the
    reading of each body) ends within ``deadline_s``; a body is read streamed and refused past
    ``max_response_bytes`` (counted after content decoding, so a compressed bomb stops there
    too); a passage's text longer than ``max_passage_chars`` is refused when the answer is read."""

    RETRY_STATUS = frozenset((429, 500, 502, 503, 504))

    def __init__(self, p: HttpParams) -> None:
        import httpx

        if not p.url:
            raise ConfigError("retrieval.http.url: not set",
                              hint="retrieval=http retrieval.http.url=http://host/search")
        headers = {}
        if p.auth_env:
            value = os.environ.get(p.auth_env)
            if not value:
                raise ConfigError(f"retrieval.http.auth_env: ${p.auth_env} is not set",
                                  hint=f"export {p.auth_env}=... (its value is sent as the {p.auth_header} header "
                                  "and never logged)")
            headers[p.auth_header] = value
        self.p = p
        self.client = httpx.Client(timeout=p.timeout_s, headers=headers,
                                   limits=httpx.Limits(max_connections=p.concurrency))

    def _past_deadline(self, attempts: int) -> ExternalResultError:
        p = self.p
        return ExternalResultError(f"POST {p.url}: no answer within the query's deadline of {p.deadline_s:g} s "
                                   f"({attempts} attempt(s))",
                                   hint="is the service up and fast enough? retrieval.http.deadline_s / .timeout_s / "
                                   ".retries")

    def _post(self, body: dict, deadline: float, attempts: int) -> tuple[int, bytes]:
        """One attempt: the status and the body, read streamed within the size bound and the deadline."""
        import httpx

        p = self.p
        left = deadline - time.monotonic()
        if left <= 0:
            raise self._past_deadline(attempts)
        with self.client.stream("POST", p.url, json=body, timeout=httpx.Timeout(min(p.timeout_s, left))) as r:
            length = r.headers.get("content-length", "")
            if length.isdigit() and int(length) > p.max_response_bytes:
                raise ExternalResultError(f"POST {p.url}: the answer is {int(length):,} bytes (HTTP {r.status_code}), "
                                          f"more than retrieval.http.max_response_bytes={p.max_response_bytes:,}",
                                          hint="ask for fewer or shorter passages, or raise "
                                          "retrieval.http.max_response_bytes")
            timeouts = r.request.extensions.get("timeout")
            size, chunks = 0, []
            stream = r.iter_bytes()
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._past_deadline(attempts)
                if isinstance(timeouts, dict):  # each read waits at most until the deadline
                    timeouts["read"] = min(p.timeout_s, left)
                chunk = next(stream, None)
                if chunk is None:
                    break
                size += len(chunk)
                if size > p.max_response_bytes:
                    raise ExternalResultError(f"POST {p.url}: the answer exceeds retrieval.http.max_response_bytes="
                                              f"{p.max_response_bytes:,} bytes (HTTP {r.status_code}; reading stopped "
                                              "there)", hint="ask for fewer or shorter passages, or raise "
                                              "retrieval.http.max_response_bytes")
                chunks.append(chunk)
            return r.status_code, b"".join(chunks)

    def __call__(self, query: str, k: int, **params: Any) -> Any:
        import httpx

        p = self.p
        deadline = time.monotonic() + p.deadline_s
        wait = p.backoff_s
        body = ({"inputs": [query], "params": {"k": k, **params}} if p.format == "mlflow"
                else {"query": query, "k": k, "params": params})
        for attempt in range(p.retries + 1):
            last = attempt == p.retries
            try:
                status, data = self._post(body, deadline, attempt + 1)
            except httpx.TransportError as exc:  # connection refused, timeout, reset
                if time.monotonic() >= deadline:
                    raise self._past_deadline(attempt + 1) from None
                if last:
                    raise ExternalResultError(f"POST {p.url}: {type(exc).__name__} after {p.retries + 1} attempt(s)"
                                              f" ({(str(exc).splitlines() or [''])[0]})",
                                              hint="is the service running? retrieval.http.timeout_s / "
                                              ".retries") from None
            else:
                text = data[:200].decode("utf-8", "replace")
                if status < 300:
                    try:
                        answer = json.loads(data)
                    except (ValueError, RecursionError):
                        raise ExternalResultError(f"POST {p.url}: the answer is not JSON "
                                                  f"(HTTP {status}, {text[:80]!r})") from None
                    if p.format == "mlflow" and isinstance(answer, dict) and "predictions" in answer:
                        return answer["predictions"]  # one row a hit: source_uri, start, end, text, score
                    return answer
                if status not in self.RETRY_STATUS or last:
                    raise ExternalResultError(f"POST {p.url}: HTTP {status} ({text[:120].strip()!r})")
            pause = min(wait, deadline - time.monotonic())
            if pause <= 0 and wait > 0:
                raise self._past_deadline(attempt + 1)
            time.sleep(max(pause, 0))
            wait *= 2
        raise AssertionError("unreachable")
