"""Which corpus chunks golden-case generation asks about: a stratified sample over document type x
token bucket, boilerplate skipped (:mod:`.generate` prompts for each chunk it picks).

Sampling skip rule (:func:`boilerplate_reason`, first match wins), documented because it shapes
the golden set:

* ``too_short``: fewer than :data:`MIN_TOKENS` (40) tokens: stubs, lone sentences, fragments.
* ``heading_only``: every non-blank line is a Markdown heading (ATX ``#`` or setext underline).
* ``table_punctuation``: letters and digits are under half of the non-space characters
  (table rules ``|---|---|``, ASCII art, separator rows).
* ``navigation``: at least 3 non-heading lines and >= 70% of them are navigation lines: a
  (bulleted) line that is only links (Markdown ``[x](y)`` or HTML ``<a>``) plus at most 3 other
  words, or only navigation words (prev, next, up, home, contents, index, top) and separators.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

MIN_TOKENS = 40
TOKEN_BUCKETS = (64, 128, 256)  # bucket edges: <64, 64-127, 128-255, 256+
NAV_SHARE = 0.7


_HEADING = re.compile(r"^#{1,6}(\s|$)")
_SETEXT = re.compile(r"^(=+|-+)$")
_BULLET = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
_MD_LINK = re.compile(r"!?\[[^\]]*\]\([^)]*\)")
_HTML_LINK = re.compile(r"<a\b[^>]*>.*?</a>", re.IGNORECASE)
_NAV_WORDS = re.compile(r"^(?:(?:prev(?:ious)?|next|up|home|top|contents|index|back)\b[\s|/·•:,>»«<-]*)+$",
                        re.IGNORECASE)
_WORD = re.compile(r"\w+")


def token_bucket(n_tokens: int) -> str:
    """``<64``, ``64-127``, ``128-255`` or ``256+``."""
    lo = 0
    for edge in TOKEN_BUCKETS:
        if n_tokens < edge:
            return f"<{edge}" if lo == 0 else f"{lo}-{edge - 1}"
        lo = edge
    return f"{lo}+"


def _is_nav_line(line: str) -> bool:
    body = _BULLET.sub("", line)
    if _NAV_WORDS.match(body):
        return True
    stripped, n_links = _MD_LINK.subn(" ", body)
    stripped, n_html = _HTML_LINK.subn(" ", stripped)
    return (n_links + n_html) > 0 and len(_WORD.findall(stripped)) <= 3


def boilerplate_reason(chunk: dict) -> str | None:
    """Why a chunk is not worth a question (see the module docstring), or None if it is."""
    if int(chunk["n_tokens"]) < MIN_TOKENS:
        return "too_short"
    text = chunk["text"]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    body = [ln for ln in lines if not _HEADING.match(ln) and not _SETEXT.match(ln)]
    if not body:
        return "heading_only"
    nonspace = [ch for ch in text if not ch.isspace()]
    if sum(ch.isalnum() for ch in nonspace) < 0.5 * len(nonspace):
        return "table_punctuation"
    if len(body) >= 3 and sum(_is_nav_line(ln) for ln in body) >= NAV_SHARE * len(body):
        return "navigation"
    return None


@dataclass(frozen=True)
class SampleResult:
    chunks: tuple[dict, ...]
    skipped: dict[str, int]  # boilerplate reason -> chunks skipped
    strata: dict[tuple[str, str], tuple[int, int]]  # (doc_type, bucket) -> (eligible, taken)


def allocate(sizes: dict[Any, int], n: int) -> dict[Any, int]:
    """Proportional allocation of ``n`` over strata by largest remainder, at least 1 per
    non-empty stratum, never more than a stratum holds. With more strata than ``n`` every
    stratum still gets one (the sample is then larger than ``n``)."""
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    exact = {k: n * s / total for k, s in sizes.items()}
    quota = {k: min(s, max(1, math.floor(exact[k]))) for k, s in sizes.items() if s > 0}
    keys = sorted(quota)
    while sum(quota.values()) < n:
        room = [k for k in keys if quota[k] < sizes[k]]
        best = max(room, key=lambda k: (exact[k] - quota[k], -keys.index(k)))
        quota[best] += 1
    while sum(quota.values()) > n:
        over = [k for k in keys if quota[k] > 1]
        if not over:
            break
        worst = min(over, key=lambda k: (exact[k] - quota[k], keys.index(k)))
        quota[worst] -= 1
    return quota


def stratified_sample(chunks: Iterable[dict], n: int = 150, seed: int = 13) -> SampleResult:
    """Stratified sample over doc_type x token bucket (see :func:`allocate`), boilerplate skipped.

    Reproducible: input order does not matter (chunks are sorted by id) and each stratum draws
    with its own generator seeded by ``(seed, doc_type, bucket)``, so adding a document type
    leaves the other strata's draws unchanged.
    """
    skipped: Counter = Counter()
    strata: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for chunk in sorted(chunks, key=lambda c: str(c["chunk_id"])):
        reason = boilerplate_reason(chunk)
        if reason:
            skipped[reason] += 1
            continue
        strata[(str(chunk["doc_type"]), token_bucket(int(chunk["n_tokens"])))].append(chunk)
    quotas = allocate({k: len(v) for k, v in strata.items()}, n)
    picked: list[dict] = []
    for key in sorted(strata):
        rng = random.Random(f"{seed}|{key[0]}|{key[1]}")
        picked.extend(sorted(rng.sample(strata[key], quotas[key]), key=lambda c: str(c["chunk_id"])))
    return SampleResult(tuple(picked), dict(skipped),
                        {k: (len(v), quotas[k]) for k, v in sorted(strata.items())})


def sample_chunks(chunks: Iterable[dict], n: int = 150, seed: int = 13) -> list[dict]:
    """The chunks of :func:`stratified_sample` (ordered by stratum, then chunk id)."""
    return list(stratified_sample(chunks, n, seed).chunks)
