"""Near-miss labels for the demo golden set: manual YES / PART / NO on retrieved passages.

Two steps, run from /work/main:

    # 1. (needs the embedded database) pick the labelled cases, run the default hybrid retrieval
    #    (heading-200-breadcrumbs chunks, top 5) and write every hit that is NOT already relevant
    #    under the overlap rule to near_miss_candidates.jsonl, with its text, for reading:
    .venv/bin/python experiments/golden/authoring/label_near_misses.py candidates

    # 2. (no database) turn the hand-written verdicts in near_miss_labels.jsonl into
    #    ``judgement`` records appended to experiments/golden/demo.jsonl (only new ids):
    .venv/bin/python experiments/golden/authoring/label_near_misses.py apply

Case selection (deterministic): per doc type, ~30% of its cases (at least 4), drawn with a
generator seeded by (SEED, doc_type) from the cases sorted by id, kinds alternating so both
kinds are represented. "Near-miss" = a top-5 hit that does not match the case's evidence
under ``span_match.matches`` (overlap >= 50% of the span or of the chunk).

Each line of near_miss_labels.jsonl: {"case_id", "chunk_id", "doc_id", "start", "end",
"verdict": "YES"|"PART"|"NO", "reason"}. The verdicts were written by reading each passage
against its question (YES only when the passage alone answers the question).
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

from rag_experiments.corpus.loader import load_corpus
from rag_experiments.span_match import matches
from rag_experiments.golden.build import span_json
from rag_experiments.golden.records import VERDICTS, new_id
from rag_experiments.golden.golden_file import GoldenFile

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
GOLDEN = ROOT / "experiments" / "golden" / "demo.jsonl"
CANDIDATES = HERE / "near_miss_candidates.jsonl"
LABELS = HERE / "near_miss_labels.jsonl"
SEED = 7
SHARE = 0.3
MIN_PER_TYPE = 4
TOP_K = 5
# kind "agent": an AI coding agent made these calls, not a person (the first apply wrote "human";
# reattribute_agent_judgements.py appended the correction). Ids keep the literal "human" below, so
# a rerun still recognises the judgements already in the file.
JUDGE = {"kind": "agent", "name": "AI coding agent (Claude), manual review in a development session",
         "prompt_version": "manual-v1"}


def select_cases(cases: list[dict]) -> list[dict]:
    by_type: dict[str, list[dict]] = defaultdict(list)
    for c in sorted(cases, key=lambda c: c["id"]):
        by_type[c["doc_type"]].append(c)
    picked = []
    for t in sorted(by_type):
        pool = by_type[t]
        n = min(len(pool), max(MIN_PER_TYPE, math.ceil(SHARE * len(pool))))
        rng = random.Random(f"{SEED}|{t}")
        kinds = {k: [c for c in pool if c["kind"] == k] for k in ("paraphrase", "exact")}
        for lst in kinds.values():
            rng.shuffle(lst)
        order = ["paraphrase", "exact"] if rng.random() < 0.5 else ["exact", "paraphrase"]
        take: list[dict] = []
        i = 0
        while len(take) < n and any(kinds.values()):
            k = order[i % 2]
            if kinds[k]:
                take.append(kinds[k].pop())
            i += 1
        picked.extend(take)
    return picked


def candidates() -> None:
    from rag_experiments.chunking import ChunkingParams
    from rag_experiments.db.connect import connect, resolve_database_url
    from rag_experiments.embedding import load_embedder
    from rag_experiments.retrieval.retriever import RetrievalParams, Retriever
    from rag_experiments.chunk_index import ingest, strategy_info

    records = GoldenFile(GOLDEN).read()
    cases = select_cases([r for r in records if r["type"] == "case"])
    conn = connect(resolve_database_url())
    docs = load_corpus("demo")
    emb = load_embedder()
    rep = ingest(conn, docs, ChunkingParams("heading", 200, 0, True), emb)
    retriever = Retriever(conn, strategy_info(conn, rep.strategy_id), emb, RetrievalParams(variant="hybrid"))
    ranked = retriever.search_many([c["query"] for c in cases], limit=TOP_K)
    texts = retriever.chunk_texts([h.chunk_id for r in ranked for h in r.hits])
    out, found = [], 0
    for case, rl in zip(cases, ranked):
        ev = case["evidence"][0]
        hit_found = False
        for h in rl.hits:
            if matches(h.doc_id, h.start, h.end, ev["doc_id"], ev["start"], ev["end"]):
                hit_found = True
                continue
            out.append({"case_id": case["id"], "kind": case["kind"], "doc_type": case["doc_type"],
                        "query": case["query"], "evidence_doc": ev["doc_id"], "evidence_quote": ev["quote"],
                        "rank": h.rank, "chunk_id": h.chunk_id, "doc_id": h.doc_id, "start": h.start,
                        "end": h.end, "text": texts[h.chunk_id]})
        found += hit_found
    with open(CANDIDATES, "w", encoding="utf-8") as fh:
        for row in out:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(cases)} cases selected ({dict(Counter(c['kind'] for c in cases))}; "
          f"{dict(Counter(c['doc_type'] for c in cases))}); evidence in top {TOP_K} for {found}; "
          f"{len(out)} near-misses -> {CANDIDATES}")


def apply() -> None:
    gf = GoldenFile(GOLDEN)
    records = gf.read()
    case_ids = {r["id"] for r in records if r["type"] == "case"}
    existing = {r["id"] for r in records}
    docs = {d.doc_id: d for d in load_corpus("demo")}
    new = []
    labels = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines() if line.strip()]
    for n, lab in enumerate(labels, start=1):
        where = f"near_miss_labels.jsonl:{n}"
        if lab["case_id"] not in case_ids:
            raise SystemExit(f"{where}: unknown case {lab['case_id']}")
        if lab["verdict"] not in VERDICTS:
            raise SystemExit(f"{where}: verdict must be YES, PART or NO")
        if not str(lab.get("reason", "")).strip():
            raise SystemExit(f"{where}: a reason is required")
        doc = docs[lab["doc_id"]]
        rec = {
            "type": "judgement",
            "id": new_id("j", lab["case_id"], lab["doc_id"], lab["start"], lab["end"], "human", JUDGE["name"],
                         JUDGE["prompt_version"]),
            "case_id": lab["case_id"],
            "span": span_json(doc, int(lab["start"]), int(lab["end"])),
            "verdict": lab["verdict"],
            "reason": lab["reason"],
            "judge": JUDGE,
        }
        if rec["id"] not in existing:
            existing.add(rec["id"])
            new.append(rec)
    gf.append(new)
    print(f"{len(labels)} labels ({dict(Counter(l['verdict'] for l in labels))}) on "
          f"{len({l['case_id'] for l in labels})} cases; appended {len(new)} new judgements to {GOLDEN}")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "candidates":
        candidates()
    elif cmd == "apply":
        apply()
    else:
        sys.exit(__doc__)
