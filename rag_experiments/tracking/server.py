"""Is a tracking server there? Asked before a sweep starts, so a server that is down is one
line at once, not minutes of MLflow's HTTP retries followed by a traceback per point."""

from __future__ import annotations

import urllib.request

TIMEOUT_S = 5


def unreachable_reason(uri: str) -> str | None:
    """None when ``uri`` is not an HTTP server or its ``/health`` answers 200, else why not."""
    if not uri.startswith(("http://", "https://")):
        return None
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=TIMEOUT_S) as r:
            return None if r.status == 200 else f"HTTP {r.status}"
    except OSError as exc:
        return str(getattr(exc, "reason", exc))
