"""Triage a bad answer: did the evidence reach the context (GENERATION failure) or not
(RETRIEVAL failure)? And where did it sit in each leg, and which variant would have fetched it?

The verdict is about the *configured* variant and a context of ``context`` chunks: evidence at
fused (or reranked) rank <= context reached the model. Ranks are found with the same overlap
rule evaluation uses, so "the evidence" may be any chunk of the current chunking that covers
the expected span.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .errors import UserError
from .span_match import matches
from .retrieval.retriever import VARIANTS, Retriever
from .retrieval.systems import system_type

_SPAN = re.compile(r"^(?P<uri>.+):(?P<start>\d+)-(?P<end>\d+)$")


@dataclass(frozen=True)
class Expected:
    doc_id: str
    source_uri: str
    start: int
    end: int
    chunk_id: str | None = None


@dataclass(frozen=True)
class TriageReport:
    query: str
    expected: Expected
    variant: str
    context: int
    ranks: dict[str, int | None]  # per variant: rank of the first hit covering the evidence
    leg_ranks: dict[str, int | None]  # in the configured variant's lists: vector, keyword, fused, rerank
    depth: int

    @property
    def verdict(self) -> str:
        rank = self.ranks.get(self.variant)
        if rank is not None and rank <= self.context:
            return "GENERATION"
        return "RETRIEVAL"

    @property
    def would_have_worked(self) -> list[str]:
        return [v for v, r in self.ranks.items() if r is not None and r <= self.context]

    def render(self) -> str:
        def fmt(r):
            return f"rank {r}" if r is not None else f"absent (not in top {self.depth})"

        lines = []
        if self.verdict == "GENERATION":
            lines.append(f"GENERATION: chunk was in context; the model failed to use it "
                         f"({self.variant} rank {self.ranks[self.variant]} <= context {self.context})")
        else:
            lines.append(f"RETRIEVAL: relevant chunk never reached the context "
                         f"({self.variant}: {fmt(self.ranks.get(self.variant))}, context {self.context})")
        lines.append(f"evidence: {self.expected.source_uri}:{self.expected.start}-{self.expected.end}")
        lines.append("where it sat in the configured pipeline:")
        for leg in ("vector", "keyword", "fused", "rerank"):
            if leg in self.leg_ranks:
                lines.append(f"  {leg:8s} {fmt(self.leg_ranks[leg])}")
        lines.append("rank per variant (same chunking):")
        for v, r in self.ranks.items():
            mark = "  <- in context" if r is not None and r <= self.context else ""
            lines.append(f"  {v:14s} {fmt(r)}{mark}")
        if self.verdict == "RETRIEVAL":
            ok = self.would_have_worked
            lines.append("would have put it in context: " + (", ".join(ok) if ok else
                         "no variant at this chunking (try another chunking, depth or the golden set's labels)"))
        return "\n".join(lines)


def parse_expected(value: str, session) -> Expected:
    """A chunk id of the configured strategy, or ``SOURCE_URI:START-END``."""
    chunk = session.chunk(value)
    if chunk is not None:
        return Expected(chunk["doc_id"], chunk["source_uri"], chunk["start"], chunk["end"], value)
    m = _SPAN.match(value)
    if m:
        doc = session.document(m.group("uri"))
        if doc is None:
            raise UserError(f"--expected: no document {m.group('uri')!r} in the corpus")
        start, end = int(m.group("start")), int(m.group("end"))
        if not 0 <= start < end <= len(doc["text"]):
            raise UserError(f"--expected: span {start}-{end} is outside {doc['source_uri']} (length {len(doc['text'])})")
        return Expected(doc["doc_id"], doc["source_uri"], start, end)
    raise UserError(f"--expected: {value!r} is neither a chunk id of strategy {session.strategy_id} nor "
                    "SOURCE_URI:START-END", hint="chunk ids depend on the chunking: pass the same --set overrides "
                    "as the run, or give the span, e.g. postgresql-15/sql-vacuum.html:1200-1650")


def _rank(hits, exp: Expected) -> int | None:
    for h in hits:
        if matches(h.doc_id, h.start, h.end, exp.doc_id, exp.start, exp.end):
            return h.rank
    return None


def triage(session, query: str, expected: Expected, context: int = 8) -> TriageReport:
    params = session.settings.retriever_params
    depth = params.fusion.depth
    system = system_type(params.variant)
    if not system.legs:  # not one of the built-in variants (a team's system): its own list is all there is
        hits = session.retriever.search_many([query], depth)[0].hits
        return TriageReport(query, expected, params.variant, context, {params.variant: _rank(hits, expected)},
                            {}, depth)
    ranks: dict[str, int | None] = {}
    configured_hits = ()
    for variant in VARIANTS:
        r = Retriever(session.conn, session.strategy, session.embedder, replace(params, variant=variant))
        hits = r.search(query, depth).hits
        ranks[variant] = _rank(hits, expected)
        if variant == params.variant:
            configured_hits = hits
    leg_ranks: dict[str, int | None] = {}
    first = next((h for h in configured_hits if matches(h.doc_id, h.start, h.end, expected.doc_id,
                                                        expected.start, expected.end)), None)
    legs = [*system.legs, *(["fused"] if system.fuses else []), *(["rerank"] if system.rerank else [])]
    for leg in legs:
        leg_ranks[leg] = first.leg_ranks.get(leg) if first is not None else None
    if system.fuses:
        leg_ranks["vector"] = ranks["vector"]
        leg_ranks["keyword"] = ranks["keyword"]
    return TriageReport(query, expected, params.variant, context, ranks, leg_ranks, depth)
