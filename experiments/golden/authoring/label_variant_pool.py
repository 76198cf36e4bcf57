"""The demo golden set, fairly: judge the pool of the four variants' top 5 (issue 29).

The near-misses first judged (label_near_misses.py) came from one variant's top 5 (hybrid) for
76 of the 230 cases, so most chunks the other variants rank high carry no label and count as
misses. This pools the top 5 of the four runs of `experiment=compare_variants` (vector,
keyword, hybrid, hybrid_rerank) exactly as `rag-exp golden label --sweep PARENT -k 5` would
(same pooling, same skips: hits evaluation already credits, spans already judged), and has
the pairs judged by AI coding agents reading each passage against its question (no API
call), recorded as `agent` judgements with the pool in their provenance.

    # 1. (database not needed; the runs' stored ranked lists) the pairs to judge, in shards:
    .venv/bin/python experiments/golden/authoring/label_variant_pool.py candidates PARENT_ID [SHARDS]
    # 2. judged by hand into pool_labels/shard-NN.jsonl:
    #    {"key", "verdict": "YES"|"PART"|"NO", "reason"} per line, one per candidate
    # 3. append the judgements (only new ids; the golden set is append-only):
    .venv/bin/python experiments/golden/authoring/label_variant_pool.py apply

The rubric is the LLM judge's (rag_experiments/golden/label.py SYSTEM_PROMPT): YES when the
passage alone answers the question, PART when it answers part of it or gives information the
answer needs, NO otherwise (same topic, different question is NO); from the passage only.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.golden.label import judgement_record
from rag_experiments.golden.records import VERDICTS, new_id

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
GOLDEN = ROOT / "experiments" / "golden" / "demo.jsonl"
OUT = HERE / "pool_candidates"
LABELS = HERE / "pool_labels"
K = 5
JUDGE = {"kind": "agent", "name": "AI coding agents (Claude subagents), manual review in a development session",
         "prompt_version": "pool-manual-v1"}


def candidates(parent: str, shards: int = 8) -> None:
    from rag_experiments.corpus.loader import load_corpus
    from rag_experiments.golden.label import plan_labelling
    from rag_experiments.golden.resolve import load_golden
    from rag_experiments.tracking.pool import pool_runs, pooled_hits

    runs = pool_runs((), parent)
    hits, definition = pooled_hits(runs, K, load_corpus("demo"))
    definition["sweep"] = parent
    golden = load_golden(GOLDEN)
    by_query = {c.query: hits.get(c.case_id, []) for c in golden.cases}
    plan = plan_labelling(GOLDEN, lambda q: by_query.get(q, []), k=10**9, pool=definition)
    cases = {c.case_id: c for c in golden.cases}
    rows = []
    for job in plan.jobs:
        p = job.payload
        case = cases[p["case_id"]]
        rows.append({"key": job.key, "case_id": case.case_id, "kind": case.kind, "query": case.query,
                     "passage": p["hit"]["text"], "hit": p["hit"], "pool": p["pool"]})
    OUT.mkdir(exist_ok=True)
    for i in range(shards):
        part = rows[i::shards]
        (OUT / f"shard-{i:02d}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part),
                                                   encoding="utf-8")
    print(f"{len(rows)} pairs to judge ({dict(Counter(r['kind'] for r in rows))}) over "
          f"{len({r['case_id'] for r in rows})} cases; skipped {plan.skipped}; -> {OUT}/shard-*.jsonl")


def apply() -> None:
    gf = GoldenFile(GOLDEN)
    existing = {r["id"] for r in gf.read()}
    wanted = {}
    for path in sorted(OUT.glob("shard-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            wanted[row["key"]] = row
    labels = {}
    for path in sorted(LABELS.glob("shard-*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path.name}:{n}"
            lab = json.loads(line)
            if lab.get("key") not in wanted:
                raise SystemExit(f"{where}: unknown pair {lab.get('key')!r}")
            if lab.get("verdict") not in VERDICTS:
                raise SystemExit(f"{where}: verdict must be YES, PART or NO, got {lab.get('verdict')!r}")
            if not str(lab.get("reason", "")).strip():
                raise SystemExit(f"{where}: a reason is required")
            labels[lab["key"]] = lab
    missing = [k for k in wanted if k not in labels]
    if missing:
        raise SystemExit(f"{len(missing)} of {len(wanted)} pairs have no label yet (first: {missing[0]})")
    new = []
    for key, row in wanted.items():
        lab = labels[key]
        rec = judgement_record(row["case_id"], row["hit"], lab["verdict"], " ".join(lab["reason"].split())[:500],
                               model="", pool=row["pool"])
        rec["judge"] = JUDGE
        rec["id"] = new_id("j", row["case_id"], row["hit"]["doc_id"], row["hit"]["start"], row["hit"]["end"],
                           "agent", JUDGE["name"], JUDGE["prompt_version"])
        if rec["id"] not in existing:
            existing.add(rec["id"])
            new.append(rec)
    gf.append(new)
    print(f"{len(labels)} labels ({dict(Counter(l['verdict'] for l in labels.values()))}); appended {len(new)} "
          f"new judgements to {GOLDEN}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["candidates"]:
        candidates(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 8)
    elif sys.argv[1:2] == ["apply"]:
        apply()
    else:
        raise SystemExit(__doc__)
