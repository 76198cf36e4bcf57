"""How much of a pool the copies take (issue 57 item 4): the documents that are mostly copies of
others (rag_experiments.corpus.copies), each run's top-k hits that lie in them, and the pool a
person or the judge would label: its passages in copy documents, and the passages whose text
repeats another passage of the same question (labelled once since golden/same_text.py).

    MLFLOW_TRACKING_URI=sqlite:////tmp/x/mlflow.db .venv/bin/python tools/copy_share.py \\
        --corpus /tmp/gitdoc/corpus --sweep PARENT_ID -k 5

Reads the runs' stored ranked lists (run.trec); writes nothing.
"""

from __future__ import annotations

import argparse
from collections import Counter

from rag_experiments.corpus.copies import find_copies
from rag_experiments.corpus.loader import load_corpus
from rag_experiments.golden.label import Pair
from rag_experiments.golden.same_text import split_same_text
from rag_experiments.tracking.pool import pool_runs, pooled_hits
from rag_experiments.tracking.versioned import load_ranked_lists


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="the corpus folder the runs were scored on")
    ap.add_argument("--runs", nargs="*", default=(), metavar="RUN_ID")
    ap.add_argument("--sweep", metavar="PARENT_ID")
    ap.add_argument("-k", type=int, default=5, help="pool depth and top-k (default 5)")
    ap.add_argument("--threshold", type=float, default=0.8)
    args = ap.parse_args()

    docs = load_corpus(args.corpus)
    report = find_copies(docs, args.threshold)
    copies = report.doc_ids
    print(report.line(limit=6))
    runs = pool_runs(args.runs, args.sweep)
    print(f"\ntop-{args.k} hits in copy documents, per run:")
    for r in runs:
        ranked = load_ranked_lists(r) or {}
        hits = [h for rl in ranked.values() for h in rl.hits[: args.k]]
        inside = sum(h.doc_id in copies for h in hits)
        print(f"  {r.label[:40]:40s} {inside:4d} of {len(hits):4d} ({inside / max(1, len(hits)):.0%})")

    pool, _definition = pooled_hits(runs, args.k, docs)
    passages = {(case, h["doc_id"], h["start"], h["end"]): h for case, hs in pool.items() for h in hs}
    inside = sum(key[1] in copies for key in passages)
    print(f"\npool of depth {args.k} over {len(runs)} runs: {len(passages)} distinct passages for {len(pool)} "
          f"questions; {inside} ({inside / max(1, len(passages)):.0%}) in the {len(copies)} copy documents")
    pairs = [Pair(f"{case}|{d}|{s}|{e}", case, "", h) for (case, d, s, e), h in passages.items()]
    sent, _applied, counts = split_same_text(pairs, {})
    once = counts.get("same_text_sent_once", 0)
    print(f"labels needed: {len(sent)} of {len(passages)}: {once} passages ({once / max(1, len(passages)):.0%}) "
          "repeat the text of another passage of the same question and get its verdict")
    per_doc = Counter(key[1] for key in passages if key[1] in copies)
    print("copy documents in the pool: " + ", ".join(f"{d} {n}" for d, n in per_doc.most_common(8)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
