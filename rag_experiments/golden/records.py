"""The golden-set record types and their strict validation.

One JSONL file per golden set (``experiments/golden/<name>.jsonl``), one record per line, in
append order. Every record has ``type``, ``id``, ``created_at`` and ``prev`` (the sha256 of the
previous line's bytes; ``""`` on line 1): a hash chain, so an edit anywhere is found and
reported with its line number (see :mod:`.golden_file`).

Record types (fields beyond the common ones):

``case``
    ``query``, ``kind`` (``paraphrase`` | ``exact`` | ``production`` | ``benchmark`` | ``multi`` | ...),
    ``doc_type``, ``evidence`` (list of spans, each with ``grade``), ``provenance``
    (``method``: llm | human | agent | import; ``provider``, ``model``, ``prompt_version``,
    ``author``...), optional ``identifier`` (the exact identifier an ``exact`` question carries),
    optional ``stratum`` (``head`` | ``torso`` | ``tail``: the traffic stratum of a query imported from
    a log, :mod:`.import_queries`). Only a ``production`` case may have no evidence (a real query
    awaiting labels: ``rag-exp golden import-queries``); every other case needs a span.
    **Evidence groups** (all-of semantics, a question that needs A *and* B, kind ``multi``): each
    evidence span may carry ``group`` (0, 1, ...): the case needs one passage of every group, and the
    spans of one group are alternatives. Either every span has a ``group`` or none has (then the case
    is one group, as every case written before groups existed); the groups used must be 0..G-1.
``judgement``
    ``case_id``, ``span``, ``verdict`` (YES | PART | NO), ``judge`` (``kind``: llm | human |
    agent; ``model`` or ``name``; ``prompt_version``; for ``llm`` the ``provider``: anthropic |
    openai, absent in records written before providers existed, which are Anthropic's), optional ``group`` (the
    evidence group of a multi-group case the passage was judged for), optional ``reason`` and ``supersedes``
    (the id of the judgement it replaces; a reason is then required), optional ``sample`` (the pair
    was drawn by ``rag-exp golden label --sample``: :class:`SampleDesign`; absent: judged with certainty). ``llm`` is the configured
    LLM judge (``rag-exp golden label``); ``agent`` is any other machine judge (an AI coding
    agent, a script, another model used by hand). Both are *machine judges*: their labels count
    as unvalidated until a human spot-check agrees (:mod:`.spotcheck`). Only ``human`` means a
    person made the call.
``retire``
    ``target`` (a case id), ``reason``, ``who``: the case is no longer evaluated.
``manifest``
    ``who``, ``reason``, ``records`` and ``head`` (the line count and last line hash a person
    confirmed as intended when the missing manifest was rebuilt: ``rag-exp golden manifest``).
``split``
    ``seed``, ``test_fraction``, ``strata``, ``dev`` and ``test`` (case ids), ``rule``, ``who``, ``reason``:
    the frozen dev/test split of the cases (``rag-exp golden split``, :mod:`.split`); the last one counts.
``anchor``
    ``case_id``, ``ref`` (``<case id>#<evidence index>`` or a judgement id), ``status``
    (moved | fuzzy | stale), ``span`` (the new span, absent when stale), ``similarity``:
    written when a corpus edit moved a labelled passage (see :mod:`.anchoring`).

A span is ``{doc_id, source_uri, start, end, quote, doc_hash}``: char offsets into the
document text, plus the quoted text and the document's content hash at labelling time so the
span can be found again after the document is edited.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..errors import GoldenSetError
from ..limits import surrogate_problem

VERDICTS = {"YES": 2, "PART": 1, "NO": 0}
JUDGE_KINDS = ("llm", "human", "agent")
MACHINE_JUDGES = ("llm", "agent")  # labels that need a human spot-check before they are trusted
RECORD_TYPES = ("case", "judgement", "retire", "anchor", "manifest", "split")
ANCHOR_STATUSES = ("moved", "fuzzy", "stale")


def now_iso() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def canonical(record: dict) -> str:
    """The exact line written for a record: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def line_hash(line: str) -> str:
    return hashlib.sha256(line.encode("utf-8")).hexdigest()


