"""The append-only golden-set file: hash chain, manifest, and the only code that writes it.

* Every line carries ``prev`` = sha256 of the previous line's bytes, so editing, inserting or
  deleting any line breaks the chain at a line number we report.
* ``<name>.manifest.json`` beside it records the number of lines and the hash of the last one,
  so a truncated file, or an edit to the last line, is reported too. The manifest is derived
  (rewritten after each append); the JSONL is the record.
* The golden-set version is the sha256 of the JSONL file's bytes. Every run logs it.
* :meth:`GoldenFile.append` is the only writer: it refuses a record whose id already exists
  (changing a label is a new ``judgement`` with ``supersedes`` and a reason, never an edit).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import Iterable

from ..errors import GoldenSetError
from .records import canonical, line_hash, now_iso, validate


class GoldenFile:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.manifest_path = self.path.with_name(self.path.name.removesuffix(".jsonl") + ".manifest.json")

    # -- reading --------------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.path.exists()

    def digest(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest() if self.path.exists() else hashlib.sha256(b"").hexdigest()

    def read(self) -> list[dict]:
        """All records, after checking the chain and the manifest (GoldenSetError names the line)."""
        if not self.path.exists():
            raise GoldenSetError(
                f"golden set {self.path} does not exist",
                hint="generate one (rag-exp golden generate), or point golden.path at an existing file",
            )
        records, last_hash, n = self._read_chain()
        self._check_manifest(n, last_hash)
        return records

    def _read_chain(self) -> tuple[list[dict], str, int]:
        raw = self.path.read_bytes()
        if raw and not raw.endswith(b"\n"):
            n = raw.count(b"\n") + 1
            raise GoldenSetError(f"{self.path}:{n}: last line is incomplete (no newline): the file was truncated "
                                 "or hand-edited", hint="restore it from git (git checkout -- FILE)")
        records: list[dict] = []
        prev = ""
        seen: set[str] = set()
        for n, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
            where = f"{self.path}:{n}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise GoldenSetError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(rec, dict) or rec.get("prev") != prev:
                raise GoldenSetError(
                    f"{where}: hash chain broken: line {n - 1 if n > 1 else 1} was edited, or a line was "
                    f"inserted or deleted before line {n}",
                    hint="the golden set is append-only; restore it from git and append a superseding record instead",
                )
            validate(rec, where)
            if rec["id"] in seen:
                raise GoldenSetError(f"{where}: duplicate record id {rec['id']!r}")
            seen.add(rec["id"])
            records.append(rec)
            prev = line_hash(line)
        return records, prev, len(records)

    def _check_manifest(self, n: int, last_hash: str) -> None:
        if not self.manifest_path.exists():
            return
        try:
            manifest = json.loads(self.manifest_path.read_text())
            m_n, m_head = int(manifest["records"]), str(manifest["head"])
        except (ValueError, KeyError, TypeError):
            raise GoldenSetError(f"{self.manifest_path}: unreadable manifest",
                                 hint="restore it from git; it is rewritten by every append") from None
        if n < m_n:
            raise GoldenSetError(
                f"{self.path}:{n + 1}: file truncated: the manifest records {m_n} lines, the file has {n}",
                hint="restore the file from git (git checkout -- FILE)",
            )
        if n == m_n and last_hash != m_head:
            raise GoldenSetError(f"{self.path}:{n}: the last line was edited after it was written",
                                 hint="restore the file from git; append a superseding record instead")

    # -- writing --------------------------------------------------------------------------------
    def append(self, new_records: Iterable[dict]) -> list[dict]:
        """Append records (filling ``prev`` and ``created_at``); return them as written."""
        new_records = list(new_records)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name("." + self.path.name + ".lock")
        with open(lock_path, "a+") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            existing = self.read() if self.path.exists() else []
            ids = {r["id"] for r in existing}
            prev = line_hash(self._last_line()) if existing else ""
            written = []
            lines = []
            for i, rec in enumerate(new_records):
                rec = dict(rec)
                rec.setdefault("created_at", now_iso())
                rec["prev"] = prev
                validate(rec, f"new record {i + 1} for {self.path}")
                if rec["id"] in ids:
                    raise GoldenSetError(
                        f"{self.path}: record id {rec['id']!r} already exists; the golden set is append-only",
                        hint="to change a label, append a judgement with 'supersedes' and a 'reason'",
                    )
                ids.add(rec["id"])
                line = canonical(rec)
                lines.append(line)
                prev = line_hash(line)
                written.append(rec)
            if lines:
                with open(self.path, "a", encoding="utf-8") as fh:
                    fh.write("".join(line + "\n" for line in lines))
                    fh.flush()
                    os.fsync(fh.fileno())
            self.write_manifest(existing + written)
        return written

    def _last_line(self) -> str:
        with open(self.path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            block = min(size, 1 << 16)
            while True:
                fh.seek(size - block)
                data = fh.read(block)
                lines = data.rstrip(b"\n").split(b"\n")
                if len(lines) > 1 or block == size:
                    return lines[-1].decode("utf-8")
                block = min(size, block * 2)

    def write_manifest(self, records: list[dict]) -> dict:
        cases = [r for r in records if r["type"] == "case"]
        judgements = [r for r in records if r["type"] == "judgement"]
        manifest = {
            "golden_set": self.path.name,
            "sha256": self.digest(),
            "records": len(records),
            "head": line_hash(self._last_line()) if records else "",
            "cases": len(cases),
            "cases_by_kind": dict(sorted(Counter(r["kind"] for r in cases).items())),
            "cases_by_doc_type": dict(sorted(Counter(r["doc_type"] for r in cases).items())),
            "judgements": len(judgements),
            "judgements_by_verdict": dict(sorted(Counter(r["verdict"] for r in judgements).items())),
            "judgements_by_judge": dict(sorted(Counter(r["judge"]["kind"] for r in judgements).items())),
            "retired": sum(r["type"] == "retire" for r in records),
            "anchors": dict(sorted(Counter(r["status"] for r in records if r["type"] == "anchor").items())),
        }
        tmp = self.manifest_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        tmp.replace(self.manifest_path)
        return manifest
