"""Validate sampled labelling (issue 45 item 4) on the demo's fully judged depth-5 pool, no LLM.

The demo golden set holds 1,719 judgements of the pool of the four variants' top 5
(``provenance.pool``). Each repetition keeps a random share of them, drawn as ``rag-exp golden
label --sample`` draws (``--unit case``: whole cases, every pool pair of a drawn case; ``--unit
pair``: pairs within rank strata, a pair's stratum its best rank among the four variants), with the
sampling design recorded on the kept judgements as the command writes it, drops the rest, and
scores each variant's recall@5 with the estimator of rag_experiments.evaluation.sampled. The truth is recall@5 with
every label. Printed: per variant, the share of repetitions whose 95% interval covers the truth
(± its Monte Carlo standard error), the mean estimate and interval width; the order of the four
variants kept: first, for whole cases, the headline, tie-aware (no pair's paired 95% interval,
evaluation.sampled.estimate_recall_difference, excludes 0 on the wrong side) with each pair's
right / tie / wrong shares; then strict (the four estimates in the true order) and the order every
label establishes (pairs 0.08 apart, which any unbiased estimate keeps: not a headline); the labels
saved. Beside it, the naive score of
the same subsample (unjudged pairs counted as misses).

    .venv/bin/python tools/sampled_labels.py [--share 0.25] [--reps 1000] [--unit case|pair|both]
                                             [--interval t|normal]
    .venv/bin/python tools/sampled_labels.py --alternatives   # other whole-case designs, larger shares
    .venv/bin/python tools/sampled_labels.py --bound          # oracle bound on the order for pair samples

The variants' rankings come from the demo database once (rag_experiments.session.open_retriever,
top 20 per case) and are cached in /tmp/sampled_labels_rankings.json (--rankings).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag_experiments.evaluation.sampled import (NO_DESIGN, case_terms, estimate_recall,  # noqa: E402
                                                estimate_recall_difference, sampling_design)
from rag_experiments.evaluation.relevance import credit  # noqa: E402
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
    ap.add_argument("--reps", type=int, default=1000, help="subsamples (default 1000)")
    ap.add_argument("--unit", choices=("case", "pair", "both"), default="case",
                    help="what is drawn: whole cases (rag-exp's default; the default here) or pairs within rank "
                         "strata, or both")
    ap.add_argument("--interval", choices=("t", "normal"), default="t",
                    help="unit case: Student's t (rag-exp's) or normal intervals")
    ap.add_argument("--strata", default="1-2,3-5", help="unit pair: rank strata (default 1-2,3-5)")
    ap.add_argument("--priority", default=None,
                    help="unit pair: relative sampling rates per stratum, e.g. 1,0.5 (default: equal)")
    ap.add_argument("--method", default="basic", help="unit pair: interval basic | percentile | normal | linear")
    ap.add_argument("--bound", action="store_true",
                    help="print the best any stratified pair sample of this size could do for the order (an "
                         "oracle bound, no subsampling) and exit")
    ap.add_argument("--alternatives", action="store_true",
                    help="unit case: compare other whole-case designs on the same subsamples (strata by how much "
                         "the close variants disagree; a model-assisted estimator) and the order kept at larger "
                         "shares, from a per-case table (fast), and exit")
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
    args.established = established_order(full, ranked, case_ids, truth, true_order, args.k)
    print(f"demo pool: {len(pool)} judged pairs (the four variants' top {args.k}) over "
          f"{len({j.case_id for j in pool})} cases; {len(case_ids)} cases scored; {args.reps} subsamples keeping "
          f"{args.share:.0%} of the pool's labels; the rest of the golden set (case evidence, 320 near-miss labels) "
          f"is kept whole. Truth: recall@{args.k} with every label.")
    if args.bound:
        bound(pool, full, ranked, case_ids, truth, true_order, args)
        return 0
    if args.alternatives:
        alternatives(pool, others, gf, full, ranked, case_ids, truth, true_order, args)
        return 0
    for unit in (("case", "pair") if args.unit == "both" else (args.unit,)):
        draw = case_draw(pool, args) if unit == "case" else pair_draw(pool, ranked, args)
        table(unit, draw, others, gf, ranked, case_ids, truth, true_order, len(pool), args)
    return 0


def established_order(full, ranked: dict, case_ids: list, truth: dict, true_order: list, k: int) -> list:
    """The pairs of variants that every label orders beyond case sampling: each pair's paired
    permutation test over the cases (stats.paired, as compare runs it) on recall@k with every label,
    Holm-adjusted over the six pairs; a pair with an adjusted p below 0.05 is in the established
    order. A pair that is not cannot be "kept" by any subsample: with every label its order is as
    likely another draw of the cases. Printed as a table; returns the established (better, worse) pairs."""
    from rag_experiments.stats.paired import holm, paired_permutation_test

    cases = {c.case_id: c for c in full.cases}
    per = {v: [] for v in VARIANTS}
    for cid in case_ids:
        case = cases[cid]
        for v in VARIANTS:
            terms = case_terms(case, credit(case, ranked[v][cid][:k], 0.5).refs, k, NO_DESIGN)
            per[v].append(sum(t.x for t in terms) / len(terms))
    pairs = list(itertools.combinations(true_order, 2))
    raw = [paired_permutation_test(per[a], per[b]) for a, b in pairs]
    print(f"with every label, each pair of variants over the {len(case_ids)} cases (recall@{k}; paired "
          "permutation test, Holm over the six pairs, as rag-exp compare):")
    print()
    print("| pair | difference, every label | s.e. over cases | cases won / lost | p (Holm) | ordered by every label |")
    print("|---|---|---|---|---|---|")
    out = []
    for (a, b), p in zip(pairs, holm(raw)):
        d = [x - y for x, y in zip(per[a], per[b])]
        m = sum(d) / len(d)
        se = (sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d)) ** 0.5
        ordered = p < 0.05
        out += [(a, b)] * ordered
        print(f"| {a} - {b} | {truth[a] - truth[b]:.4f} | {se:.4f} | {sum(x > 0 for x in d)} / "
              f"{sum(x < 0 for x in d)} | {p:.4f} | {'yes' if ordered else 'no: a tie even with every label'} |")
    print()
    return out


def established_text(established: list) -> str:
    return "; ".join(f"{a} > {b}" for a, b in established) or "no pair"


def kept_established(est: dict, established: list) -> bool:
    """Every pair the full labels order (established_order) comes out the same way round."""
    return all(est[a] > est[b] for a, b in established)


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
    pairs = list(itertools.combinations(true_order, 2))  # (better, worse) by the truth
    verdicts = {p: {"right": 0, "tie": 0, "wrong": 0} for p in pairs}  # unit case: paired 95% intervals
    point_right = {p: 0 for p in pairs}  # the two estimates the true way round
    naive_order = order_kept = tie_aware = all_resolved = labels = est_kept = naive_est_kept = 0
    t0 = time.time()
    for rep in range(args.reps):
        kept = draw(rng, rep)
        labels += len(kept)
        sub_records = others + tuple(kept)
        sub = resolve(sub_records, gf.path, f"sub{rep}")
        design = sampling_design(sub_records)
        est, naive = {}, {}
        for v in VARIANTS:
            e = estimate_recall(sub, ranked[v], case_ids, [args.k], design, method=args.method, seed=rep,
                                interval=args.interval)[args.k]
            est[v] = e.value
            naive[v] = estimate_recall(sub, ranked[v], case_ids, [args.k], NO_DESIGN, method="linear")[args.k].value
            cover[v] += e.low <= truth[v] <= e.high
            sums[v][0] += e.value
            sums[v][1] += e.high - e.low
            sums[v][2] += naive[v]
            sums[v][3] += e.value ** 2
        order_kept += sorted(VARIANTS, key=lambda v: -est[v]) == true_order
        naive_order += sorted(VARIANTS, key=lambda v: -naive[v]) == true_order
        est_kept += kept_established(est, args.established)
        for a, b in pairs:
            point_right[(a, b)] += est[a] > est[b]
        naive_est_kept += kept_established(naive, args.established)
        if unit == "case":
            wrong = resolved = 0
            for a, b in pairs:
                d = estimate_recall_difference(sub, ranked[a], ranked[b], case_ids, [args.k], design)[args.k]
                said = "right" if d.low > 0 else "wrong" if d.high < 0 else "tie"
                verdicts[(a, b)][said] += 1
                wrong += said == "wrong"
                resolved += said == "right"
            tie_aware += wrong == 0
            all_resolved += resolved == len(pairs)
    n = args.reps
    mean_labels = labels / n
    print()
    print(f"## unit {unit}: {text}; {n} subsamples; {args.interval} intervals; {time.time() - t0:.0f} s")
    print(f"labels judged: {mean_labels:.0f} of {n_pool} on average ({mean_labels / n_pool:.0%}); saved "
          f"{n_pool - mean_labels:.0f} ({1 - mean_labels / n_pool:.0%}), about "
          f"${COST_FULL_POOL * (1 - mean_labels / n_pool):.2f} of the ${COST_FULL_POOL:.2f} the whole pool costs "
          "at the --dry-run estimate")
    print()
    print(f"| variant | recall@{args.k}, every label | estimate: mean | sd | 95% interval covers the truth "
          f"(± MC s.e.) | mean width | naive (unjudged = miss): mean |")
    print("|---|---|---|---|---|---|---|")
    for v in true_order:
        sd = max(0.0, sums[v][3] / n - (sums[v][0] / n) ** 2) ** 0.5
        print(f"| {v} | {truth[v]:.4f} | {sums[v][0] / n:.4f} | {sd:.4f} | {share(cover[v], n)} | "
              f"{sums[v][1] / n:.4f} | {sums[v][2] / n:.4f} |")
    print()
    # the headline is the tie-aware order (issue 56): the established order counts only pairs far apart
    # (0.08), which any unbiased estimator keeps, so it says little about the labels saved
    if unit == "case":
        print(f"ORDER (the headline), tie-aware: no pair's paired 95% interval excludes 0 on the wrong side "
              f"(overlapping = a tie): {share(tie_aware, n)}; all {len(pairs)} pairs resolved in the true order: "
              f"{share(all_resolved, n)}")
    print(f"order of the four variants ({' > '.join(true_order)}), strict (the four estimates in the true "
          f"order): {share(order_kept, n)}; naive scores {share(naive_order, n)}")
    print(f"order every label establishes ({established_text(args.established)}), kept by the estimates: "
          f"{share(est_kept, n)}; naive scores {share(naive_est_kept, n)} (pairs that far apart are kept by any "
          f"unbiased estimate: not the headline)")
    if unit != "case":
        print("(no paired intervals for pair samples: tie-aware order not measured)")
        return
    print()
    print("| pair | true difference | estimates the true way round | right (interval above 0) | tie (interval "
          "holds 0) | wrong (below 0) |")
    print("|---|---|---|---|---|---|")
    for a, b in pairs:
        c = verdicts[(a, b)]
        print(f"| {a} - {b} | {truth[a] - truth[b]:.4f} | {point_right[(a, b)] / n:.1%} | {c['right'] / n:.1%} | "
              f"{c['tie'] / n:.1%} | {c['wrong'] / n:.1%} |")


def bound(pool: list, full, ranked: dict, case_ids: list, truth: dict, true_order: list, args) -> None:
    """An oracle lower bound on the error of the two close differences (hybrid - hybrid_rerank, keyword -
    vector) for ANY Horvitz-Thompson sample of ``share`` of the pool's pairs stratified by what is known
    before judging (a pair's best rank, how many variants have it in their top k, and which side of
    each close pair it is on), granting it two things no real design has: every case's number of
    relevant passages T_c (so recall is linear in the labels) and each stratum's true spread (Neyman
    allocation with the truth). With T_c known, a difference of recall is the mean over the n cases
    of sum_i s_i y_i / T_c over the pairs in one variant's top k and not the other's (s_i = +-1, y_i
    = 1 when relevant); the pairs both or neither have add nothing, so the bound samples only those."""
    from statistics import NormalDist

    close = [(a, b) for a, b in zip(true_order, true_order[1:]) if truth[a] - truth[b] < 0.03]
    fc = {c.case_id: c for c in full.cases}
    n = len(case_ids)
    strata: dict = {}
    for cid in case_ids:
        case = fc[cid]
        rel = {e.ref for e in case.relevant}
        top = {}
        for v in VARIANTS:
            hits_v = ranked[v][cid][:args.k]
            refs = set(r for r in credit(case, hits_v, 0.5).refs[:args.k] if r is not None)
            spans = {(h.doc_id, h.start, h.end) for h in hits_v}
            top[v] = (refs, spans)
        for j in (j for j in pool if j.case_id == cid):
            member = {v: j.id in top[v][0] or j.span.key in top[v][1] for v in VARIANTS}
            sides = tuple(int(member[a]) - int(member[b]) for a, b in close)
            if not any(sides):
                continue
            ranks = [i for v in VARIANTS for i, h in enumerate(ranked[v][cid][:args.k], start=1)
                     if (h.doc_id, h.start, h.end) == j.span.key]
            key = (min(ranks) if ranks else args.k + 1, sum(member.values()), sides)
            y = 1.0 if j.id in rel else 0.0
            strata.setdefault(key, []).append(tuple(si * y / (n * len(case.relevant)) for si in sides))
    budget = round(args.share * len(pool))

    def var(xs: list) -> float:
        m = sum(xs) / len(xs)
        return sum((x - m) ** 2 for x in xs) / (len(xs) - 1) if len(xs) > 1 else 0.0

    def neyman(weights: tuple) -> dict:
        """Neyman allocation minimising sum_i weights_i var_i / difference_i^2, water-filled at the sizes."""
        a = {h: sum(w * var([z[i] for z in zs]) / (truth[x] - truth[y]) ** 2
                    for i, ((x, y), w) in enumerate(zip(close, weights))) for h, zs in strata.items()}
        alloc, left, open_ = {}, float(budget), set(strata)
        while open_:
            mass = sum(len(strata[h]) * a[h] ** 0.5 for h in open_)
            full_h = [h for h in open_ if mass > 0 and left * len(strata[h]) * a[h] ** 0.5 / mass >= len(strata[h])]
            if not full_h:
                for h in open_:
                    alloc[h] = max(left * len(strata[h]) * a[h] ** 0.5 / mass, 1e-9) if mass > 0 else 1e-9
                break
            for h in full_h:
                alloc[h] = len(strata[h])
                left -= len(strata[h])
                open_.remove(h)
        return alloc

    def errors(alloc: dict) -> tuple[list[float], float]:
        """The two differences' standard errors and the correlation of their errors under ``alloc``."""
        def cov(i: int, j: int) -> float:
            total = 0.0
            for h, zs in strata.items():
                if len(zs) < 2:
                    continue
                mi, mj = (sum(z[i] for z in zs) / len(zs), sum(z[j] for z in zs) / len(zs))
                c = sum((z[i] - mi) * (z[j] - mj) for z in zs) / (len(zs) - 1)
                total += len(zs) ** 2 * (1 / alloc[h] - 1 / len(zs)) * c
            return total
        ses = [max(cov(i, i), 0.0) ** 0.5 for i in range(len(close))]
        rho = cov(0, 1) / (ses[0] * ses[1]) if len(close) == 2 and ses[0] * ses[1] > 0 else 0.0
        return ses, rho

    def p_right(ses: list[float], rho: float) -> float:
        """P(every close difference estimated with the right sign), normal approximation."""
        from scipy.stats import multivariate_normal

        means = [truth[x] - truth[y] for x, y in close]
        if len(close) == 1 or min(ses) == 0:  # one pair, or one of them exact: independent
            out = 1.0
            for m, se in zip(means, ses):
                out *= NormalDist().cdf(m / se) if se > 0 else 1.0
            return out
        cov = [[ses[0] ** 2, rho * ses[0] * ses[1]], [rho * ses[0] * ses[1], ses[1] ** 2]]
        return float(multivariate_normal(mean=[0, 0], cov=cov, allow_singular=True, seed=0).cdf(means))

    print(f"oracle bound: {budget} labels ({args.share:.0%} of {len(pool)}) spent only on the "
          f"{sum(len(z) for z in strata.values())} pairs where a close pair of variants disagrees, in "
          f"{len(strata)} strata (best rank, variants holding it, sides), Neyman-allocated with the true "
          f"spreads (so a stratum without a relevant pair gets no label), every case's number of relevant "
          f"passages known; normal approximation:")
    for i, (x, y) in enumerate(close):
        ses, _rho = errors(neyman(tuple(float(j == i) for j in range(len(close)))))
        print(f"  {x} - {y} (true difference {truth[x] - truth[y]:.4f}) alone, with every label spent on it: "
              f"standard error {ses[i]:.4f}, the right sign in {NormalDist().cdf((truth[x] - truth[y]) / ses[i]) if ses[i] else 1:.1%}")
    best = (0.0, None, None, None)
    for w in [i / 20 for i in range(1, 20)] if len(close) == 2 else [1.0]:
        ses, rho = errors(neyman((w, 1 - w)[:len(close)]))
        p = p_right(ses, rho)
        if p > best[0]:
            best = (p, w, ses, rho)
    p, w, ses, rho = best
    print(f"  all close pairs in the right order, best over allocations weighting the pairs w : 1 - w: {p:.1%} "
          f"at w = {w:.2f} (standard errors {', '.join(f'{se:.4f}' for se in ses)}, correlation {rho:+.2f})")


