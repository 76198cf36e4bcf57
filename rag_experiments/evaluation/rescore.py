"""Score stored ranked lists against another golden-set version: an evaluation, not a retrieval.

A run's ranked lists (its ``run.trec`` artifact, :mod:`.runfile`) plus any golden version's
cases and labels give that version's per-case metrics in milliseconds, by the same
:func:`.evaluate.evaluate` every run uses. Which cases: those of ``golden`` named in
``case_ids`` (default: all its scorable cases) that the run has a ranked list for; the ones it
has none for are returned separately (a case stale in the run's version was never retrieved).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Iterable, Mapping

from ..golden.resolve import GoldenSet
from ..types import RankedList
from .evaluate import EvalParams, EvalResult, evaluate


def rescore(golden: GoldenSet, ranked: Mapping[str, RankedList], params: EvalParams = EvalParams(),
            case_ids: Iterable[str] | None = None) -> tuple[EvalResult, tuple[str, ...]]:
    """(the evaluation on the cases both have, the wanted case ids the run has no list for)."""
    wanted = None if case_ids is None else set(case_ids)
    cases = [c for c in golden.scorable if wanted is None or c.case_id in wanted]
    missing = tuple(c.case_id for c in cases if c.case_id not in ranked)
    subset = replace(golden, cases=tuple(c for c in cases if c.case_id in ranked))
    return evaluate(subset, ranked, params), missing


def params_from_flat(params: Mapping[str, str]) -> EvalParams:
    """EvalParams from a run's flattened MLflow params (``eval.ks`` = ``[5, 20]``, ...); defaults
    for what the run did not log."""
    d = EvalParams()
    try:
        ks = tuple(int(k) for k in json.loads(params["eval.ks"])) if "eval.ks" in params else d.ks
    except (ValueError, TypeError):
        ks = d.ks

    def num(key: str, default, cast=int):
        try:
            return cast(params[f"eval.{key}"])
        except (KeyError, ValueError, TypeError):
            return default

    return EvalParams(ks=ks, mrr_k=num("mrr_k", d.mrr_k), ndcg_k=num("ndcg_k", d.ndcg_k),
                      judged_k=num("judged_k", d.judged_k), min_coverage=num("min_coverage", d.min_coverage, float))