def new_id(prefix: str, *parts: Any) -> str:
    """Deterministic id from content: the same generated question always gets the same id."""
    raw = "|".join(str(p) for p in parts)
    return f"{prefix}-{hashlib.sha256(raw.encode()).hexdigest()[:12]}"


@dataclass(frozen=True)
class Span:
    doc_id: str
    source_uri: str
    start: int
    end: int
    quote: str
    doc_hash: str

    def to_json(self) -> dict:
        return {"doc_id": self.doc_id, "source_uri": self.source_uri, "start": self.start, "end": self.end,
                "quote": self.quote, "doc_hash": self.doc_hash}

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.doc_id, self.start, self.end)


def _need(rec: dict, field: str, typ: type | tuple, where: str) -> Any:
    if field not in rec:
        raise GoldenSetError(f"{where}: missing field {field!r}")
    value = rec[field]
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise GoldenSetError(f"{where}: field {field!r} has type {type(value).__name__}, expected {typ}")
    return value


def parse_span(obj: Any, where: str) -> Span:
    if not isinstance(obj, dict):
        raise GoldenSetError(f"{where}: span must be an object")
    start = _need(obj, "start", int, where)
    end = _need(obj, "end", int, where)
    if not 0 <= start < end:
        raise GoldenSetError(f"{where}: span start/end must satisfy 0 <= start < end, got {start}..{end}")
    quote = _need(obj, "quote", str, where)
    if len(quote) != end - start:
        raise GoldenSetError(f"{where}: quote has {len(quote)} chars but the span is {end - start} chars")
    doc_id, source_uri = _need(obj, "doc_id", str, where), _need(obj, "source_uri", str, where)
    return Span(doc_id, source_uri, start, end, quote, _need(obj, "doc_hash", str, where))


def parse_groups(evidence: list, where: str) -> tuple[int, ...]:
    """The ``group`` of each evidence span (``()`` when none has one: the case is one group).
    Either every span has one or none has; the groups used are 0..G-1, each with a span."""
    present = ["group" in ev for ev in evidence if isinstance(ev, dict)]
    if not any(present):
        return ()
    groups = []
    for i, ev in enumerate(evidence):
        if "group" not in ev:
            raise GoldenSetError(f"{where}: evidence[{i}] has no field 'group' but other spans of the case have one "
                                 "(either every span names its evidence group or none does)")
        g = ev["group"]
        if not isinstance(g, int) or isinstance(g, bool) or g < 0:
            raise GoldenSetError(f"{where}: evidence[{i}].group must be an integer >= 0, got {g!r}")
        groups.append(g)
    missing = sorted(set(range(max(groups) + 1)) - set(groups))
    if missing:
        raise GoldenSetError(f"{where}: evidence groups must be numbered 0..{max(groups)} without gaps; "
                             f"no span has group {', '.join(map(str, missing))}")
    return tuple(groups)


@dataclass(frozen=True)
class SampleDesign:
    """A judgement's optional ``sample`` field (``rag-exp golden label --sample``): the pair was drawn
    by sample ``id`` (seed ``seed``) from stratum ``stratum`` of ``population`` units (``unit``: pairs,
    or cases whose every pair is judged); ``inclusion`` is the stratum's sampling rate when it was
    drawn (evaluation recounts it from the judged units: :mod:`rag_experiments.evaluation.sampled`).
    Records without it were not sampled (pi = 1)."""

    id: str
    stratum: str
    population: int
    seed: int
    inclusion: float
    unit: str = "pair"  # pair: pairs drawn within rank strata; case: whole cases drawn (every pair of each)


SAMPLE_UNITS = ("pair", "case")