def case_table(pool: list, others: tuple, gf, full, ranked: dict, case_ids: list, k: int) -> dict:
    """Per case, what the whole-case designs need: its pool pairs (which variants hold each in their top
    k, whether it is relevant, its best rank), and per variant the relevant passages found with and without
    the pool's labels (``b``, ``B``: without; the recall with them is ``r1``)."""
    base = {c.case_id: c for c in resolve(others, gf.path, "base").cases}
    fc = {c.case_id: c for c in full.cases}
    out = {}
    for cid in case_ids:
        case, bcase = fc[cid], base[cid]
        rel = {e.ref for e in case.relevant}
        row = {"B": len(bcase.relevant), "b": {}, "r1": {}, "pairs": []}
        top = {}
        for v in VARIANTS:
            hits_v = ranked[v][cid][:k]
            refs = set(r for r in credit(case, hits_v, 0.5).refs[:k] if r is not None)
            brefs = set(r for r in credit(bcase, hits_v, 0.5).refs[:k] if r is not None)
            row["b"][v] = sum(e.ref in brefs for e in bcase.relevant)
            row["r1"][v] = sum(e.ref in refs for e in case.relevant) / len(case.relevant)
            top[v] = (refs, {(h.doc_id, h.start, h.end) for h in hits_v})
        for j in (j for j in pool if j.case_id == cid):
            member = tuple(j.id in top[v][0] or j.span.key in top[v][1] for v in VARIANTS)
            row["pairs"].append((member, 1.0 if j.id in rel else 0.0))
        out[cid] = row
    return out


