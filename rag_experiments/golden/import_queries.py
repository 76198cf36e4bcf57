"""A query log as golden cases: read, normalise, deduplicate, stratify by traffic, sample, append.

``rag-exp golden import-queries FILE`` (:mod:`rag_experiments.commands.golden_import_queries`).

**Input** (:func:`read_log`). A text file, one query a line (each line one occurrence); or JSON
lines (a ``.jsonl`` / ``.json`` file, or any file whose first non-blank line starts with ``{``),
one object a line: ``{"query": str, "count": int >= 1 (default 1), "ts": str or number
(optional)}``; other keys are ignored (a log's user ids are not copied). Blank lines are
skipped. Anything else ends in one line naming ``FILE:LINE``: an empty file, a line that is not
UTF-8, a line over :data:`MAX_LINE_BYTES`, a bad JSON line, a missing or wrong-typed field, a
query that cannot be searched (a NUL, a lone surrogate such as a JSON ``\\udcff``, over the
query limits of :mod:`rag_experiments.limits`).

**Normalising** (:func:`normalise`): Unicode NFKC, runs of whitespace to one space, trimmed; the
deduplication key is that text case-folded. Variants of one query are merged, their counts
summed; the case keeps the most frequent written form (the first seen on a tie).

**Strata by traffic** (:func:`stratify`): the distinct queries ordered by count (ties in a seeded
random order, so equal counts do not sort alphabetically), then cut by cumulative traffic: a query
is ``head`` if the traffic of the queries before it is under :data:`HEAD_SHARE` (50%) of the
total, ``torso`` under :data:`TORSO_SHARE` (80%), else ``tail``: the few queries that make the
first half of the traffic, the next 30%, and the long tail. With every count equal (a text file
without repeats) the strata are an arbitrary split and the report says so.

**Sampling** (:func:`sample`): ``--size N`` split equally over the three strata (remainder to
head, then torso), each capped at its stratum's size, what a small stratum cannot take going to
the others; within a stratum the first ``n`` in a seeded order (sha256 of seed and key), so the
same seed draws the same cases and a larger N extends a smaller one's sample. Equal, not
proportional, allocation: proportional to traffic would be nearly all head, proportional to
distinct queries nearly all tail; equal gives each stratum its own estimate (segment).

**Cases** (:func:`import_queries`): kind ``production``, ``doc_type`` ``unknown``, no evidence
(labelled afterwards by pooling: ``rag-exp golden label --pool ...`` or ``--by-hand``), top-level
``stratum``, provenance ``method: import`` with the file's name and sha256, the count and traffic
share, the first and last ``ts`` seen, the seed and the size. The id comes from the
normalised query (``new_id("c", "query-log", key)``): importing the same file twice appends
nothing, and a query already in the golden set (any case, same key) is not added again.
Evaluation scores such a case once a label finds a relevant passage for it; until then, and if
every judged passage is NO, it is *unanswered*: kept, excluded from the metrics and counted
(``rag-exp golden stats`` shows the share of real queries the corpus does not answer).
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..limits import query_problem, surrogate_problem
from .golden_file import GoldenFile
from .records import Case, new_id

HEAD_SHARE = 0.5
TORSO_SHARE = 0.8
STRATA = ("head", "torso", "tail")
MAX_LINE_BYTES = 64 * 1024  # a query is at most 4,000 characters (limits.MAX_QUERY_CHARS); JSON adds a little
DEFAULT_SIZE = 100
KIND = "production"
DOC_TYPE = "unknown"


@dataclass(frozen=True)
class LoggedQuery:
    text: str
    count: int
    ts: str | None
    line: int


@dataclass
class Distinct:
    key: str
    text: str  # the most frequent written form
    count: int
    first_ts: str | None
    last_ts: str | None
    forms: Counter = field(default_factory=Counter)
    stratum: str = ""


def normalise(query: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", query).split())


def key_of(query: str) -> str:
    return normalise(query).casefold()


def _is_jsonl(path: Path, first: bytes) -> bool:
    return path.suffix.lower() in (".jsonl", ".json", ".ndjson") or first.lstrip().startswith(b"{")


def read_log(path: str | Path) -> tuple[list[LoggedQuery], str]:
    """The queries of a log file and its format (``text`` or ``jsonl``); UserError naming FILE:LINE."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file", hint="give a query log: one query a line, or JSON lines") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    lines = data.split(b"\n")
    first = next((ln for ln in lines if ln.strip()), b"")
    if not first:
        raise UserError(f"{path}: no queries (the file is empty)",
                        hint="one query a line, or JSON lines {\"query\": ..., \"count\": ...}")
    fmt = "jsonl" if _is_jsonl(path, first.removeprefix(b"\xef\xbb\xbf")) else "text"
    out: list[LoggedQuery] = []
    for n, raw in enumerate(lines, start=1):
        where = f"{path}:{n}"
        if n == 1:
            raw = raw.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark
        raw = raw.removesuffix(b"\r")
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_BYTES:
            raise UserError(f"{where}: the line has {len(raw):,} bytes; a query line is at most {MAX_LINE_BYTES:,}",
                            hint="a query log holds questions, one a line; is this the right file?")
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserError(f"{where}: not UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1})",
                            hint="convert the file, e.g. iconv -f latin1 -t utf-8 FILE > FILE.utf8") from None
        count, ts = 1, None
        if fmt == "jsonl":
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"{where}: not a JSON object: {exc.msg} at column {exc.colno}",
                                hint='each line: {"query": "...", "count": 3, "ts": "2026-12-01T10:00:00Z"}') from None
            if not isinstance(obj, dict):
                raise UserError(f"{where}: a line must be a JSON object, got {type(obj).__name__}",
                                hint='each line: {"query": "...", "count": 3}')
            query = obj.get("query")
            if not isinstance(query, str):
                raise UserError(f"{where}: field 'query' " + ("is missing" if "query" not in obj else
                                                            f"must be a string, got {type(query).__name__}"))
            count = obj.get("count", 1)
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise UserError(f"{where}: field 'count' must be a whole number >= 1, got {count!r}")
            ts = obj.get("ts")
            if ts is not None:
                if isinstance(ts, bool) or not isinstance(ts, (str, int, float)):
                    raise UserError(f"{where}: field 'ts' must be a string or a number, got {type(ts).__name__}")
                ts = str(ts)
                if bad := surrogate_problem(ts):
                    raise UserError(f"{where}: field 'ts' {bad}")
        else:
            query = line
        text = normalise(query)
        if not text:
            if fmt == "jsonl":
                raise UserError(f"{where}: field 'query' is empty")
            continue
        if problem := query_problem(text):
            raise UserError(f"{where}: the query {problem}",
                            hint="fix or remove that line (a query log holds questions as UTF-8 text)")
        out.append(LoggedQuery(text, count, ts, n))
    if not out:
        raise UserError(f"{path}: no queries (only blank lines)")
    return out, fmt


