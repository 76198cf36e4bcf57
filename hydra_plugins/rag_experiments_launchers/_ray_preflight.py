"""Before a Ray sweep: can every node reach the database and the tracking server?

A sweep point that cannot reach the database or the tracking server fails only after its
worker has imported everything and started; on a cluster that is a screenful of tracebacks per
node. One small probe task pinned to each node finds the same problem in a second, and says
which node cannot reach what.

Here beside the Ray launcher, its only caller (was in rag_experiments/scale/cluster.py: the scale
layer sits below tracking, whose server check this uses; issue 46 item 3). The leading underscore
keeps Hydra's plugin scan from importing it at every start-up.
"""

from __future__ import annotations

import logging
import os

from rag_experiments.db.connect import redact_url
from rag_experiments.errors import UserError
from rag_experiments.scale.cluster import CONNECT_TIMEOUT_S
from rag_experiments.tracking.server import unreachable_reason

log = logging.getLogger(__name__)


def _probe(env: dict[str, str]) -> dict:
    """Runs on one node: can it reach the database and the tracking server?"""
    import ray

    os.environ.update(env)
    out = {"node": ray.util.get_node_ip_address(), "db": None, "mlflow": None}
    url = env.get("DATABASE_URL")
    if url:
        import psycopg

        try:
            psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S).close()
        except psycopg.Error as exc:
            out["db"] = str(exc).strip().splitlines()[0]
    uri = env.get("MLFLOW_TRACKING_URI", "")
    if uri.startswith(("http://", "https://")):
        out["mlflow"] = unreachable_reason(uri)
    return out


def preflight(env: dict[str, str]) -> list[dict]:
    """One probe per alive node; raise one line for the first thing a node cannot reach."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


    uri = env.get("MLFLOW_TRACKING_URI", "")
    if uri.startswith(("http://", "https://")) and (why := unreachable_reason(uri)):
        raise UserError(f"the MLflow tracking server at {uri} does not answer: {why}",
                        hint="start it (mlflow server ...) or fix MLFLOW_TRACKING_URI")
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    probe = ray.remote(num_cpus=0, max_retries=0)(_probe)
    refs = [probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(env)
            for n in nodes]
    reports = []
    for node, ref in zip(nodes, refs):
        try:
            reports.append(ray.get(ref, timeout=120))
        except ray.exceptions.GetTimeoutError:
            raise UserError(f"Ray node {node.get('NodeManagerAddress', node['NodeID'])} did not answer a 2-minute "
                            "pre-flight probe", hint="check `ray status`") from None
        except (ray.exceptions.TaskUnschedulableError, ray.exceptions.NodeDiedError,
                ray.exceptions.WorkerCrashedError) as exc:
            # Ray lists a node as alive until its health checks time out (~30 s); a node that
            # died in that window cannot run points either, so it is skipped, not fatal.
            log.warning("Ray node %s is listed alive but is gone (%s); the sweep runs on the others",
                        node.get("NodeManagerAddress", node["NodeID"]), type(exc).__name__)
    if not reports:
        raise UserError("no Ray node answered the pre-flight probe: every node listed is gone",
                        hint="check `ray status`; start a node with `ray start --address ...`")
    for r in reports:
        if r["db"]:
            raise UserError(f"node {r['node']} cannot reach the database "
                            f"{redact_url(env.get('DATABASE_URL', ''))}: {r['db']}",
                            hint="DATABASE_URL must name the database as every node sees it (not a Unix "
                            "socket or localhost of the submitting machine)")
        if r["mlflow"]:
            raise UserError(f"node {r['node']} cannot reach the MLflow tracking server {uri}: {r['mlflow']}",
                            hint="MLFLOW_TRACKING_URI must be reachable from every node")
    return reports
