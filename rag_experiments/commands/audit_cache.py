"""``rag-exp audit-cache``: the logged runs of a team's own retriever whose answers may have come
from another configuration (issue 49, B1).

Until the answer cache's key held ``retrieval.external.init`` (a class target's constructor
kwargs), two runs of one target that differed only in init shared cached answers: the second run
logged its own init as params and scored the first one's answers. Such runs share the run tag
``strategy`` (the system's cache identity, which then lacked init) and the depth k; among them,
a run that read answers from the cache (``cache.external_cached`` > 0 in its diagnostics.json)
after a run with another init had filled it is listed. ``retrieval=http`` runs are read the same
way with ``retrieval.http.format`` (also missing from the old key). Runs logged since init is in
the key have a strategy of their own per init and are never listed.

    rag-exp audit-cache                      # the store of MLFLOW_TRACKING_URI, else ./mlruns
    rag-exp audit-cache --experiment rag-experiments

Not detectable from a store: answers served after a module the target imports had changed
(the old key held the target file's digest only); rerun such systems with
``retrieval.external.cache=false`` once, or let the new key (which holds every project-local
module's digest) call them again.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from typing import Any

#: the params that decide a system's answers but were missing from the old answer-cache key
CONFIG_PREFIXES = {"external": ("retrieval.external.init.",), "http": ("retrieval.http.format",)}
#: the params whose largest value is the depth k a system is asked for (EvalParams.depth_needed)
DEPTH_PARAMS = ("eval.ks", "eval.mrr_k", "eval.ndcg_k", "eval.judged_k", "eval.curve_k")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "audit-cache", help="list logged runs of an external/http system scored on another init's cached answers",
        description="Read an MLflow store and list the runs of retrieval=external (or http) that may have been "
        "scored on answers cached by another configuration: runs of one system (same strategy tag and depth k) "
        "that differ only in retrieval.external.init (http: retrieval.http.format), where a later run read "
        "answers from the cache. Runs logged since init is part of the cache key are never listed. Exit 1 when "
        "any run is listed.", formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("--experiment", default=None, help="only this MLflow experiment (default: all)")
    p.add_argument("--json", action="store_true", help="print the listed runs as JSON lines")
    p.set_defaults(func=cmd_audit_cache)


@dataclass(frozen=True)
class Suspect:
    run_id: str
    run_name: str
    strategy: str
    config: dict
    cached: int
    calls: int
    filled_by: str  # the first earlier run of the same system with another config
    filled_config: dict


def _depth(params: dict[str, str]) -> int | None:
    values = [int(n) for key in DEPTH_PARAMS for n in re.findall(r"\d+", params.get(key, ""))]
    return max(values) if values else None


def _config(variant: str, params: dict[str, str]) -> dict:
    prefixes = CONFIG_PREFIXES.get(variant, ())
    return {k: v for k, v in sorted(params.items()) if k.startswith(prefixes)}


def _cache_counts(c, run_id: str) -> dict[str, int]:
    from ..tracking.run_record import DIAGNOSTICS_ARTIFACT
    from ..tracking.runs import artifact_bytes

    try:
        raw = artifact_bytes(run_id, DIAGNOSTICS_ARTIFACT, c)
        data = json.loads(raw) if raw is not None else {}
    except Exception:  # noqa: BLE001 - an artifact that cannot be read (deleted, older): unknown
        return {}
    cache = data.get("cache", {}) if isinstance(data, dict) else {}
    return {k: int(v) for k, v in cache.items() if isinstance(v, (int, float))}


def find_suspects(c, experiment_ids: list[str]) -> tuple[list[Suspect], int]:
    """The runs scored on another configuration's cached answers, and how many external runs were read."""
    runs = []
    for exp_id in experiment_ids:
        for variant in CONFIG_PREFIXES:
            token = None
            while True:
                page = c.search_runs([exp_id], f"tags.variant = '{variant}'", max_results=1000, page_token=token,
                                     order_by=["attributes.start_time ASC"])
                runs.extend(page)
                token = page.token
                if not token:
                    break
    groups: dict[tuple, list] = {}
    for r in runs:
        strategy = r.data.tags.get("strategy")
        if not strategy or r.info.status != "FINISHED":
            continue
        groups.setdefault((r.data.tags.get("variant"), strategy, _depth(r.data.params)), []).append(r)
    out: list[Suspect] = []
    for (variant, strategy, _k), members in sorted(groups.items(), key=lambda kv: kv[0][1]):
        configs = [_config(variant, r.data.params) for r in members]
        if len({json.dumps(cfg, sort_keys=True) for cfg in configs}) < 2:
            continue  # one configuration: its cached answers are its own
        members_cfg = sorted(zip(members, configs), key=lambda rc: rc[0].info.start_time or 0)
        for n, (r, cfg) in enumerate(members_cfg):
            earlier = [(e, ecfg) for e, ecfg in members_cfg[:n] if ecfg != cfg]
            if not earlier:
                continue
            counts = _cache_counts(c, r.info.run_id)
            cached = counts.get("external_cached", 0)
            if cached <= 0:
                continue
            first, first_cfg = earlier[0]
            out.append(Suspect(r.info.run_id, r.data.tags.get("mlflow.runName", ""), strategy, cfg, cached,
                               counts.get("external_calls", 0), first.info.run_id, first_cfg))
    return out, len(runs)


def _short(cfg: dict) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in cfg.items()) or "(none)"


def cmd_audit_cache(args: argparse.Namespace) -> int:
    from ..terminal import console
    from ..paths import tracking_uri
    from ..tracking.runs import client, experiment_ids

    c = client()
    suspects, n = find_suspects(c, experiment_ids(c, args.experiment))
    if args.json:
        for s in suspects:
            print(json.dumps(s.__dict__, sort_keys=True))
        return 1 if suspects else 0
    out = console()
    if not suspects:
        out.print(f"{n} external/http run(s) read in {tracking_uri()}: none was scored on another "
                  "configuration's cached answers", markup=False, highlight=False)
        return 0
    out.print(f"{len(suspects)} of {n} external/http run(s) in {tracking_uri()} may have been scored on answers "
              "cached by another configuration (init was not in the answer cache key):", markup=False,
              highlight=False)
    for s in suspects:
        out.print(f"  {s.run_id}  {s.run_name[:60]}  {_short(s.config)}: {s.cached} cached answer(s), {s.calls} "
                  f"call(s), after run {s.filled_by} ({_short(s.filled_config)}) of the same system",
                  markup=False, highlight=False, soft_wrap=True)
    out.print("  rerun each with retrieval.external.cache=false (or on this version, whose key holds init) and "
              "delete or tag the listed runs", markup=False, highlight=False)
    return 1
