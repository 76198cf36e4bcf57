"""Targets whose answers change with something no cache key holds (issue 55's cache probes), and
targets that break the bounds of a Python target. Each answers like ``external_targets.oracle``
(the evidence at a rank): rank 1 scores recall@5 1.0, rank 7 scores 0.0 and MRR@10 1/7.

* ``from_json``: the rank in a JSON data file ($RAG_EXP_PROBE_JSON);
* ``from_env``: the rank in an environment variable ($RAG_EXP_PROBE_RANK);
* ``from_helper``: the rank in a module loaded with ``importlib.import_module`` by name
  ($RAG_EXP_PROBE_MODULE), which no reading of the target's imports sees;
* ``from_installed``: the rank in a module imported by a plain ``import``, which the test makes
  look installed (its version is what the key holds, and it does not change);
* ``coin``: a non-deterministic system (rank 1 and rank 7 in turn).
"""

from __future__ import annotations

import importlib
import json
import os
import time
from pathlib import Path

from .external_targets import _filler, oracle


def from_json(query: str, k: int) -> list[dict]:
    rank = json.loads(Path(os.environ["RAG_EXP_PROBE_JSON"]).read_text())["rank"]
    return oracle(query, k, rank=rank)


def from_env(query: str, k: int) -> list[dict]:
    return oracle(query, k, rank=int(os.environ["RAG_EXP_PROBE_RANK"]))


def from_helper(query: str, k: int) -> list[dict]:
    helper = importlib.import_module(os.environ["RAG_EXP_PROBE_MODULE"])
    return oracle(query, k, rank=helper.RANK)


def from_installed(query: str, k: int) -> list[dict]:
    import rag_probe_installed  # the test puts it on sys.path, in a folder counted as site-packages

    return oracle(query, k, rank=rag_probe_installed.RANK)


_FLIPS = {"n": 0}


def coin(query: str, k: int) -> list[dict]:
    """Rank 1 and rank 7 in turn: no query is answered the same way twice in a row."""
    _FLIPS["n"] += 1
    return oracle(query, k, rank=1 if _FLIPS["n"] % 2 else 7)


def sleepy(query: str, k: int, slow: str = "", seconds: float = 30.0) -> list[dict]:
    """One query (the one containing ``slow``) takes ``seconds``."""
    if slow and slow in query:
        time.sleep(seconds)
    return oracle(query, k)


def endless(query: str, k: int):
    """A generator that never ends (a system that ignores k)."""
    while True:
        yield _filler(1)[0]


def huge(query: str, k: int) -> list[dict]:
    """One passage of 300,000 characters (a whole file instead of a passage)."""
    return [{"source_uri": _filler(1)[0]["source_uri"], "text": "x" * 300_000}]
