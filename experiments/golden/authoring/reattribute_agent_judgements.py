"""Correct the provenance of the demo near-miss judgements (issue 12), append-only.

The 320 near-miss judgements appended by ``label_near_misses.py apply`` were made by an AI
coding agent (Claude) in a development session, but were recorded with ``judge.kind: human``.
That made them count as human labels: runs reported ``labels_validated: no-llm-labels`` and
``resolve`` let them beat later LLM labels. The golden set is append-only, so the lines stay as
they are; this script appends, for each of them, a judgement with the same case, span and
verdict, ``judge.kind: agent``, ``supersedes`` = the old id and a ``reason``. The original
verdict rationale is kept as ``verdict_reason``. Running it again appends nothing.

    .venv/bin/python experiments/golden/authoring/reattribute_agent_judgements.py
"""

from __future__ import annotations

from pathlib import Path

from rag_experiments.golden.records import new_id
from rag_experiments.golden.golden_file import GoldenFile

GOLDEN = Path(__file__).resolve().parents[1] / "demo.jsonl"
AGENT_NAME = "AI coding agent (Claude), manual review in a development session"
REASON = ("provenance correction (issue 12): this verdict was made by an AI coding agent (Claude) in a "
          "development session, not by a human, but was recorded as judge.kind 'human'. Same verdict, "
          "re-recorded as judge.kind 'agent' so it counts as an unvalidated machine label until a human "
          "spot-check passes.")
CORRECTED_BY = "AI coding agent (Claude), engineering session trust-secrets (issue 12)"


def corrections(records: list[dict]) -> list[dict]:
    superseded = {r["supersedes"] for r in records if r["type"] == "judgement" and r.get("supersedes")}
    ids = {r["id"] for r in records}
    out = []
    for r in records:
        if (r["type"] != "judgement" or r["id"] in superseded or r["judge"].get("kind") != "human"
                or r["judge"].get("name") != AGENT_NAME):
            continue
        rec = {
            "type": "judgement",
            "id": new_id("j", r["id"], "reattributed-to-agent"),
            "case_id": r["case_id"],
            "span": r["span"],
            "verdict": r["verdict"],
            "judge": {**r["judge"], "kind": "agent"},
            "supersedes": r["id"],
            "reason": REASON,
            "verdict_reason": r.get("reason", ""),
            "corrected_by": CORRECTED_BY,
        }
        if rec["id"] not in ids:
            out.append(rec)
    return out


def main() -> None:
    gf = GoldenFile(GOLDEN)
    new = corrections(gf.read())
    gf.append(new)
    print(f"appended {len(new)} superseding agent judgements to {GOLDEN}")


if __name__ == "__main__":
    main()
