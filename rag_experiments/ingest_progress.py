"""What an ingest says while it works (issue 58 item 2): one total estimate before it starts, a
line when each phase starts and ends (embedding has its own bar), and, on Ctrl-C, one line saying
what is kept and that re-running resumes.

Only the standard library: :mod:`rag_experiments.chunk_index` drives it; lines go to stderr, so a
command's own output (the ingest summary, a table) stays clean on stdout.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

# Seconds per chunk of the phases after embedding, measured on the 2-core machine this project is
# developed on (2026-12-06, loaded): the demo (3,095 chunks) 1 / 4 / 2 / 0.8 s and a synthetic
# 10,500-chunk corpus in a database holding four other strategies 3 / 10 / 5 / 1 s for writing,
# keyword index, vector index and settle (docs/reference/performance.md "Ingest phases"). They scale
# an estimate, they do not promise one: the closing line prints the actual time.
WRITE_S_PER_CHUNK = 0.0003  # chunk rows with their vectors, the tsvector and identifier GIN entries
KEYWORD_S_PER_CHUNK = 0.0012  # BM25 postings, frequencies and packs
VECTOR_S_PER_CHUNK = 0.0006  # the HNSW build (m 16, ef_construction 64)
SETTLE_S_PER_CHUNK = 0.0002  # GIN pending lists merged, BM25 tables vacuumed, ANALYZE


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class IngestEstimate:
    """The time an ingest is about to take, by phase, from measured rates."""

    chunks: int  # chunks to write (extrapolated from the first group's when there are several)
    to_embed: int  # of which texts not in the embedding cache (nor shipped with the demo)
    embed_rate: float | None  # texts/s of one model call just now; None: not measured (see ``local``)
    local: bool = True  # this process embeds (False: an API or a cluster, whose time is theirs)

    @property
    def embedding_s(self) -> float | None:
        if not self.to_embed:
            return 0.0
        if self.embed_rate:
            return self.to_embed / self.embed_rate
        return 0.0 if self.local else None  # local and unmeasured: too few texts to be worth a probe

    @property
    def phases(self) -> dict[str, float]:
        return {"writing chunks": self.chunks * WRITE_S_PER_CHUNK, "keyword index": self.chunks * KEYWORD_S_PER_CHUNK,
                "vector index": self.chunks * VECTOR_S_PER_CHUNK, "settle": self.chunks * SETTLE_S_PER_CHUNK}

    @property
    def total_s(self) -> float | None:
        e = self.embedding_s
        return None if e is None else e + sum(self.phases.values())

    def line(self, strategy: str, groups: int) -> str:
        index_s = sum(self.phases.values())
        e = self.embedding_s
        about = "" if groups == 1 else " (about: counted on the first of the groups)"
        if not self.to_embed:
            embedding = "nothing to embed (all cached)"
        elif e is None:
            embedding = f"embedding {self.to_embed:,} texts (time: the provider's)"
        elif not self.embed_rate:
            embedding = f"embedding {self.to_embed:,} texts (seconds)"
        else:
            embedding = f"embedding {self.to_embed:,} texts ~{_duration(e)} at {self.embed_rate:.1f} texts/s"
        total = f"~{_duration(self.total_s)} in all" if self.total_s is not None else "index build"
        return (f"ingest {strategy}: {self.chunks:,} chunks{about}; {total}: {embedding}, then the keyword and "
                f"vector indexes ~{_duration(index_s)}")


@dataclass
class IngestProgress:
    """Phase lines on stderr (when ``enabled``) and what the Ctrl-C line needs to know."""

    strategy: str
    enabled: bool = True
    phase: str = "starting"
    embedded: int = 0  # texts embedded (and committed to the cache) by this ingest so far
    committed: bool = False  # the strategy's write transaction committed
    estimate: IngestEstimate | None = None
    started: float = field(default_factory=time.perf_counter)
    _phase_started: float = 0.0

    def say(self, text: str) -> None:
        if self.enabled:
            print(text, file=sys.stderr, flush=True)

    def begin(self, phase: str, detail: str = "") -> None:
        self.phase = phase
        self._phase_started = time.perf_counter()
        expected = self.estimate.phases.get(phase) if self.estimate else None
        tail = f" (expected ~{_duration(expected)})" if expected and expected >= 5 else ""
        self.say(f"  {phase}: {detail}{tail} ..." if detail else f"  {phase}{tail} ...")

    def end(self) -> float:
        seconds = time.perf_counter() - self._phase_started
        self.say(f"  {self.phase}: done in {_duration(seconds) if seconds >= 1 else f'{seconds:.1f} s'}")
        return seconds

    def count_embedded(self, n: int) -> None:
        self.embedded += n

    def finish(self) -> None:
        actual = time.perf_counter() - self.started
        planned = self.estimate.total_s if self.estimate else None
        against = f" (estimated ~{_duration(planned)} before it started)" if planned else ""
        self.say(f"ingest {self.strategy}: done in {_duration(actual)}{against}")

    def interrupted_line(self) -> str:
        """The one line printed on Ctrl-C: what is kept, and that re-running resumes."""
        kept = (f"the {self.embedded:,} texts embedded before the stop are kept in the embedding cache"
                if self.embedded else "every vector embedded before is kept in the embedding cache")
        if self.committed:
            return (f"interrupted while {self.phase} of {self.strategy}: the strategy is written and usable; "
                    "the database settles by itself (autovacuum)")
        return (f"interrupted while {self.phase} of {self.strategy}: {kept}; nothing of the strategy was written "
                "(its transaction rolled back); run the same command again to resume: only what is missing is embedded")


class IngestInterrupted(KeyboardInterrupt):
    """Ctrl-C during an ingest, carrying the line that says what is kept (the CLI prints it, exit 130)."""