def parse_sample(obj: Any, where: str) -> SampleDesign:
    if not isinstance(obj, dict):
        raise GoldenSetError(f"{where}: must be an object")
    sid, stratum = _need(obj, "id", str, where), _need(obj, "stratum", str, where)
    population, seed = _need(obj, "population", int, where), _need(obj, "seed", int, where)
    inclusion = _need(obj, "inclusion", (int, float), where)
    if population < 1:
        raise GoldenSetError(f"{where}: population must be >= 1, got {population}")
    if isinstance(inclusion, bool) or not 0 < inclusion <= 1:
        raise GoldenSetError(f"{where}: inclusion must be in (0, 1], got {inclusion!r}")
    if not sid.strip() or not stratum.strip():
        raise GoldenSetError(f"{where}: id and stratum must not be empty")
    unit = obj.get("unit", "pair")
    if unit not in SAMPLE_UNITS:
        raise GoldenSetError(f"{where}: unit must be one of {', '.join(SAMPLE_UNITS)}, got {unit!r}")
    return SampleDesign(sid, stratum, population, seed, float(inclusion), unit)


@dataclass(frozen=True)
class Record:
    """A validated line of the golden set; ``raw`` is its JSON object as on disk (extras included:
    provenance, judge, reason, benchmark ids...), the only form ever written."""

    id: str
    raw: dict = field(repr=False, compare=False, kw_only=True)


@dataclass(frozen=True)
class Case(Record):
    query: str
    kind: str
    doc_type: str
    evidence: tuple[tuple[Span, int], ...]  # (span, grade) as labelled
    identifier: str | None
    groups: tuple[int, ...] = ()  # the evidence group of each span (all-of); () when the case is one group

    @property
    def n_groups(self) -> int:
        return max(self.groups) + 1 if self.groups else 1


@dataclass(frozen=True)
class Judgement(Record):
    case_id: str
    span: Span
    verdict: str
    judge_kind: str
    supersedes: str | None
    group: int | None = None  # the evidence group of a multi-group case it was judged for


@dataclass(frozen=True)
class Retire(Record):
    target: str


@dataclass(frozen=True)
class Anchor(Record):
    case_id: str
    ref: str
    status: str
    span: Span | None  # None when stale
    by_human: bool
    checked_doc_hash: str | None


@dataclass(frozen=True)
class Manifest(Record):
    pass


@dataclass(frozen=True)
class Split(Record):
    """A dev/test split (:mod:`.split` interprets it)."""

    seed: int
    test_fraction: float
    dev: frozenset[str]
    test: frozenset[str]


def validate(rec: Any, where: str) -> dict:
    """Check one record's shape; raise GoldenSetError naming ``where`` (file:line) and the field."""
    parse_record(rec, where)
    return rec