def deduplicate(queries: list[LoggedQuery]) -> list[Distinct]:
    """Merge variants (same :func:`key_of`), counts summed; in order of first appearance."""
    by_key: dict[str, Distinct] = {}
    for q in queries:
        k = q.text.casefold()
        d = by_key.get(k)
        if d is None:
            d = by_key[k] = Distinct(k, q.text, 0, q.ts, q.ts)
        d.count += q.count
        d.forms[q.text] += q.count
        if q.ts is not None:
            d.first_ts = q.ts if d.first_ts is None else min(d.first_ts, q.ts)
            d.last_ts = q.ts if d.last_ts is None else max(d.last_ts, q.ts)
    for d in by_key.values():
        best = max(d.forms.values())
        d.text = next(form for form, n in d.forms.items() if n == best)
    return list(by_key.values())


def _order(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}|{key}".encode()).hexdigest()


def stratify(distinct: list[Distinct], seed: int = 13) -> list[Distinct]:
    """Set each query's ``stratum`` by cumulative traffic (see the module docstring); returns them
    in traffic order."""
    ordered = sorted(distinct, key=lambda d: (-d.count, _order(seed, d.key)))
    total = sum(d.count for d in ordered)
    before = 0
    for d in ordered:
        d.stratum = "head" if before < HEAD_SHARE * total else "torso" if before < TORSO_SHARE * total else "tail"
        before += d.count
    return ordered


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """``n`` split equally over the strata (remainder to the first), capped, the rest passed on."""
    quota = dict.fromkeys(sizes, 0)
    left = n
    while left > 0:
        room = [s for s in sizes if quota[s] < sizes[s]]
        if not room:
            break
        share, extra = divmod(left, len(room))
        given = 0
        for i, s in enumerate(room):
            take = min(share + (1 if i < extra else 0), sizes[s] - quota[s])
            quota[s] += take
            given += take
        left -= given
        if given == 0:
            break
    return quota


def sample(ordered: list[Distinct], size: int, seed: int = 13) -> tuple[list[Distinct], dict[str, int]]:
    """The queries to import (in traffic order) and the allocation per stratum."""
    by = {s: [d for d in ordered if d.stratum == s] for s in STRATA}
    alloc = allocate({s: len(v) for s, v in by.items()}, size)
    chosen = {d.key for s in STRATA for d in sorted(by[s], key=lambda d: _order(seed, d.key))[:alloc[s]]}
    return [d for d in ordered if d.key in chosen], alloc


