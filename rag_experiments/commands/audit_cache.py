"""``rag-exp audit-cache``: the logged runs of a team's own retriever whose answers are not the
system's own, found two ways:

* re-asked (issue 55): each finished ``retrieval=external``/``http`` run's system is rebuilt from
  its ``config.yaml`` and a seeded sample of its cases asked live (no answer cache); a run whose
  logged ``run.trec`` differs from the live answers is listed with the case and the first
  differing rank (:mod:`.audit_reask`). A run that cannot be re-asked (target not importable,
  service unreachable, golden set or corpus gone) is listed as *not checked*, with why;
* by the old key (issue 49, B1), below.

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

What the re-ask cannot tell: a system that changed since the run *and* was right then (its
logged answers were its answers, they differ from today's): the line says the logged lists differ
from today's answers, which is what it knows.
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
        "audit-cache", help="re-ask past external/http runs' systems and list the runs whose logged answers differ",
        description="Read an MLflow store; for each finished run of retrieval=external (or http), rebuild its "
        "system from the run's config.yaml, ask a seeded sample of its cases live and compare with the ranked "
        "lists the run logged (run.trec): a run that differs is listed with the case and the first differing "
        "rank; a run that cannot be re-asked is listed as not checked, with why. Also listed: runs of one system "
        "that differ only in retrieval.external.init (http: retrieval.http.format) where a later run read answers "
        "cached under the old key, which lacked init. Exit 1 when any run is listed as differing.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 3)[3])
    p.add_argument("--experiment", default=None, help="only this MLflow experiment (default: all)")
    p.add_argument("--json", action="store_true", help="print the listed runs as JSON lines")
    p.add_argument("--sample", type=int, default=10, metavar="N",
                   help="cases re-asked per run: max(N, 5%% of its cases) (default 10; 0: do not re-ask)")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
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


def external_runs(c, experiment_ids: list[str]) -> list:
    """Every run of an external or http system, oldest first."""
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
    return runs


def find_suspects(c, runs: list) -> list[Suspect]:
    """The runs scored on another configuration's cached answers under the old key (no init)."""
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
    return out


def _short(cfg: dict) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in cfg.items()) or "(none)"


def cmd_audit_cache(args: argparse.Namespace) -> int:
    from ..paths import tracking_uri
    from ..terminal import console
    from ..tracking.runs import client, experiment_ids
    from .audit_reask import Reask, reask_run

    c = client()
    runs = external_runs(c, experiment_ids(c, args.experiment))
    suspects = find_suspects(c, runs)
    finished = [r for r in runs if r.info.status == "FINISHED"]
    if args.sample > 0:
        checks = [reask_run(c, r, args.sample, 0.05, args.seed) for r in finished]
    else:
        checks = [Reask(r.info.run_id, r.data.tags.get("mlflow.runName", ""), "not checked", "--sample 0")
                  for r in finished]
    differs = [k for k in checks if k.status == "differs"]
    unchecked = [k for k in checks if k.status == "not checked"]
    if args.json:
        for s in suspects:
            print(json.dumps({"how": "old cache key (init not in it)", **s.__dict__}, sort_keys=True))
        for k in checks:
            print(json.dumps({"how": "re-asked", **k.__dict__}, sort_keys=True))
        return 1 if suspects or differs else 0
    out = console()

    def say(text: str) -> None:
        out.print(text, markup=False, highlight=False, soft_wrap=True)

    say(f"{len(runs)} external/http run(s) read in {tracking_uri()}: {len(checks) - len(unchecked)} re-asked live "
        f"({args.sample} case(s) or 5% a run, seed {args.seed}), {len(unchecked)} not checked")
    for k in differs:
        say(f"  DIFFERS      {k.run_id}  {k.run_name[:60]}: {k.detail}")
    for k in unchecked:
        say(f"  NOT CHECKED  {k.run_id}  {k.run_name[:60]}: {k.detail}")
    if suspects:
        say(f"{len(suspects)} run(s) may have been scored on answers cached by another configuration (init was not "
            "in the answer cache key):")
        for s in suspects:
            say(f"  {s.run_id}  {s.run_name[:60]}  {_short(s.config)}: {s.cached} cached answer(s), {s.calls} "
                f"call(s), after run {s.filled_by} ({_short(s.filled_config)}) of the same system")
    if differs or suspects:
        say("  their metrics are not the system's: rerun each (a run re-asks a sample and refreshes a stale cache; "
            "retrieval.external.cache=false asks everything live) and delete or tag the listed runs")
        return 1
    if unchecked:
        say(f"no re-asked run differs from its system's live answers; the {len(unchecked)} not checked are unknown")
    else:
        say("every run re-asked gives the ranked lists it logged")
    return 0
