"""Append the hand-written demo cases (cases.jsonl) to experiments/golden/demo.jsonl.

Run from /work/main (no database needed):

    .venv/bin/python experiments/golden/authoring/build_golden.py

Each line of cases.jsonl becomes one ``case`` record built with
``golden.build.case_record``: the quote is located (uniquely) in its document, and must lie
inside the sampled chunk it was written from (sample.jsonl). Only records whose id is not yet
in the golden file are appended, so re-running is harmless. GoldenFile.append is the only
writer (hash chain + manifest).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from rag_experiments.corpus.loader import load_corpus
from rag_experiments.golden.build import case_record
from rag_experiments.golden.golden_file import GoldenFile

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
GOLDEN = ROOT / "experiments" / "golden" / "demo.jsonl"

PROVENANCE = {
    "method": "agent",
    "author": "AI coding agent (Claude) in a development session; no API call",
    "prompt_version": "gen-v1",
    "rubric": "two questions the passage alone answers: paraphrase in user vocabulary; exact with a verbatim identifier",
    "chunking": "heading-200-breadcrumbs",
}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def build_records() -> list[dict]:
    docs = {d.doc_id: d for d in load_corpus("demo")}
    chunks = {c["chunk_id"]: c for c in read_jsonl(HERE / "sample.jsonl")}
    records = []
    for n, case in enumerate(read_jsonl(HERE / "cases.jsonl"), start=1):
        where = f"cases.jsonl:{n}"
        chunk = chunks.get(case["chunk_id"])
        if chunk is None or chunk["doc_id"] != case["doc_id"]:
            raise SystemExit(f"{where}: chunk {case['chunk_id']} is not a sampled chunk of {case['doc_id']}")
        kind = case["kind"]
        identifier = case.get("identifier") if kind == "exact" else None
        if kind == "exact" and not (identifier and identifier in case["quote"] and identifier in case["query"]):
            raise SystemExit(f"{where}: exact case needs an identifier found verbatim in quote and query")
        rec = case_record(docs[case["doc_id"]], case["quote"], case["query"], kind,
                          {**PROVENANCE, "source_chunk": case["chunk_id"]}, identifier=identifier)
        ev = rec["evidence"][0]
        if not (chunk["start"] <= ev["start"] and ev["end"] <= chunk["end"]):
            raise SystemExit(f"{where}: the quote is not inside its source chunk {case['chunk_id']}")
        records.append(rec)
    ids = Counter(r["id"] for r in records)
    dup = [i for i, c in ids.items() if c > 1]
    if dup:
        raise SystemExit(f"duplicate case ids (same query and span): {dup}")
    return records


def main() -> None:
    records = build_records()
    gf = GoldenFile(GOLDEN)
    existing = {r["id"] for r in gf.read()} if gf.exists() else set()
    new = [r for r in records if r["id"] not in existing]
    gf.append(new)
    print(f"{len(records)} cases in cases.jsonl; appended {len(new)} new to {GOLDEN}")
    print("by kind:", dict(Counter(r["kind"] for r in records)))
    print("by doc_type:", dict(Counter(r["doc_type"] for r in records)))
    print("source chunks:", len({r["provenance"]["source_chunk"] for r in records}))


if __name__ == "__main__":
    sys.exit(main())