@dataclass
class ImportReport:
    path: Path
    fmt: str
    lines: int  # queries read (occurrence lines)
    traffic: int  # summed counts
    distinct: int
    size: int
    seed: int
    strata: dict[str, dict[str, Any]]  # stratum -> distinct, traffic, share, sampled, appended, present
    appended: int = 0
    already_present: int = 0
    equal_counts: bool = False

    def table_rows(self) -> list[tuple[str, ...]]:
        return [(s, str(r["distinct"]), f"{r['share']:.0%}", str(r["sampled"]), str(r["appended"]),
                 str(r["present"])) for s, r in self.strata.items()]


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def case_id(key: str) -> str:
    return new_id("c", "query-log", key)


def import_queries(golden_path: str | Path, log_path: str | Path, *, size: int = DEFAULT_SIZE, seed: int = 13,
                   dry_run: bool = False) -> ImportReport:
    """Read, deduplicate, stratify and sample ``log_path``; append the sampled queries not already
    in the golden set as ``production`` cases without evidence (unless ``dry_run``)."""
    if size < 1:
        raise UserError(f"--size: must be >= 1 case, got {size}")
    log_path = Path(log_path)
    queries, fmt = read_log(log_path)
    distinct = deduplicate(queries)
    ordered = stratify(distinct, seed)
    picked, alloc = sample(ordered, size, seed)
    traffic = sum(d.count for d in ordered)
    gf = GoldenFile(golden_path)
    present_ids: set[str] = set()
    present_keys: set[str] = set()
    if gf.exists():
        for r in gf.read_records():
            present_ids.add(r.id)
            if isinstance(r, Case):
                present_keys.add(key_of(r.query))
    strata = {s: {"distinct": 0, "traffic": 0, "share": 0.0, "sampled": alloc.get(s, 0), "appended": 0, "present": 0}
              for s in STRATA}
    for d in ordered:
        strata[d.stratum]["distinct"] += 1
        strata[d.stratum]["traffic"] += d.count
    for s in STRATA:
        strata[s]["share"] = strata[s]["traffic"] / traffic
    report = ImportReport(log_path, fmt, len(queries), traffic, len(ordered), size, seed, strata,
                          equal_counts=len({d.count for d in ordered}) == 1 and len(ordered) > 1)
    file_hash = _file_sha256(log_path)
    records = []
    for d in picked:
        cid = case_id(d.key)
        if cid in present_ids or d.key in present_keys:
            strata[d.stratum]["present"] += 1
            report.already_present += 1
            continue
        prov: dict[str, Any] = {"method": "import", "source": log_path.name, "source_sha256": file_hash,
                                "count": d.count, "traffic_share": round(d.count / traffic, 6),
                                "variants": len(d.forms), "seed": seed, "size": size,
                                "strata": {"head": HEAD_SHARE, "torso": TORSO_SHARE}}
        if d.first_ts is not None:
            prov["first_ts"], prov["last_ts"] = d.first_ts, d.last_ts
        records.append({"type": "case", "id": cid, "query": d.text, "kind": KIND, "doc_type": DOC_TYPE,
                        "evidence": [], "stratum": d.stratum, "provenance": prov})
        strata[d.stratum]["appended"] += 1
    report.appended = len(records)
    if records and not dry_run:
        gf.append(records)
    return report


def unanswered_share(golden: Any) -> dict[str, Any]:
    """Among live cases imported without evidence (kind ``production``, no evidence of their own):
    how many have a relevant passage now (``answered``), how many were judged and have none
    (``unanswerable``: every judged passage NO), how many are not judged yet (``unlabelled``), per
    stratum too. ``share`` = unanswerable / (answered + unanswerable): the share of real queries
    the corpus cannot answer, among those labelled."""
    rows: dict[str, Counter] = {}
    for c in golden.cases:
        if not getattr(c, "without_evidence", False):
            continue
        state = "answered" if c.relevant else "unanswerable" if c.judged else "unlabelled"
        for group in ("all", c.stratum or "none"):
            rows.setdefault(group, Counter())[state] += 1
    out = {}
    for group, n in rows.items():
        labelled = n["answered"] + n["unanswerable"]
        out[group] = {"answered": n["answered"], "unanswerable": n["unanswerable"], "unlabelled": n["unlabelled"],
                      "share": round(n["unanswerable"] / labelled, 4) if labelled else None}
    return out
