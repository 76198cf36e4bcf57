"""Validate sampled labelling (issue 45 item 4) on the demo's fully judged depth-5 pool, no LLM.

The demo golden set holds 1,719 judgements of the pool of the four variants' top 5
(``provenance.pool``). Each repetition keeps a random share of them, drawn as ``rag-exp golden
label --sample`` draws (``--unit case``: whole cases, every pool pair of a drawn case; ``--unit
pair``: pairs within rank strata, a pair's stratum its best rank among the four variants), with the
sampling design recorded on the kept judgements as the command writes it, drops the rest, and
scores each variant's recall@5 with the estimator of rag_experiments.evaluation.sampled. The truth is recall@5 with
every label. Printed: per variant, the share of repetitions whose 95% interval covers the truth,
the mean estimate and interval width; how often the order of the four variants is kept; the
labels saved. Beside it, the naive score of the same subsample (unjudged pairs counted as misses).

    .venv/bin/python tools/sampled_labels.py [--share 0.25] [--reps 200] [--unit case|pair|both]

The variants' rankings come from the demo database once (rag_experiments.session.open_retriever,
top 20 per case) and are cached in /tmp/sampled_labels_rankings.json (--rankings).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag_experiments.evaluation.sampled import NO_DESIGN, estimate_recall, sampling_design  # noqa: E402
from rag_experiments.golden.golden_file import GoldenFile  # noqa: E402
from rag_experiments.golden.label import parse_strata, stratum_of_rank  # noqa: E402
from rag_experiments.golden.records import Judgement  # noqa: E402
from rag_experiments.golden.resolve import resolve  # noqa: E402
from rag_experiments.stats.ipw import allocate  # noqa: E402
from rag_experiments.types import Hit  # noqa: E402

GOLDEN = ROOT / "experiments" / "golden" / "demo.jsonl"
VARIANTS = ("vector", "keyword", "hybrid", "hybrid_rerank")
COST_FULL_POOL = 3.57  # USD: the --dry-run estimate of judging the 1,719 pairs with claude-sonnet-4-6 (authoring README)


def rankings(path: Path) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    from rag_experiments.golden.resolve import load_golden
    from rag_experiments.session import open_retriever

    golden = load_golden(GOLDEN)
    out = {}
    for v in VARIANTS:
        t = time.time()
        s = open_retriever([f"retrieval={v}"], progress=False, yes=True)
        try:
            out[v] = {c.case_id: [[h["doc_id"], h["start"], h["end"], h["chunk_id"]] for h in s.search(c.query, 20)]
                      for c in golden.cases}
        finally:
            s.close()
        print(f"ranked {v} in {time.time() - t:.0f} s", file=sys.stderr)
    path.write_text(json.dumps(out))
    return out


def hits(rows: list) -> list[Hit]:
    return [Hit(chunk_id=c, doc_id=d, source_uri=d, doc_type="", start=s, end=e, score=0.0, rank=i)
            for i, (d, s, e, c) in enumerate(rows, start=1)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--share", type=float, default=0.25, help="share of the pool's labels kept (default 0.25)")
    ap.add_argument("--reps", type=int, default=200, help="subsamples (default 200)")
    ap.add_argument("--unit", choices=("case", "pair", "both"), default="both",
                    help="what is drawn: whole cases (rag-exp's default) or pairs within rank strata (default: both)")
    ap.add_argument("--strata", default="1-2,3-5", help="unit pair: rank strata (default 1-2,3-5)")
    ap.add_argument("--priority", default=None,
                    help="unit pair: relative sampling rates per stratum, e.g. 1,0.5 (default: equal)")
    ap.add_argument("--method", default="basic", help="unit pair: interval basic | percentile | normal | linear")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rankings", type=Path, default=Path("/tmp/sampled_labels_rankings.json"))
    args = ap.parse_args()

    ranked = {v: {cid: hits(rows) for cid, rows in per.items()} for v, per in rankings(args.rankings).items()}
    gf = GoldenFile(GOLDEN)
    records = gf.read_records()
    pool = [r for r in records if isinstance(r, Judgement) and (r.raw.get("provenance") or {}).get("pool")]
    pool_ids = {j.id for j in pool}
    others = tuple(r for r in records if r.id not in pool_ids)
    full = resolve(records, gf.path, "full")
    case_ids = [c.case_id for c in full.cases if c.relevant and all(c.case_id in ranked[v] for v in VARIANTS)]
    truth = {v: estimate_recall(full, ranked[v], case_ids, [args.k], NO_DESIGN, method="linear")[args.k].value
             for v in VARIANTS}
    true_order = sorted(VARIANTS, key=lambda v: -truth[v])
    print(f"demo pool: {len(pool)} judged pairs (the four variants' top {args.k}) over "
          f"{len({j.case_id for j in pool})} cases; {len(case_ids)} cases scored; {args.reps} subsamples keeping "
          f"{args.share:.0%} of the pool's labels; the rest of the golden set (case evidence, 320 near-miss labels) "
          f"is kept whole. Truth: recall@{args.k} with every label.")
    for unit in (("case", "pair") if args.unit == "both" else (args.unit,)):
        draw = case_draw(pool, args) if unit == "case" else pair_draw(pool, ranked, args)
        table(unit, draw, others, gf, ranked, case_ids, truth, true_order, len(pool), args)
    return 0


def case_draw(pool: list, args):
    """Whole cases, as rag-exp golden label --sample-unit case draws them: every pool pair of a drawn case."""
    by_case: dict[str, list] = {}
    for j in pool:
        by_case.setdefault(j.case_id, []).append(j)
    cases = sorted(by_case)
    want = max(2, round(len(cases) * args.share))

    def draw(rng: random.Random, rep: int) -> list:
        kept = []
        for cid in rng.sample(cases, want):
            kept += [replace(j, raw={**j.raw, "sample": {"id": f"s-validate-{rep}", "unit": "case", "stratum": "cases",
                                                         "population": len(cases), "seed": rep,
                                                         "inclusion": want / len(cases)}}) for j in by_case[cid]]
        return kept
    return draw, f"{want} of {len(cases)} cases drawn, all their pairs judged"


def pair_draw(pool: list, ranked: dict, args):
    """Pairs within rank strata (a pair's stratum: its best rank among the four variants' top k today; a
    pair none of them ranks there any more goes to the last stratum), as --sample-unit pair draws them."""
    strata = parse_strata(args.strata)
    names = [name for name, _lo, _hi in strata]

    def best_rank(j: Judgement) -> int:
        ranks = [i for v in VARIANTS for i, h in enumerate(ranked[v].get(j.case_id, [])[:args.k], start=1)
                 if (h.doc_id, h.start, h.end) == j.span.key]
        return min(ranks) if ranks else args.k

    members = {name: [] for name in names}
    for j in pool:
        members[stratum_of_rank(best_rank(j), strata)].append(j)
    sizes = {name: len(members[name]) for name in names}
    prio = [float(x) for x in args.priority.split(",")] if args.priority else [1.0] * len(names)
    alloc = allocate(sizes, round(args.share * len(pool)), dict(zip(names, prio)))

    def draw(rng: random.Random, rep: int) -> list:
        kept = []
        for name in names:
            for j in rng.sample(members[name], alloc[name]):
                kept.append(replace(j, raw={**j.raw, "sample": {
                    "id": f"s-validate-{rep}", "unit": "pair", "stratum": name, "population": sizes[name], "seed": rep,
                    "inclusion": alloc[name] / sizes[name]}}))
        return kept
    return draw, "pairs drawn per rank stratum: " + ", ".join(f"ranks {n} {alloc[n]} of {sizes[n]}" for n in names)


def table(unit, draw_and_text, others, gf, ranked, case_ids, truth, true_order, n_pool, args) -> None:
    draw, text = draw_and_text
    rng = random.Random(args.seed)
    cover = {v: 0 for v in VARIANTS}
    sums = {v: [0.0, 0.0, 0.0, 0.0] for v in VARIANTS}  # estimate, width, naive, estimate^2
    naive_order = order_kept = labels = 0
    t0 = time.time()
    for rep in range(args.reps):
        kept = draw(rng, rep)
        labels += len(kept)
        sub_records = others + tuple(kept)
        sub = resolve(sub_records, gf.path, f"sub{rep}")
        design = sampling_design(sub_records)
        est, naive = {}, {}
        for v in VARIANTS:
            e = estimate_recall(sub, ranked[v], case_ids, [args.k], design, method=args.method, seed=rep)[args.k]
            est[v] = e.value
            naive[v] = estimate_recall(sub, ranked[v], case_ids, [args.k], NO_DESIGN, method="linear")[args.k].value
            cover[v] += e.low <= truth[v] <= e.high
            sums[v][0] += e.value
            sums[v][1] += e.high - e.low
            sums[v][2] += naive[v]
            sums[v][3] += e.value ** 2
        order_kept += sorted(VARIANTS, key=lambda v: -est[v]) == true_order
        naive_order += sorted(VARIANTS, key=lambda v: -naive[v]) == true_order
    n = args.reps
    mean_labels = labels / n
    print()
    print(f"## unit {unit}: {text}; {time.time() - t0:.0f} s")
    print(f"labels judged: {mean_labels:.0f} of {n_pool} on average ({mean_labels / n_pool:.0%}); saved "
          f"{n_pool - mean_labels:.0f} ({1 - mean_labels / n_pool:.0%}), about "
          f"${COST_FULL_POOL * (1 - mean_labels / n_pool):.2f} of the ${COST_FULL_POOL:.2f} the whole pool costs "
          "at the --dry-run estimate")
    print()
    print(f"| variant | recall@{args.k}, every label | estimate: mean | sd | 95% interval covers the truth | "
          f"mean width | naive (unjudged = miss): mean |")
    print("|---|---|---|---|---|---|---|")
    for v in true_order:
        sd = max(0.0, sums[v][3] / n - (sums[v][0] / n) ** 2) ** 0.5
        print(f"| {v} | {truth[v]:.4f} | {sums[v][0] / n:.4f} | {sd:.4f} | {cover[v] / n:.1%} | "
              f"{sums[v][1] / n:.4f} | {sums[v][2] / n:.4f} |")
    print()
    print(f"order of the four variants kept ({' > '.join(true_order)}): estimate {order_kept / n:.1%} of "
          f"{n} subsamples; naive {naive_order / n:.1%}")


if __name__ == "__main__":
    raise SystemExit(main())
