"""Draw the reviewable stratified sample of default-strategy chunks for the demo golden set.

Run from /work/main (the embedded database lives in .rag-exp/):

    .venv/bin/python experiments/golden/authoring/sample.py

Strategy: the default chunking (heading, max_tokens 200, overlap 0, breadcrumbs) over the demo
corpus. Strata = doc_type x token bucket (<64, 64-127, 128+). Boilerplate is skipped with the
library's rule (``golden.generate.boilerplate_reason``: < 40 tokens, heading only, mostly table
punctuation, navigation lists). Allocation: proportional over doc types (largest remainder),
at least 2 per doc type, and a fixed 6 for the one-document ``errcodes`` type (it has many
chunks, but one page should not take a tenth of the set); each doc type's quota is then
spread proportionally over its token buckets. Each stratum draws with its own generator seeded
by (SEED, doc_type, bucket) over chunks sorted by id, so the draw is reproducible.

Writes ``sample.jsonl`` beside this file: chunk_id, doc_id, source_uri, doc_type, start, end,
n_tokens, text (the document span), plus the bucket.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from pathlib import Path

from rag_experiments.chunking import ChunkingParams
from rag_experiments.corpus.loader import load_corpus
from rag_experiments.db.connect import connect, resolve_database_url
from rag_experiments.embedding import load_embedder
from rag_experiments.golden.generate import allocate, boilerplate_reason
from rag_experiments.chunk_index import ingest

HERE = Path(__file__).resolve().parent
OUT = HERE / "sample.jsonl"
SEED = 20240515
N = 120
FIXED = {"errcodes": 6}
MIN_PER_TYPE = 2


def bucket(n_tokens: int) -> str:
    return "<64" if n_tokens < 64 else ("64-127" if n_tokens < 128 else "128+")


def default_chunks() -> list[dict]:
    conn = connect(resolve_database_url())
    docs = load_corpus("demo")
    rep = ingest(conn, docs, ChunkingParams("heading", 200, 0, True), load_embedder())
    rows = conn.execute(
        "SELECT chunk_id, doc_id, source_uri, doc_type, start_char, end_char, n_tokens, text "
        "FROM chunks WHERE strategy_id = %s", (rep.strategy_id,)).fetchall()
    by_id = {d.doc_id: d for d in docs}
    out = []
    for cid, did, uri, dtype, s, e, nt, text in rows:
        assert by_id[did].text[s:e] == text, f"chunk {cid} text is not its document span"
        out.append({"chunk_id": cid, "doc_id": did, "source_uri": uri, "doc_type": dtype,
                    "start": s, "end": e, "n_tokens": nt, "text": text})
    return out


def type_quotas(sizes: dict[str, int], n: int) -> dict[str, int]:
    fixed = {t: min(q, sizes[t]) for t, q in FIXED.items() if t in sizes}
    rest = {t: s for t, s in sizes.items() if t not in fixed}
    quotas = allocate(rest, n - sum(fixed.values()))
    # at least MIN_PER_TYPE each: take from the largest quotas
    for t in sorted(rest):
        while quotas[t] < min(MIN_PER_TYPE, rest[t]):
            donor = max(quotas, key=lambda k: (quotas[k], k))
            quotas[donor] -= 1
            quotas[t] += 1
    return {**quotas, **fixed}


def main() -> None:
    chunks = sorted(default_chunks(), key=lambda c: c["chunk_id"])
    skipped: Counter = Counter()
    strata: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for c in chunks:
        reason = boilerplate_reason(c)
        if reason:
            skipped[reason] += 1
            continue
        strata[(c["doc_type"], bucket(c["n_tokens"]))].append(c)
    per_type = Counter()
    for (t, _), v in strata.items():
        per_type[t] += len(v)
    tq = type_quotas(dict(per_type), N)
    picked: list[dict] = []
    report = []
    for t in sorted(tq):
        keys = sorted(k for k in strata if k[0] == t)
        bq = allocate({k: len(strata[k]) for k in keys}, tq[t])
        for k in keys:
            rng = random.Random(f"{SEED}|{k[0]}|{k[1]}")
            take = sorted(rng.sample(strata[k], bq.get(k, 0)), key=lambda c: c["chunk_id"])
            picked.extend({**c, "bucket": k[1]} for c in take)
            report.append(f"  {k[0]:<10} {k[1]:>7}: eligible {len(strata[k]):>4}, taken {bq.get(k, 0)}")
    with open(OUT, "w", encoding="utf-8") as fh:
        for c in picked:
            fh.write(json.dumps(c, ensure_ascii=False) + "\n")
    print(f"{len(chunks)} chunks; skipped {dict(skipped)}; sampled {len(picked)} -> {OUT}")
    print("\n".join(report))


if __name__ == "__main__":
    main()
