"""Where a run executed: the sweep job it was and, on a Ray cluster, the node that ran it."""

from __future__ import annotations

import socket
import sys


def execution_tags() -> dict[str, str]:
    tags = {"host": socket.gethostname()}
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
        if hc.mode == RunMode.MULTIRUN:
            tags["sweep.job_num"] = str(hc.job.num)
    except Exception:  # noqa: BLE001 - not under Hydra (tests, the Python API)
        pass
    if "ray" in sys.modules:  # only when something already uses Ray: never import it for this
        import ray

        if ray.is_initialized():
            tags["ray.node_id"] = ray.get_runtime_context().get_node_id()
            tags["ray.node_ip"] = ray.util.get_node_ip_address()
    return tags
