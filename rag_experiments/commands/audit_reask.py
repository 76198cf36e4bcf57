"""``rag-exp audit-cache``'s live check: re-ask a sample of a past run's cases of the system it
measured (rebuilt from the run's ``config.yaml``) and compare the placed answers with the ranked
lists the run logged (``run.trec``). A run whose logged lists differ was scored on answers that
are not the system's answers today: cached ones from before a change no cache key held (a data
file, an environment variable, a service behind the same URL), another configuration's, or
those of a non-deterministic system.

A run that cannot be re-asked is *not checked*, with why: its config or run file missing, its
golden set or corpus gone or changed, its target no longer importable, its service unreachable.
Nothing is read from or written to the answer cache (the connection is None), so the check sees
the system, not the cache.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import yaml

from ..errors import UserError
from ..evaluation.runfile import ARTIFACT as RUN_FILE
from ..evaluation.runfile import docno, parse_run_file
from ..experiment import collapse_to_documents, load_checked_golden
from ..retrieval.answer_check import sample_size
from ..retrieval.external import ExternalRetriever
from ..retrieval.systems import BuildInputs, build_system
from ..serving.retriever import settings_from_dict
from ..tracking.runs import CONFIG_ARTIFACT, artifact_bytes


@dataclass(frozen=True)
class Reask:
    """One run's live check: ``status`` differs | same | not checked; ``detail`` says what was seen."""

    run_id: str
    run_name: str
    status: str
    detail: str
    asked: int = 0
    differing: int = 0


def _first_difference(logged: list[str], live: list[str]) -> int | None:
    for rank, (a, b) in enumerate(zip(logged, live), start=1):
        if a != b:
            return rank
    return None if len(logged) == len(live) else min(len(logged), len(live)) + 1


def reask_run(c: Any, run: Any, verify: int = 10, share: float = 0.05, seed: int = 0) -> Reask:
    """Re-ask ``max(verify, share x cases)`` of the run's cases (seeded) and compare with its run file."""
    run_id, name = run.info.run_id, run.data.tags.get("mlflow.runName", "")

    def not_checked(why: str) -> Reask:
        return Reask(run_id, name, "not checked", why)

    config_text = artifact_bytes(run_id, CONFIG_ARTIFACT, c, run.info.artifact_uri)
    run_file = artifact_bytes(run_id, RUN_FILE, c, run.info.artifact_uri)
    if config_text is None or run_file is None:
        return not_checked(f"the run logged no {CONFIG_ARTIFACT if config_text is None else RUN_FILE}")
    try:
        settings = settings_from_dict(yaml.safe_load(config_text) or {})
        logged = parse_run_file(run_file.decode("utf-8"))
        golden, docs = load_checked_golden(settings)  # append-only: the run's cases are still there
        cases = [cs for cs in golden.scorable if cs.case_id in logged]
        if not cases:
            return not_checked("none of its logged cases is in the golden set today")
        system = build_system(BuildInputs(settings, None, docs,
                                          queries_by_case={cs.case_id: cs.query for cs in golden.scorable}))
        if not isinstance(system, ExternalRetriever):
            return not_checked(f"retrieval.variant={settings.retrieval.variant} is not a team's system")
        n = sample_size(len(cases), verify, share)
        sample = sorted(random.Random(seed).sample(range(len(cases)), n))
        lengths = {d.doc_id: len(d.text) for d in docs}
        differing: list[tuple[str, int]] = []
        for i in sample:
            case = cases[i]
            live = system.search_many([case.query], settings.eval.depth_needed)[0]
            if settings.eval.level == "document":
                live = collapse_to_documents(live, {**{h.doc_id: 0 for h in live.hits}, **lengths})
            rank = _first_difference([docno(h) for h in logged[case.case_id].hits], [docno(h) for h in live.hits])
            if rank is not None:
                differing.append((case.case_id, rank))
    except UserError as exc:  # a config, golden set, target or service that is not there any more
        return not_checked(f"cannot re-ask the system: {exc.message}")
    if differing:
        case_id, rank = differing[0]
        return Reask(run_id, name, "differs", f"re-asked {n} case(s) live, {len(differing)} differ from the logged "
                     f"run.trec (case {case_id}: first differing rank {rank})", n, len(differing))
    return Reask(run_id, name, "same", f"re-asked {n} case(s) live: the same as the logged run.trec", n)
