"""The append-only golden-set file: hash chain, manifest, and the only code that writes it.

* Every line carries ``prev`` = sha256 of the previous line's bytes, so editing, inserting or
  deleting any line breaks the chain at a line number we report.
* ``<name>.manifest.json`` beside it records the number of lines and the hash of the last one,
  so a truncated file, or an edit to the last line, is reported too. The manifest is derived
  (rewritten after each append); the JSONL is the record.
* The golden-set version is the sha256 of the JSONL file's bytes. Every run logs it.
* :meth:`GoldenFile.append` is the only writer: it refuses a record whose id already exists
  (changing a label is a new ``judgement`` with ``supersedes`` and a reason, never an edit).
* An instance remembers the file as it last verified or wrote it (device, inode, size, mtime):
  while the file is untouched, the next append checks only that, so a long labelling job's
  appends cost what they add, not the whole file again. Any other change means a full check.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import Iterable

from ..cache_key import file_identity
from ..errors import GoldenSetError
from ..file_lock import file_lock
from ..jsonl import json_line
from .records import Record, canonical, line_hash, new_id, now_iso, parse_record, validate


class _Tally:
    """What an append and the manifest need to know about the records already in the file:
    ids, counts and the last line's hash, kept up to date record by record, and the sha256 of
    the file's bytes, fed by whoever reads or writes them. Its own copies of the fields, so a
    caller changing the records read() returned changes nothing."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.n = 0
        self.head = ""
        self.heads: list[str] = []  # the chain head after each line: the manifest's line is checked by it
        self.beyond_manifest = 0  # lines after the ones the manifest vouches for (a chain continuing them)
        self.sha = hashlib.sha256()
        self.counts: dict[str, Counter] = {k: Counter() for k in (
            "type", "kind", "doc_type", "verdict", "judge", "anchor")}

    def add(self, rec: dict, line: str) -> None:
        self.ids.add(rec["id"])
        self.n += 1
        self.head = line_hash(line)
        self.heads.append(self.head)
        c, t = self.counts, rec["type"]
        c["type"][t] += 1
        if t == "case":
            c["kind"][rec["kind"]] += 1
            c["doc_type"][rec["doc_type"]] += 1
        elif t == "judgement":
            c["verdict"][rec["verdict"]] += 1
            c["judge"][rec["judge"]["kind"]] += 1
        elif t == "anchor":
            c["anchor"][rec["status"]] += 1

    def manifest(self, name: str) -> dict:
        c = self.counts
        return {
            "golden_set": name,
            "sha256": self.sha.hexdigest(),
            "records": self.n,
            "head": self.head,
            "cases": c["type"]["case"],
            "cases_by_kind": dict(sorted(c["kind"].items())),
            "cases_by_doc_type": dict(sorted(c["doc_type"].items())),
            "judgements": c["type"]["judgement"],
            "judgements_by_verdict": dict(sorted(c["verdict"].items())),
            "judgements_by_judge": dict(sorted(c["judge"].items())),
            "retired": c["type"]["retire"],
            "anchors": dict(sorted(c["anchor"].items())),
        }


# path -> (file and manifest identities, records, tally) as last verified in this process: a sweep
# reads the same golden set several times a point; a byte appended or a manifest rewritten
# changes the identity and the chain is verified again in full
_VERIFIED_READS: dict[Path, tuple[tuple, list[Record], _Tally]] = {}


def _file_lock(path: Path, exclusive: bool):
    """The golden set's lock (``.<name>.lock`` beside it): exclusive to append, shared to read.

    A reader without it could read the file before another process's append and the manifest
    after it, and report "file truncated ... restore the file from git" for a file that was only
    growing (8 concurrent ``golden add``: 4 failed so, issue 55). A read-only checkout (no lock
    file can be created) reads unlocked."""
    what = f"another command {'using' if exclusive else 'appending to'} {path}"
    return file_lock(path.with_name("." + path.name + ".lock"), exclusive=exclusive, waiting_for=what,
                     optional=not exclusive)


def _identity_of(path: Path) -> tuple | None:
    try:
        return file_identity(path)
    except FileNotFoundError:
        return None