def alternatives(pool: list, others: tuple, gf, full, ranked: dict, case_ids: list, truth: dict, true_order: list,
                 args) -> None:
    """Whole-case designs on a per-case table, each estimate by :func:`.ipw.difference_mean` (t interval):

    * ``simple``: a simple random sample of cases (rag-exp's design; the main table, here on the table);
    * ``disagreement strata``: cases in three strata by how many pool pairs the close variants
      (hybrid/hybrid_rerank, keyword/vector) disagree on (0-2, 3-6, 7+), proportional allocation, or
      rates raised with the disagreement (sqrt of the mean count per pair of the case's cost);
    * ``model-assisted``: the prediction of each case's recall with every pool pair counted at the
      relevance rate of pairs held by as many variants in the drawn cases, plus the Horvitz-Thompson
      estimate of the drawn cases' residuals (the base recall is the prediction with rate 0);
    and the simple design's order kept at larger shares."""
    from rag_experiments.stats.ipw import Stratum, difference_mean

    table_ = case_table(pool, others, gf, full, ranked, case_ids, args.k)
    cids = list(case_ids)
    idx = {v: i for i, v in enumerate(VARIANTS)}
    close = [("hybrid", "hybrid_rerank"), ("keyword", "vector")]
    cost = {c: len(table_[c]["pairs"]) for c in cids}
    pool_cases = [c for c in cids if cost[c]]

    def predicted(c: str, rate) -> dict:
        row = table_[c]
        den = row["B"] + sum(rate(m) for m, _y in row["pairs"])
        return {v: (row["b"][v] + sum(rate(m) for m, _y in row["pairs"] if m[idx[v]])) / den for v in VARIANTS}

    zero = {c: predicted(c, lambda m: 0.0) for c in cids}

    def disagreement(c: str) -> int:
        return sum(m[idx[a]] != m[idx[b]] for m, _y in table_[c]["pairs"] for a, b in close)

    def run(name: str, strata: dict, alloc: dict, model: bool, reps: int) -> None:
        rng = random.Random(args.seed)
        cover = {v: 0 for v in VARIANTS}
        kept = labels = est_kept = 0
        design = {h: Stratum(len(strata[h]), alloc[h]) for h in strata}
        for _rep in range(reps):
            drawn = {h: rng.sample(strata[h], alloc[h]) for h in strata}
            labels += sum(cost[c] for cs in drawn.values() for c in cs)
            pred = zero
            if model:
                seen: dict = {}
                for c in (c for cs in drawn.values() for c in cs):
                    for m, y in table_[c]["pairs"]:
                        seen.setdefault(sum(m), []).append(y)
                overall = sum(sum(v) for v in seen.values()) / max(1, sum(len(v) for v in seen.values()))
                rates = {nv: (sum(ys) + 2 * overall) / (len(ys) + 2) for nv, ys in seen.items()}
                pred = {c: predicted(c, lambda m: rates.get(sum(m), overall)) for c in cids}
            est = {}
            for v in VARIANTS:
                e = difference_mean([pred[c][v] for c in cids],
                                    {h: [table_[c]["r1"][v] - pred[c][v] for c in cs] for h, cs in drawn.items()},
                                    design)
                est[v] = e.value
                cover[v] += e.low <= truth[v] <= e.high
            kept += sorted(VARIANTS, key=lambda v: -est[v]) == true_order
            est_kept += kept_established(est, args.established)
        covers = ", ".join(f"{v} {share(cover[v], reps)}" for v in true_order)
        print(f"| {name} | {labels / reps:.0f} | {covers} | {share(kept, reps)} | {share(est_kept, reps)} |")

    want = max(2, round(len(pool_cases) * args.share))
    print(f"whole-case designs, {args.reps} subsamples each, t intervals (the truth: recall@{args.k} with every label)")
    print()
    print("| design | labels (mean) | interval covers the truth (± MC s.e.) | order kept, strict | established "
          "order kept |")
    print("|---|---|---|---|---|")
    run(f"simple, {want} of {len(pool_cases)} cases", {"all": pool_cases}, {"all": want}, False, args.reps)
    cuts = [(0, 2), (3, 6), (7, 10 ** 9)]
    strata = {(f"{lo}-{hi}" if hi < 10 ** 9 else f"{lo}+"): [c for c in pool_cases if lo <= disagreement(c) <= hi]
              for lo, hi in cuts}
    strata = {h: cs for h, cs in strata.items() if len(cs) >= 2}
    budget = args.share * sum(cost[c] for c in pool_cases)
    for label, raise_rate in (("proportional", False), ("rates raised with disagreement", True)):
        weight = {h: len(cs) * ((sum(disagreement(c) for c in cs) / len(cs) + 0.5) ** 0.5 /
                                (sum(cost[c] for c in cs) / len(cs)) ** 0.5 if raise_rate else 1.0)
                  for h, cs in strata.items()}
        per_label = budget / sum(weight[h] * sum(cost[c] for c in cs) / len(cs) for h, cs in strata.items())
        alloc = {h: max(2, min(len(cs), round(weight[h] * per_label))) for h, cs in strata.items()}
        sizes = ", ".join(f"{h}: {alloc[h]} of {len(cs)}" for h, cs in strata.items())
        run(f"disagreement strata ({sizes}), {label}", strata, alloc, False, args.reps)
    run(f"model-assisted, {want} of {len(pool_cases)} cases", {"all": pool_cases}, {"all": want}, True, args.reps)
    for more in (0.5, 0.75, 0.8, 0.85):
        n_more = round(len(pool_cases) * more)
        run(f"simple at {more:.0%}: {n_more} cases", {"all": pool_cases}, {"all": n_more}, False, args.reps)


def share(hits: int, n: int) -> str:
    """A share of ``n`` repetitions with its Monte Carlo standard error, in points."""
    p = hits / n
    return f"{p:.1%} ± {100 * (p * (1 - p) / n) ** 0.5:.1f}"


if __name__ == "__main__":
    raise SystemExit(main())
