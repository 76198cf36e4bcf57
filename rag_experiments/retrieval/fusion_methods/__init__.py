"""The fusion methods: one module per method, each defining ``METHOD``, a :class:`FusionMethod`
(after ranx, where every method is one small module over N runs with weights).

Adding a method is one file here: :func:`registry` finds every module of this package that defines
``METHOD``. Validation (``fusion.method``), dispatch (:func:`~rag_experiments.retrieval.fusion.fuse`),
the run-name summary (:func:`~rag_experiments.tracking.retriever_summary.fusion_text`) and the
generated config reference read the registry; nothing else lists the methods.

A method's ``fuse(legs, weights, params, limit)`` gets the legs' ranked lists by name, one weight
per leg, the :class:`~rag_experiments.retrieval.fusion.FusionParams` (for ``depth``, ``rrf_k``,
``norm``) and how many fused hits to build; it returns the fused hits, score = the fused score,
rank = the fused position, ``leg_ranks`` = each leg's rank, ties broken by ``chunk_id`` ascending.
Legs are visited in :func:`leg_order` (``vector, keyword`` first: the SQL twin's summation order).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass
from functools import cache
from typing import Any, Callable, Mapping, Sequence

from ...types import Hit

#: the built-in legs in their fixed summation order (floats equal the SQL twin's bit for bit)
LEG_ORDER = ("vector", "keyword")


def leg_order(legs: Mapping[str, Any]) -> list[str]:
    """The legs of ``legs`` in summation order: :data:`LEG_ORDER`, then any other leg by name, a
    number in it by value (query expansions ``q0, q1, ..., q10``: list order)."""
    return [leg for leg in LEG_ORDER if leg in legs] + sorted((leg for leg in legs if leg not in LEG_ORDER),
                                                              key=_natural)


def _natural(name: str) -> list:
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name)]


def leg_weights(params: Any) -> dict[str, float]:
    """The default per-leg weights: ``fusion.vector_weight`` and ``fusion.keyword_weight``."""
    return params.weights()


def num(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def describe_weights(get: Callable[[str, Any], Any]) -> str:
    """`` weights=2/1`` when a leg weight is not 1, else ``''``."""
    weights = (get("vector_weight", 1.0), get("keyword_weight", 1.0))
    return f" weights={num(weights[0])}/{num(weights[1])}" if any(w not in (1, 1.0, None) for w in weights) else ""


@dataclass(frozen=True)
class FusionMethod:
    name: str  # the value of fusion.method
    summary: str  # one line: how the fused score is made (the config reference shows it)
    fuse: Callable[[Mapping[str, Sequence[Hit]], Mapping[str, float], Any, "int | None"], list[Hit]]
    #: the run-name text from the run's fusion.* config (``get(key, default)``): ``combmnz zscore``
    describe: Callable[[Callable[[str, Any], Any]], str]
    weights: Callable[[Any], dict[str, float]] = leg_weights  # per-leg weights from FusionParams
    score_based: bool = False  # normalises the legs' scores (reads fusion.norm)
    sql: bool = False  # has the one-statement SQL twin (fusion.engine=sql)
    position: int = 100  # order in lists and messages (the default method first)


@cache
def registry() -> dict[str, FusionMethod]:
    """Every ``METHOD`` of this package's modules, by name, in ``position`` then name order."""
    found: list[FusionMethod] = []
    for info in pkgutil.iter_modules(__path__):
        method = getattr(importlib.import_module(f"{__name__}.{info.name}"), "METHOD", None)
        if isinstance(method, FusionMethod):
            found.append(method)
    return {m.name: m for m in sorted(found, key=lambda m: (m.position, m.name))}
