"""Take a case out of evaluation without editing the file: append a ``retire`` record.

The case line stays (the golden set is append-only and its earlier versions stay prefixes of
the chain); :func:`rag_experiments.golden.resolve.resolve` drops retired cases, so every later
run evaluates without it and records the new golden-set sha256.
"""

from __future__ import annotations

import getpass
import os
from pathlib import Path

from ..errors import GoldenSetError, UserError
from .records import Case, Retire, new_id
from .golden_file import GoldenFile


def retire_case(golden_path: str | Path, case_id: str, reason: str, who: str | None = None) -> dict:
    """Append a ``retire`` record for ``case_id``; return it as written."""
    reason = " ".join(reason.split())
    if not reason:
        raise UserError("--reason is empty: say why the case leaves evaluation (kept in the golden set)")
    golden = GoldenFile(golden_path)
    if not golden.exists():
        raise GoldenSetError(f"{golden.path} does not exist")
    records = golden.read_records()
    if case_id not in {r.id for r in records if isinstance(r, Case)}:
        raise GoldenSetError(f"{golden.path}: no case {case_id!r}", hint="case ids are in the per-case table "
                             "(rag-exp compare) or `grep '\"type\":\"case\"' FILE`")
    if any(isinstance(r, Retire) and r.target == case_id for r in records):
        raise GoldenSetError(f"{golden.path}: case {case_id} is already retired")
    who = who or os.environ.get("USER") or getpass.getuser()
    record = {"type": "retire", "id": new_id("r", case_id), "target": case_id, "reason": reason, "who": who}
    written, = golden.append([record])
    return written
