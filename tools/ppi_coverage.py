"""Coverage of the judge-corrected intervals (rag_experiments.stats.ppi), simulated on Cranfield.

Cranfield (1,400 abstracts, 225 queries, every pair people judged) gives the truth. Two
retrieval runs computed here without a database (BM25 as Lucene computes it, k1 0.9, b 0.4, and
a TF-IDF cosine run) rank the abstracts; the pool is the union of their top ``--pool-depth``
(as the demo's pool is the union of its variants' top 5). A simulated judge with a known
true-positive rate (TPR) and true-negative rate (TNR) labels the pool: a relevant pair is called
relevant with probability TPR (keeping its grade), a non-relevant pair relevant (grade 1) with
probability 1 - TNR. As in a golden set, each query keeps its best-graded relevant document as
its author-written evidence (never pooled), and Cranfield's other judgements outside the pool
stay people's; only the pool is the machine's.

Per repetition: a golden set of N cases is drawn from the queries with replacement (so the
bootstrap's and the estimator's population is the queries, and the truth is each metric's mean
over all queries under Cranfield's labels); every pooled pair is judged by the simulated judge;
people "relabel" a random sample of cases (all their pooled pairs: the case equivalent of 30,
100, 200 and 300 pairs, at the mean pool size per case). Reported per judge, number of human
labels and metric: how often the corrected 95% interval (plain PPI, what runs log; PPI++ beside
it) covers the truth, how
often the uncorrected bootstrap interval over the machine-labelled cases does, and the paired
difference (TF-IDF - BM25) the same way.

    .venv/bin/python tools/ppi_coverage.py                    # 200 repetitions (a few minutes)
    .venv/bin/python tools/ppi_coverage.py --reps 20 --quick  # a smoke run
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag_experiments.evaluation import metrics as M  # noqa: E402
from rag_experiments.stats.bootstrap import bootstrap_interval  # noqa: E402
from rag_experiments.stats.ppi import MIN_CASES, ppi_mean  # noqa: E402

METRICS = (("recall_at_5", M.recall_at_k, 5), ("recall_at_20", M.recall_at_k, 20),
           ("mrr_at_10", M.reciprocal_rank, 10), ("ndcg_at_10", M.ndcg_at_k, 10))
JUDGES = ((0.9, 0.95), (0.7, 0.98))
PAIRS = (30, 100, 200, 300)
STOP = set("a an and are as at be by for from has have how in is it its of on or that the this to was were what "
           "which with can does do there any been being into than then these those such".split())


def find_cranfield() -> Path:
    for p in (ROOT / ".." / "shared" / "data" / "cranfield", Path("/work/shared/data/cranfield")):
        if (p / "cranqrel").exists():
            return p.resolve()
    raise SystemExit("Cranfield not found (../shared/data/cranfield)")


def tokens(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP and len(w) > 1]


def rankings(docs: list[tuple[str, str]], queries: dict[str, str], depth: int) -> dict[str, dict[str, list[str]]]:
    """Per run, per query id: the top ``depth`` document ids (ties by document id)."""
    ids = [d for d, _ in docs]
    toks = [tokens(t) for _, t in docs]
    vocab: dict[str, int] = {}
    for ts in toks:
        for w in ts:
            vocab.setdefault(w, len(vocab))
    tf = np.zeros((len(docs), len(vocab)))
    for i, ts in enumerate(toks):
        for w, c in Counter(ts).items():
            tf[i, vocab[w]] = c
    n, df = len(docs), (tf > 0).sum(axis=0)
    dl = tf.sum(axis=1)
    k1, b = 0.9, 0.4
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
    bm25 = tf / (tf + k1 * (1 - b + b * dl / dl.mean())[:, None]) * idf
    w = np.where(tf > 0, 1 + np.log(np.maximum(tf, 1)), 0) * np.log(n / np.maximum(df, 1))
    w = w / np.maximum(np.linalg.norm(w, axis=1), 1e-12)[:, None]
    order_key = np.array(ids)
    out: dict[str, dict[str, list[str]]] = {"bm25": {}, "tfidf": {}}
    qidf = np.log(n / np.maximum(df, 1))
    for qid, text in queries.items():
        counts = Counter(vocab[t] for t in tokens(text) if t in vocab)
        cols, qv = list(counts), np.array(list(counts.values()), dtype=float)
        for name, scores in (("bm25", bm25[:, cols] @ qv), ("tfidf", w[:, cols] @ (qv * qidf[cols]))):
            top = np.lexsort((order_key, -scores))[:depth]
            out[name][qid] = [ids[i] for i in top]
    return out


def load(pool_depth: int):
    from rag_experiments.benchmarks.trec import load_smart

    col = load_smart(find_cranfield())
    docs = [(d.doc_id, f"{d.title}\n{d.body}") for d in col.docs]
    qrels: dict[str, dict[str, int]] = {}
    for q in col.qrels:
        if 1 <= q.grade <= 4:  # Cleverdon 1..4 relevant (golden grade 2 for 1-2, 1 for 3-4); -1/5 dropped
            qrels.setdefault(q.query_id, {})[q.doc_id] = 2 if q.grade <= 2 else 1
    queries = {q: t for q, t in col.queries.items() if q in qrels}
    runs = rankings(docs, queries, 20)
    cases = []
    for qid in queries:
        rel = qrels[qid]
        author = min(rel, key=lambda d: (-rel[d], int(d) if d.isdigit() else d))
        pool = sorted({d for r in runs.values() for d in r[qid][:pool_depth]} - {author})
        given = {d: g for d, g in rel.items() if d not in pool}
        truth = {d: rel.get(d, 0) for d in pool}
        cases.append({"id": qid, "given": given, "pool": pool, "truth": truth,
                      "runs": {name: r[qid] for name, r in runs.items()}})
    return cases


def case_metrics(case: dict, pool_labels: dict[str, int]) -> np.ndarray:
    """[run][metric] under the given labels of the pool (plus the case's given evidence)."""
    labels = dict(case["given"])
    labels.update({d: g for d, g in pool_labels.items() if g > 0})
    grades = [g for g in labels.values() if g > 0]
    out = np.empty((2, len(METRICS)))
    for r, name in enumerate(("bm25", "tfidf")):
        gains = [labels.get(d, 0) for d in case["runs"][name]]
        for m, (_, fn, k) in enumerate(METRICS):
            out[r, m] = fn(gains, grades, k)
    return out


def judge(case: dict, tpr: float, tnr: float, rng: np.random.Generator) -> dict[str, int]:
    u = rng.random(len(case["pool"]))
    out = {}
    for d, x in zip(case["pool"], u):
        g = case["truth"][d]
        out[d] = (g if x < tpr else 0) if g > 0 else (1 if x >= tnr else 0)
    return out


def simulate(reps: int, n_cases: int | None, pool_depth: int, seed: int, boot: int,
             pairs: tuple[int, ...] = PAIRS) -> tuple[list[dict], dict]:
    cases = load(pool_depth)
    q = len(cases)
    big_n = n_cases or q
    human = np.stack([case_metrics(c, c["truth"]) for c in cases])  # [query, run, metric]
    truth = human.mean(axis=0)
    truth_delta = (human[:, 1] - human[:, 0]).mean(axis=0)
    mean_pool = float(np.mean([len(c["pool"]) for c in cases]))
    sizes = [(p, max(2, round(p / mean_pool))) for p in pairs]
    info = {"queries": q, "N": big_n, "mean_pool": mean_pool, "pool_pairs": sum(len(c["pool"]) for c in cases),
            "sizes": sizes, "truth": truth, "truth_delta": truth_delta}
    rng = np.random.default_rng(seed)
    rows = []
    for tpr, tnr in JUDGES:
        hits: dict = {}
        for rep in range(reps):
            draw = rng.integers(0, q, size=big_n)
            mach = np.stack([case_metrics(cases[i], judge(cases[i], tpr, tnr, rng)) for i in draw])
            hum = human[draw]
            for pairs, n in sizes:
                s = rng.choice(big_n, size=n, replace=False)
                for m, (name, _, _) in enumerate(METRICS):
                    for what, mm, hh, t in (
                        ("bm25", mach[:, 0, m], hum[:, 0, m], truth[0, m]),
                        ("tfidf", mach[:, 1, m], hum[:, 1, m], truth[1, m]),
                        ("delta", mach[:, 1, m] - mach[:, 0, m], hum[:, 1, m] - hum[:, 0, m], truth_delta[m]),
                    ):
                        key = (tpr, tnr, pairs, n, name, what)
                        h = hits.setdefault(key, Counter())
                        pp = ppi_mean(mm, hh[s], mm[s], tune=True)  # PPI++
                        p1 = ppi_mean(mm, hh[s], mm[s], tune=False)
                        lo, hi = bootstrap_interval(mm, boot, seed + rep)
                        h["ppi++"] += pp.low <= t <= pp.high
                        h["ppi"] += p1.low <= t <= p1.high
                        h["uncorrected"] += lo <= t <= hi
                        h["w_ppi++"] += pp.high - pp.low
                        h["w_ppi"] += p1.high - p1.low
                        h["w_unc"] += hi - lo
                        h["bias"] += mm.mean() - hh.mean()
                        h["reps"] += 1
        for key, h in hits.items():
            rows.append({"tpr": key[0], "tnr": key[1], "pairs": key[2], "cases": key[3], "metric": key[4],
                         "what": key[5], "reps": h["reps"],
                         **{k: h[k] / h["reps"] for k in ("ppi++", "ppi", "uncorrected", "w_ppi++", "w_ppi", "w_unc",
                                              "bias")}})
    return rows, info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--cases", type=int, default=None, help="golden-set size N (default: the number of queries)")
    ap.add_argument("--pool-depth", type=int, default=5)
    ap.add_argument("--seed", type=int, default=2023)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="bootstrap 200 resamples")
    ap.add_argument("--pairs", type=int, nargs="+", default=list(PAIRS), help="human labels (pairs) per row group")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows, info = simulate(args.reps, args.cases, args.pool_depth, args.seed, 200 if args.quick else args.bootstrap,
                          tuple(args.pairs))
    print(f"Cranfield: {info['queries']} queries with relevant documents; golden set N={info['N']} cases drawn "
          f"with replacement per repetition; pool = union of BM25 and TF-IDF top {args.pool_depth} minus each "
          f"query's author evidence: {info['pool_pairs']} pairs, {info['mean_pool']:.2f} per case")
    print("human labels -> cases: " + ", ".join(f"{p} pairs = {n} cases" for p, n in info["sizes"])
          + f" (a run logs a corrected interval from {MIN_CASES} cases)")
    names = [m[0] for m in METRICS]
    print("truth (Cranfield labels): " + ", ".join(
        f"{n} bm25 {info['truth'][0, i]:.3f} tfidf {info['truth'][1, i]:.3f} delta {info['truth_delta'][i]:+.3f}"
        for i, n in enumerate(names)))
    print()
    print("Summary: coverage of the 95% intervals over the 12 rows of each group (4 metrics x BM25, TF-IDF and "
          "their difference), min / mean")
    print()
    print("| judge TPR/TNR | human labels | corrected (PPI) | PPI++ | uncorrected | mean width corrected / uncorrected |")
    print("|---|---|---:|---:|---:|---:|")
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["tpr"], r["tnr"], r["pairs"], r["cases"]), []).append(r)
    for (tpr, tnr, pairs, cases), rs in sorted(groups.items(), key=lambda kv: (-kv[0][0], kv[0][2])):
        def mm(k):
            return f"{min(r[k] for r in rs):.1%} / {np.mean([r[k] for r in rs]):.1%}"
        below = " (below the minimum: no interval logged)" if cases < MIN_CASES else ""
        print(f"| {tpr:.2f}/{tnr:.2f} | {pairs} pairs = {cases} cases{below} | {mm('ppi')} | {mm('ppi++')} "
              f"| {mm('uncorrected')} | {np.mean([r['w_ppi'] for r in rs]):.3f} / {np.mean([r['w_unc'] for r in rs]):.3f} |")
    print()
    print("| judge TPR/TNR | human labels | metric | run | PPI coverage (runs use it) | PPI++ coverage "
          "| uncorrected coverage | width PPI / PPI++ / uncorrected | machine bias |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    order = {n: i for i, n in enumerate(names)}
    for r in sorted(rows, key=lambda r: (-r["tpr"], r["pairs"], order[r["metric"]], r["what"])):
        below = " (below the minimum: no interval logged)" if r["cases"] < MIN_CASES else ""
        print(f"| {r['tpr']:.2f}/{r['tnr']:.2f} | {r['pairs']} pairs ({r['cases']} cases){below} | {r['metric']} | {r['what']} "
              f"| {r['ppi']:.1%} | {r['ppi++']:.1%} | {r['uncorrected']:.1%} "
              f"| {r['w_ppi']:.3f} / {r['w_ppi++']:.3f} / {r['w_unc']:.3f} "
              f"| {r['bias']:+.3f} |")
    print()
    for label in ("ppi", "ppi++", "uncorrected"):
        for part, chosen in (("all rows", rows), (f">= {MIN_CASES} cases", [r for r in rows if r["cases"] >= MIN_CASES])):
            vals = [r[label] for r in chosen]
            if vals:
                print(f"{label}: coverage min {min(vals):.1%}, mean {np.mean(vals):.1%} over {len(vals)} rows ({part})")
    print(f"{args.reps} repetitions, {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
