"""Connecting to a Ray cluster (the Ray launcher, and the ingest's Ray executor).

The check before a sweep that every node can reach the database and the tracking server lives
with the launcher (hydra_plugins/rag_experiments_launchers/_ray_preflight.py): it asks the
tracking layer, which sits above this one.
"""

from __future__ import annotations

import socket

from ..errors import UserError

CONNECT_TIMEOUT_S = 5


def connect(init: dict) -> None:
    """``ray.init`` with the launcher's ``init`` options (address ``None``: a local Ray)."""
    import ray

    if ray.is_initialized():
        return
    address = init.get("address")
    if address and address not in ("auto", "local"):
        _check_reachable(str(address))
    try:
        ray.init(**{"log_to_driver": True, **init, "logging_level": "warning"})
    except (ConnectionError, RuntimeError, TimeoutError) as exc:
        raise UserError(f"cannot connect to the Ray cluster at {address or 'auto'}: {str(exc).splitlines()[0]}",
                        hint="start it with `ray start --head`, or set RAY_ADDRESS / "
                        "hydra.launcher.ray.init.address") from None


def _check_reachable(address: str) -> None:
    """Fail in seconds, not after Ray's own minute of retries, when nothing listens there."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot connect to the Ray cluster at {address}: {exc}",
                        hint="start it with `ray start --head --port=PORT`, or fix RAY_ADDRESS / "
                        "hydra.launcher.ray.init.address") from None