class GoldenFile:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.manifest_path = self.path.with_name(self.path.name.removesuffix(".jsonl") + ".manifest.json")
        self._verified: tuple[tuple, _Tally] | None = None  # (file identity, tally) as last verified
        self._rebuilding = False  # rebuild_manifest: a missing manifest is what is being fixed

    def _identity(self) -> tuple:
        return file_identity(self.path)

    # -- reading --------------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.path.exists()

    def digest(self) -> str:
        """sha256 of the file's bytes: the golden-set version. Not read again when the file is as
        this instance last verified or wrote it."""
        if not self.path.exists():
            return hashlib.sha256(b"").hexdigest()
        if self._verified is not None and self._verified[0] == self._identity():
            return self._verified[1].sha.hexdigest()
        return hashlib.sha256(self.path.read_bytes()).hexdigest()

    def head(self) -> str:
        """The chain head (sha256 of the last line, "" when empty): with the record count, it names
        the version as a prefix of the chain (see :mod:`.versions`)."""
        return self._current_tally().head

    def beyond_manifest(self) -> int:
        """Lines after the ones the manifest vouches for (verified as a chain continuing them): e.g.
        records appended on another branch and merged, whose manifest was not rewritten."""
        return self._current_tally().beyond_manifest

    def read(self) -> list[dict]:
        """All records as on disk (JSON objects), after checking the chain and the manifest."""
        return [r.raw for r in self.read_records()]

    def read_records(self) -> list[Record]:
        """All records, typed, after checking the chain and the manifest (GoldenSetError names the line)."""
        if not self.path.exists():
            raise GoldenSetError(
                f"golden set {self.path} does not exist",
                hint="generate one (rag-exp golden generate), or point golden.path at an existing file",
            )
        return self._read_verified()[0]

    def _read_verified(self) -> tuple[list[Record], _Tally]:
        identity = self._identity()
        key = (identity, _identity_of(self.manifest_path), self._rebuilding)
        known = _VERIFIED_READS.get(self.path.resolve())
        if known is not None and known[0] == key:
            records, tally = known[1], known[2]
        else:
            with _file_lock(self.path, exclusive=False):  # the file and its manifest of one moment
                identity = self._identity()
                key = (identity, _identity_of(self.manifest_path), self._rebuilding)
                records, tally = self._read_chain()
                self._check_manifest(tally)
            _VERIFIED_READS[self.path.resolve()] = (key, records, tally)
        self._verified = (identity, tally)
        return list(records), tally

    def _current_tally(self) -> _Tally:
        """The tally of the file, re-verified in full unless it is exactly as this instance left it."""
        if not self.path.exists():
            return _Tally()
        if self._verified is not None and self._verified[0] == self._identity():
            return self._verified[1]
        return self._read_verified()[1]

    def _read_chain(self) -> tuple[list[Record], _Tally]:
        raw = self.path.read_bytes()
        if raw and not raw.endswith(b"\n"):
            n = raw.count(b"\n") + 1
            raise GoldenSetError(f"{self.path}:{n}: last line is incomplete (no newline): the file was truncated "
                                 "or hand-edited", hint="restore it from git (git checkout -- FILE)")
        records: list[Record] = []
        tally = _Tally()
        # split on "\n" only: canonical lines keep UTF-8 as is, and str.splitlines() would also
        # split inside a quote holding U+2028, U+0085 and the like
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad_line = raw.count(b"\n", 0, exc.start) + 1
            raise GoldenSetError(f"{self.path}:{bad_line}: not valid UTF-8 "
                                 f"(byte {exc.start}): the file was damaged or hand-edited",
                                 hint="restore it from git (git checkout -- FILE)") from None
        lines = text.split("\n")[:-1] if raw else []
        for n, line in enumerate(lines, start=1):
            where = f"{self.path}:{n}"
            rec = json_line(where, line, GoldenSetError)
            if not isinstance(rec, dict) or rec.get("prev") != tally.head:
                raise GoldenSetError(
                    f"{where}: hash chain broken: line {n - 1 if n > 1 else 1} was edited, or a line was "
                    f"inserted or deleted before line {n}",
                    hint="the golden set is append-only; restore it from git and append a superseding record instead",
                )
            typed = parse_record(rec, where)
            if rec["id"] in tally.ids:
                raise GoldenSetError(f"{where}: duplicate record id {rec['id']!r}")
            tally.add(rec, line)
            records.append(typed)
        tally.sha.update(raw)
        return records, tally

    def _check_manifest(self, tally: _Tally) -> None:
        """The manifest vouches for its first ``records`` lines: the line at that number must still
        hash to the manifest's ``head`` whatever follows it (through the ``prev`` links that pins
        every line before it). Lines beyond it are accepted only as a chain continuing that prefix
        (they are: the chain was verified line by line) and are counted in ``beyond_manifest``."""
        n = tally.n
        if not self.manifest_path.exists():
            if self._rebuilding:
                return
            # Without it a file cut short at a line boundary (the chain still holds) reads as a
            # smaller golden set: every metric changes, nothing says so.
            raise GoldenSetError(
                f"{self.manifest_path}: missing. The manifest is part of the golden set: it records "
                f"how many lines {self.path.name} has, so a truncated file cannot pass as a smaller one",
                hint=f"restore it from git (git checkout -- {self.manifest_path}); only if {self.path.name} "
                f"is exactly as intended, rebuild it: rag-exp golden manifest --golden {self.path} --rebuild "
                "(asks for confirmation at a terminal, or add --yes in a script; the rebuild is recorded in the golden set)",
            )
        try:
            manifest = json.loads(self.manifest_path.read_text())
            m_n, m_head = int(manifest["records"]), str(manifest["head"])
        except (ValueError, KeyError, TypeError):
            raise GoldenSetError(f"{self.manifest_path}: unreadable manifest",
                                 hint="restore it from git; it is rewritten by every append") from None
        if m_n < 0:
            raise GoldenSetError(f"{self.manifest_path}: unreadable manifest (records {m_n})",
                                 hint="restore it from git; it is rewritten by every append")
        if n < m_n:
            raise GoldenSetError(
                f"{self.path}:{n + 1}: file truncated: the manifest records {m_n} lines, the file has {n}",
                hint="restore the file from git (git checkout -- FILE)",
            )
        at = tally.heads[m_n - 1] if m_n else ""
        if at != m_head:
            if n == m_n:
                raise GoldenSetError(f"{self.path}:{n}: the last line was edited after it was written",
                                     hint="restore the file from git; append a superseding record instead")
            raise GoldenSetError(
                f"{self.path}:{m_n}: line {m_n} is not the line the manifest vouches for (it hashes to {at[:12] or '(empty)'}, "
                f"the manifest's head is {m_head[:12] or '(empty)'}): a line at or before {m_n} was edited and the "
                f"chain re-linked, with {n - m_n} line(s) appended after it",
                hint="restore the file from git (git checkout -- FILE); append a superseding record instead of editing")
        tally.beyond_manifest = n - m_n

    # -- writing --------------------------------------------------------------------------------
    def append(self, new_records: Iterable[dict]) -> list[dict]:
        """Append records (filling ``prev`` and ``created_at``); return them as written."""
        new_records = list(new_records)
        with _file_lock(self.path, exclusive=True):
            tally = self._current_tally()
            prepared = []
            ids = set()
            prev = tally.head
            for i, rec in enumerate(new_records):
                rec = dict(rec)
                rec.setdefault("created_at", now_iso())
                rec["prev"] = prev
                validate(rec, f"new record {i + 1} for {self.path}")
                if rec["id"] in tally.ids or rec["id"] in ids:
                    raise GoldenSetError(
                        f"{self.path}: record id {rec['id']!r} already exists; the golden set is append-only",
                        hint="to change a label, append a judgement with 'supersedes' and a 'reason'",
                    )
                ids.add(rec["id"])
                line = canonical(rec)
                prepared.append((rec, line))
                prev = line_hash(line)
            data = "".join(line + "\n" for _, line in prepared).encode("utf-8")
            if data:
                with open(self.path, "ab") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
            tally.sha.update(data)
            for rec, line in prepared:  # only once they are on disk
                tally.add(rec, line)
            self._write_manifest(tally)
            self._verified = (self._identity(), tally) if self.path.exists() else None
            _VERIFIED_READS.pop(self.path.resolve(), None)  # its tally was just extended in place
        return [rec for rec, _ in prepared]

    def rebuild_manifest(self, who: str, reason: str) -> dict:
        """Re-create a missing (or unreadable) manifest from the file as it is now, after a person
        confirmed the file is as intended. Appends a ``manifest`` record first (who, why, and the
        line count and head hash they vouched for), so the rebuild is part of the chain."""
        if self.manifest_path.exists():
            try:
                json.loads(self.manifest_path.read_text())["records"]
            except (ValueError, KeyError, TypeError):
                pass  # unreadable: rebuilding it is the fix
            else:
                raise GoldenSetError(f"{self.manifest_path}: present and readable; nothing to rebuild",
                                     hint="a manifest that disagrees with the file means the file changed: "
                                     "restore the file from git")
        self._rebuilding = True
        try:
            self._verified = None
            records, tally = self._read_chain()
            self._verified = (self._identity(), tally)
            rec = {"type": "manifest", "id": new_id("manifest", tally.n, tally.head, now_iso()), "who": who,
                   "reason": reason, "records": tally.n, "head": tally.head}
            self.append([rec])
        finally:
            self._rebuilding = False
        return json.loads(self.manifest_path.read_text())

    def _write_manifest(self, tally: _Tally) -> dict:
        manifest = tally.manifest(self.path.name)
        tmp = self.manifest_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        tmp.replace(self.manifest_path)
        return manifest