def parse_record(rec: Any, where: str) -> Record:
    """The typed record of one JSON object; GoldenSetError naming ``where`` (file:line) and the field."""
    if not isinstance(rec, dict):
        raise GoldenSetError(f"{where}: a record must be a JSON object")
    rtype = _need(rec, "type", str, where)
    if rtype not in RECORD_TYPES:
        raise GoldenSetError(f"{where}: unknown record type {rtype!r}; expected one of {', '.join(RECORD_TYPES)}")
    rid = _need(rec, "id", str, where)
    _need(rec, "created_at", str, where)
    _need(rec, "prev", str, where)
    if rtype == "case":
        if not _need(rec, "query", str, where).strip():
            raise GoldenSetError(f"{where}: field 'query' is empty")
        if bad_text := surrogate_problem(rec["query"]):  # a JSON \udcff escape: no hash, log or table can hold it
            raise GoldenSetError(f"{where}: field 'query' {bad_text}",
                                 hint="rag-exp writes UTF-8 lines, so another tool wrote this one: remove it "
                                 "(the last line) and add the case with rag-exp golden add")
        kind = _need(rec, "kind", str, where)
        doc_type = _need(rec, "doc_type", str, where)
        prov = _need(rec, "provenance", dict, where)
        _need(prov, "method", str, f"{where}: provenance")
        evidence = _need(rec, "evidence", list, where)
        if not evidence and kind != "production":
            raise GoldenSetError(f"{where}: case {rec['id']} has no evidence; every case needs at least one span "
                                 "(only a production query may await its labels)")
        if "stratum" in rec and (not isinstance(rec["stratum"], str) or not rec["stratum"].strip()):
            raise GoldenSetError(f"{where}: field 'stratum' must be a non-empty string, got {rec['stratum']!r}")
        spans = []
        for i, ev in enumerate(evidence):
            span = parse_span(ev, f"{where}: evidence[{i}]")
            grade = _need(ev, "grade", int, f"{where}: evidence[{i}]")
            if grade not in (1, 2):
                raise GoldenSetError(f"{where}: evidence[{i}].grade must be 1 (PART) or 2 (YES), got {grade}")
            spans.append((span, grade))
        groups = parse_groups(evidence, where)
        return Case(rid, rec["query"], kind, doc_type, tuple(spans), rec.get("identifier"), groups, raw=rec)
    if rtype == "judgement":
        case_id = _need(rec, "case_id", str, where)
        span = parse_span(rec.get("span"), f"{where}: span")
        verdict = _need(rec, "verdict", str, where)
        if verdict not in VERDICTS:
            raise GoldenSetError(f"{where}: verdict must be YES, PART or NO, got {verdict!r}")
        judge = _need(rec, "judge", dict, where)
        kind = _need(judge, "kind", str, f"{where}: judge")
        if kind not in JUDGE_KINDS:
            raise GoldenSetError(f"{where}: judge.kind must be one of {', '.join(JUDGE_KINDS)}, got {kind!r}")
        if rec.get("supersedes") and not str(rec.get("reason", "")).strip():
            raise GoldenSetError(f"{where}: a judgement that supersedes another needs a 'reason'")
        if "sample" in rec:
            parse_sample(rec["sample"], f"{where}: sample")
        group = rec.get("group")
        if group is not None and (not isinstance(group, int) or isinstance(group, bool) or group < 0):
            raise GoldenSetError(f"{where}: field 'group' must be an evidence group number >= 0, got {group!r}")
        return Judgement(rid, case_id, span, verdict, kind, rec.get("supersedes") or None, group, raw=rec)
    if rtype == "retire":
        target = _need(rec, "target", str, where)
        if not _need(rec, "reason", str, where).strip():
            raise GoldenSetError(f"{where}: 'reason' is empty")
        _need(rec, "who", str, where)
        return Retire(rid, target, raw=rec)
    if rtype == "manifest":
        _need(rec, "who", str, where)
        if not _need(rec, "reason", str, where).strip():
            raise GoldenSetError(f"{where}: 'reason' is empty")
        _need(rec, "records", int, where)
        _need(rec, "head", str, where)
        return Manifest(rid, raw=rec)
    if rtype == "split":
        return _parse_split(rec, rid, where)
    case_id = _need(rec, "case_id", str, where)
    ref = _need(rec, "ref", str, where)
    status = _need(rec, "status", str, where)
    if status not in ANCHOR_STATUSES:
        raise GoldenSetError(f"{where}: anchor status must be one of {ANCHOR_STATUSES}, got {status!r}")
    span = None if status == "stale" else parse_span(rec.get("span"), f"{where}: span")
    by_human = (rec.get("by") or {}).get("kind") == "human"  # a person vouched for the passage
    return Anchor(rid, case_id, ref, status, span, by_human, rec.get("checked_doc_hash"), raw=rec)


def _parse_split(rec: dict, rid: str, where: str) -> Split:
    seed = _need(rec, "seed", int, where)
    fraction = _need(rec, "test_fraction", (int, float), where)
    if isinstance(fraction, bool) or not 0 < fraction < 1:
        raise GoldenSetError(f"{where}: test_fraction must be in (0, 1), got {fraction!r}")
    _need(rec, "strata", list, where)
    _need(rec, "rule", str, where)
    _need(rec, "who", str, where)
    if not _need(rec, "reason", str, where).strip():
        raise GoldenSetError(f"{where}: 'reason' is empty")
    sides = {}
    for side in ("dev", "test"):
        ids = _need(rec, side, list, where)
        if not all(isinstance(i, str) for i in ids):
            raise GoldenSetError(f"{where}: field {side!r} must list case ids (strings)")
        sides[side] = frozenset(ids)
    both = sides["dev"] & sides["test"]
    if both:
        raise GoldenSetError(f"{where}: case {sorted(both)[0]} is on both sides of the split")
    return Split(rid, seed, float(fraction), sides["dev"], sides["test"], raw=rec)
