"""Golden-set versions as prefixes of the append-only chain.

A version is what a run records about the golden file it was scored against (MLflow tags
``golden_sha256``, ``golden_records``, ``golden_head``):

* ``sha256``  the sha256 of the file's bytes (the historical version id);
* ``records`` the number of lines (records) the file had;
* ``head``    the chain head: the sha256 of the last line (``""`` for an empty file).

Because the file only grows and every line carries the hash of the line before it, every
earlier version of a golden file is a prefix of the current one. :func:`locate` finds the
recorded version inside the current file: the line at ``records`` must hash to ``head`` (which,
through the ``prev`` links, pins every line before it) and the bytes up to it must have the
recorded sha256. Anything else means the recorded version is **not an ancestor** of the
current file (another golden set, or a rewritten history), and :class:`NotAnAncestor` says
which check failed, naming the file and the line. Runs logged before ``golden_records`` existed
carry only the sha256: the prefix is then found by hashing the file line by line.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..errors import GoldenSetError
from .records import Record, line_hash
from .resolve import GoldenSet, resolve
from .golden_file import GoldenFile

TAG_SHA = "golden_sha256"
TAG_RECORDS = "golden_records"
TAG_HEAD = "golden_head"
#: a run's artifact: the hash of each line of the golden version it was scored on (one per line),
#: so a later file that is not a continuation can be told where it first differs
LINES_ARTIFACT = "golden_lines.txt"
LINE_HASH_CHARS = 16  # 64 bits per line: 870 lines are 15 KB, and a collision is not a concern


class NotAnAncestor(GoldenSetError):
    """A recorded golden-set version that is not a prefix of the current file."""


@dataclass(frozen=True)
class GoldenVersion:
    sha256: str
    records: int | None = None  # None: a run logged before versions were addressable
    head: str | None = None

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> GoldenVersion | None:
        sha = tags.get(TAG_SHA)
        if not sha:
            return None
        raw_n = tags.get(TAG_RECORDS)
        try:
            n = int(raw_n) if raw_n not in (None, "") else None
        except ValueError:
            n = None
        return cls(sha, n, tags.get(TAG_HEAD) if n is not None else None)

    @classmethod
    def of(cls, golden: GoldenSet) -> GoldenVersion:
        return cls(golden.digest, len(golden.records), golden.head)

    def tags(self) -> dict[str, str]:
        out = {TAG_SHA: self.sha256}
        if self.records is not None:
            out[TAG_RECORDS] = str(self.records)
            out[TAG_HEAD] = self.head or ""
        return out

    def describe(self) -> str:
        if self.records is None:
            return f"sha256 {self.sha256[:12]}"
        return f"{self.records} records, head {(self.head or '-')[:12]}, sha256 {self.sha256[:12]}"


def _read(path: Path) -> tuple[list[Record], list[bytes]]:
    """The records (chain and manifest verified: a corrupt file is its own error) and the raw lines,
    each with its newline."""
    records = GoldenFile(path).read_records()
    raw = path.read_bytes()
    return records, [line + b"\n" for line in raw.split(b"\n")[:-1]]


def _head(lines: list[bytes], n: int) -> str:
    return line_hash(lines[n - 1][:-1].decode("utf-8")) if n else ""


def prefix_length(path: str | Path, version: GoldenVersion) -> int:
    """How many leading records of ``path`` make up ``version``; NotAnAncestor when none do."""
    path = Path(path)
    return _prefix(path, _read(path)[1], version)


def _prefix(path: Path, lines: list[bytes], version: GoldenVersion) -> int:
    if version.records is None:
        return _prefix_by_sha(path, lines, version.sha256)
    n = version.records
    if n > len(lines):
        raise NotAnAncestor(
            f"{path}: the recorded golden version ({version.describe()}) has {n} records but the file has only "
            f"{len(lines)}: the run used a newer or another golden file, or this one was truncated")
    actual = _head(lines, n)
    if actual != (version.head or ""):
        raise NotAnAncestor(
            f"{path}:{n}: line {n} hashes to {actual[:12] or '(empty)'}, but the recorded golden version's chain "
            f"head is {(version.head or '')[:12] or '(empty)'}: the file differs from that version at or before "
            f"line {n}: not an ancestor (another golden set, or its history was rewritten)")
    sha = hashlib.sha256(b"".join(lines[:n])).hexdigest()
    if sha != version.sha256:
        raise NotAnAncestor(
            f"{path}: the first {n} records have sha256 {sha[:12]}, the recorded version {version.sha256[:12]}: "
            "not an ancestor")
    return n


def _prefix_by_sha(path: Path, lines: list[bytes], sha256: str) -> int:
    h = hashlib.sha256()
    if h.hexdigest() == sha256:
        return 0
    for n, line in enumerate(lines, start=1):
        h.update(line)
        if h.hexdigest() == sha256:
            return n
    raise NotAnAncestor(f"{path}: no prefix of the file has sha256 {sha256[:12]} (the run recorded no record "
                        "count): not an ancestor (another golden set, or its history was rewritten)")


def line_hashes_text(path: str | Path, version: GoldenVersion) -> str | None:
    """The :data:`LINES_ARTIFACT` text for ``version`` of ``path`` (its first ``records`` lines),
    or None when the file no longer holds that version as a prefix (it changed under the run)."""
    path = Path(path)
    try:
        lines = path.read_bytes().split(b"\n")[:-1]
    except OSError:
        return None
    n = version.records
    if n is None or n > len(lines):
        return None
    hashes = [hashlib.sha256(line).hexdigest() for line in lines[:n]]
    if (hashes[-1] if hashes else "") != (version.head or ""):
        return None
    return "".join(h[:LINE_HASH_CHARS] + "\n" for h in hashes)


def first_difference(path: str | Path, recorded: str) -> int | None:
    """The first line (1-based) at which ``path`` differs from the version whose line hashes are
    ``recorded`` (a :data:`LINES_ARTIFACT` text); None when that version is a prefix of the file.
    A file shorter than the version differs at the line after its last one."""
    old = recorded.split()
    lines = Path(path).read_bytes().split(b"\n")[:-1]
    for n, h in enumerate(old, start=1):
        if n > len(lines) or hashlib.sha256(lines[n - 1]).hexdigest()[:LINE_HASH_CHARS] != h:
            return n
    return None


def locate(path: str | Path, version: GoldenVersion) -> GoldenSet:
    """The golden set as it was at ``version``, resolved from the prefix of the current file
    (retirements, judgements and anchors appended later do not apply)."""
    path = Path(path)
    if not path.is_file():
        raise NotAnAncestor(f"{path}: no such golden file to find version {version.describe()} in")
    records, lines = _read(path)
    n = _prefix(path, lines, version)
    return resolve(records[:n], path, version.sha256, head=_head(lines, n))


def current_version(path: str | Path) -> GoldenVersion:
    """The version of the file as it is now."""
    path = Path(path)
    records, lines = _read(path)
    return GoldenVersion(hashlib.sha256(b"".join(lines)).hexdigest(), len(records), _head(lines, len(records)))
