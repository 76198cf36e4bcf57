"""The leakage bar of golden-case generation (:mod:`.generate` holds a question over its kind's bar
and asks once for a rewrite): how much of a question its evidence gives away, the bars, and the
kept / rewritten / dropped counts read from the generation and rewrite logs.

Default bars, from the demo set (118 paraphrase, 112 exact questions written by an agent):
paraphrase mean overlap 0.33 (p75 0.44, p90 0.57; 19 over 0.5), exact without the identifier mean
0.50 (p75 0.75; 19 at 1.0). ``paraphrase`` 0.5: the quality report's warning level; a generated set
averaging 0.55 scored recall 0.746 where hand-written questions (0.11) scored 0.385
(lossless-claude/lcm#358). ``exact`` 0.75: above it nearly every word beside the identifier is the
passage's own. Other kinds have no bar unless one is given.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from statistics import fmean
from typing import Iterable

from ..errors import ConfigError
from .llm_jobs import Checkpoint, checkpoint_path, read_state
from .quality import content_words

LEAKAGE_BARS: dict[str, float] = {"paraphrase": 0.5, "exact": 0.75}  # see the module docstring


def leak_words(question: str, identifier: str | None) -> set[str]:
    """The question's content words that count toward its leakage (an identifier's own words left out)."""
    words = content_words(question)
    return words - content_words(identifier) if identifier else words


def leakage(question: str, evidence: str, identifier: str | None = None) -> float | None:
    """The share of the question's content words found in its evidence (the quality report's
    :func:`~rag_experiments.golden.quality.overlap`), leaving out the identifier's own words when
    ``identifier`` is given (an exact question shares them by design). None: nothing to measure."""
    words = leak_words(question, identifier)
    if not words:
        return None
    return len(words & content_words(evidence)) / len(words)


def parse_bars(specs: Iterable[str] | None, base: dict[str, float] | None = None) -> dict[str, float]:
    """``["paraphrase=0.4", "exact=off"]`` over :data:`LEAKAGE_BARS` (``off`` or ``none``: no bar
    for that kind). Raises ConfigError naming the bad item."""
    bars = dict(LEAKAGE_BARS if base is None else base)
    for spec in specs or ():
        kind, sep, value = str(spec).partition("=")
        kind, value = kind.strip(), value.strip()
        if not sep or not kind:
            raise ConfigError(f"--leakage-bar: {spec!r} is not KIND=VALUE",
                              hint="for example --leakage-bar paraphrase=0.4 (a share 0..1, or off)")
        if value.lower() in ("off", "none"):
            bars.pop(kind, None)
            continue
        try:
            bar = float(value)
        except ValueError:
            bar = float("nan")
        if not 0 <= bar <= 1:
            raise ConfigError(f"--leakage-bar: {kind}={value!r} is not a share between 0 and 1 (or off)",
                              hint="for example --leakage-bar paraphrase=0.4")
        bars[kind] = bar
    return bars


def leakage_counts(golden_path: str | Path) -> dict[str, dict]:
    """Per kind, over the golden set's generation and rewrite logs: ``generated``, ``kept`` (at or
    under the bar), ``rewritten``, ``dropped``, ``pending`` (held, rewrite not answered yet),
    ``unchecked`` (answers from before the bar), and the mean overlap ``before`` (of every generated
    question as first written) and ``after`` (of the questions that went into the set)."""
    state = read_state(Checkpoint(checkpoint_path(golden_path, "generate")))
    rstate = read_state(Checkpoint(checkpoint_path(golden_path, "rewrite")))
    latest: dict[str, dict] = {}
    for e in state.entries:
        if e.get("event") == "item" and e.get("status") == "done":
            latest[e["key"]] = e
    outcome: dict[str, dict] = {}
    for e in rstate.entries:
        if e.get("event") == "item" and e.get("status") == "done":
            outcome[e["key"]] = e
    rows: dict[str, dict] = {}
    before: dict[str, list[float]] = defaultdict(list)
    after: dict[str, list[float]] = defaultdict(list)

    def row(kind: str) -> dict:
        return rows.setdefault(kind, dict.fromkeys(("generated", "kept", "rewritten", "dropped", "pending",
                                                    "unchecked"), 0))

    for e in latest.values():
        if "leakage" not in e:
            for rec in e.get("records") or ():
                row(rec["kind"])["unchecked"] += 1
            continue
        for rec in e.get("records") or ():
            r = row(rec["kind"])
            r["generated"] += 1
            r["kept"] += 1
            value = (rec["provenance"].get("leakage") or {}).get("overlap")
            if value is not None:
                before[rec["kind"]].append(value)
                after[rec["kind"]].append(value)
        for held in e["leakage"].get("held") or ():
            kind = held["case"]["kind"]
            r = row(kind)
            r["generated"] += 1
            before[kind].append(held["overlap"])
            done = outcome.get(held["case"]["id"])
            if done is None:
                r["pending"] += 1
            elif done.get("outcome") == "rewritten":
                r["rewritten"] += 1
                if done.get("overlap_after") is not None:
                    after[kind].append(done["overlap_after"])
            else:
                r["dropped"] += 1
    for kind, r in rows.items():
        r["overlap_before"] = round(fmean(before[kind]), 3) if before[kind] else None
        r["overlap_after"] = round(fmean(after[kind]), 3) if after[kind] else None
    return dict(sorted(rows.items()))


def leakage_lines(counts: dict[str, dict]) -> list[str]:
    def num(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.2f}"

    out = []
    for kind, r in counts.items():
        line = (f"{kind}: {r['generated']} generated, {r['kept']} kept, {r['rewritten']} rewritten, "
                f"{r['dropped']} dropped; mean overlap {num(r['overlap_before'])} -> {num(r['overlap_after'])}")
        if r["pending"]:
            line += f"; {r['pending']} awaiting a rewrite (API errors: rerun)"
        if r["unchecked"]:
            line += f"; {r['unchecked']} from before the bar (unchecked)"
        out.append(line)
    return out
