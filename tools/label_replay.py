"""Replay `golden label --decide` against labelling the whole pool (issue 57 item 3).

    python tools/label_replay.py --golden experiments/golden/demo.jsonl --corpus demo --last-sweep
    python tools/label_replay.py --golden G.jsonl --corpus DIR --runs ID ID ID ID --metrics recall_at_5 ndcg_at_10

The runs' stored ranked lists (run.trec) come from the MLflow store (MLFLOW_TRACKING_URI). The golden
file is the truth: every judgement in it is a verdict the replay can ask for. The replay starts from
the same file with its judgements taken away (each case's own evidence only; ``--keep-evidence
first`` keeps only each case's first relevant span, for a benchmark whose qrels are all evidence),
so the pool of a pair is every passage unjudged in either run's cut-off. For every pair of runs and
each metric it labels in the decide order (golden.decide: the passage that moves the paired Δ most
first, one per text in a case, its verdict given to the copies) until the stopping rule says settled,
each verdict the truth's (a passage the truth never judged is NO: what the full pool's numbers assume),
and prints: the pool, the labels it took, their share, the decision declared, the full pool's decision
(every pool passage given the truth's verdict, then the paired t-test as compare would score it: what
labelling the whole pool decides) and whether they agree. A settled decision that differs from the full
pool's is a wrong decision declared settled.

The full pool is not the truth's every judgement: a truth with relevant passages outside the pair's
cut-offs (the demo's set: 549 relevant units for 230 cases, of which 230 are the cases' own evidence and
the rest judged from deeper or other runs' lists; Cranfield's qrels: documents no run retrieved) counts
more relevant units in recall's denominator than any labelling of the pool can find. The rule can only
settle what the pool decides, so that is the reference; the truth's own decision is printed beside it
when it differs (Cranfield recall@10 keyword vs vector: the whole pool p=0.045, the qrels p=0.012).
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag_experiments.corpus.loader import load_corpus  # noqa: E402
from rag_experiments.evaluation import bounds as B  # noqa: E402
from rag_experiments.evaluation.relevance import credit  # noqa: E402
from rag_experiments.evaluation.rescore import params_from_flat  # noqa: E402
from rag_experiments.golden.decide import outcome, run_loop, without_judgements  # noqa: E402
from rag_experiments.golden.decide_stop import LEVEL, SEED, Judged  # noqa: E402
from rag_experiments.golden.relevance_features import FEATURES, case_queries  # noqa: E402
from rag_experiments.golden.relevance_logit import FeatureModel  # noqa: E402
from rag_experiments.golden.resolve import load_golden  # noqa: E402
from rag_experiments.paths import project_path  # noqa: E402
from rag_experiments.tracking.decide_tracker import ORDERS, STOP_RULES, PairTracker  # noqa: E402
from rag_experiments.tracking.pool import doc_text_of  # noqa: E402
from rag_experiments.tracking.runs import get_run, select_runs  # noqa: E402
from rag_experiments.tracking.versioned import load_ranked_lists  # noqa: E402


def truth_grades(truth, ranked, k: int, min_coverage: float) -> dict[tuple[str, str], int]:
    """(case, passage key) -> the truth's grade for every hit in the top k (0 when the truth never judged it)."""
    out: dict[tuple[str, str], int] = {}
    for case in truth.scorable:
        if case.case_id not in ranked:
            continue
        hits = ranked[case.case_id].hits[:k]
        c = credit(case, hits, min_coverage)
        for h, gain in zip(hits, c.gains):
            key = (case.case_id, B.passage_key(h.doc_id, h.start, h.end))
            out[key] = max(out.get(key, 0), int(gain))
    return out


def replay_pair(metric: str, start, truth, ra, rb, min_cov: float, text_of, alpha: float, *,
                stop: str = "confident", seed: int = SEED, shuffle: int | None = None, level: float = LEVEL,
                order_by: str | None = None, model: str = "features", trace: int = 0, explore: int = 0):
    """Label in the decide order (or, ``shuffle`` a seed, in a random order) with the truth's verdicts
    until the rule says settled; the decision declared against the full pool's."""
    k = B.metric_parts(metric)[1]
    va, vb = B.views(start, ra, k, min_cov), B.views(start, rb, k, min_cov)
    ta, tb = B.views(truth, ra, k, min_cov), B.views(truth, rb, k, min_cov)
    shared = [cid for cid in va if cid in vb and cid in ta and cid in tb]
    va, vb = {c: va[c] for c in shared}, {c: vb[c] for c in shared}
    name = B.metric_parts(metric)[0]
    judged = outcome([B.value(name, k, ta[c]) - B.value(name, k, tb[c]) for c in shared], alpha)
    grades = truth_grades(truth, ra, k, min_cov)
    for key, g in truth_grades(truth, rb, k, min_cov).items():
        grades[key] = max(grades.get(key, 0), g)
    full = whole_pool(metric, va, vb, text_of, grades, alpha)
    queries = case_queries(start.cases) if model in ("features", "known") else None  # as golden label --decide
    tracker = (KnownRates if model == "known" else PairTracker)(
        metric, va, vb, text_of, alpha=alpha, stop=stop, seed=seed, level=level, order_by=order_by, queries=queries)
    if model == "known":
        tracker.know(grades)
    first = tracker.state()
    pool = len(first.candidates)
    pool_passages = sum(1 + len(c.copies) for c in first.candidates)

    def label(c) -> int:
        tracker.apply(c.case_id, (c.key, *c.copies), grades.get((c.case_id, c.key), 0))
        return 1

    current = tracker.state
    if shuffle is not None:
        rng = random.Random(shuffle)

        def current():
            st = tracker.state()
            cands = list(st.candidates)
            rng.shuffle(cands)
            return replace(st, candidates=tuple(cands))

    if explore:
        current = exploring(current, explore, seed)
    if trace:
        current = traced(current, trace, full, len(shared))
    started = time.perf_counter()
    report = run_loop(current, label, budget=None, say=lambda _t: None)
    s = report.last.settling
    return {"pool": pool, "passages": pool_passages, "labels": report.labels, "declared": s.declared,
            "rule": "certain" if s.certain else "confident", "p": s.confidence.probability if s.confidence else 1.0,
            "full": full.winner, "full_delta": full.delta, "full_p": full.p, "stopped": report.stopped,
            "judged": judged, "seconds": time.perf_counter() - started}


class KnownRates(PairTracker):
    """The rule with nothing left to learn (``--model known``): its model is fitted once on every pool
    passage with the truth's verdict, and has no per-question factor (which only widens the draws). The
    labels it still needs are what the unjudged verdicts' own chance costs when every rate is known. Not
    a floor: a learning rule whose rates lean away from the threshold can settle sooner (Cranfield
    recall@10 vector vs hybrid: 1014 known, 454 learning under one seed, 1076 and 1272 under two others)."""

    def know(self, grades) -> None:
        every = [Judged(c.rank_a, c.rank_b, grades.get((cid, c.key), 0), None, self._features(c))
                 for cid, row in self.cases.items() for c in row[4]]
        self._known = FeatureModel(every, len(FEATURES), by_rank=self.by_rank)
        self._known.dispersion = lambda: 0.0  # case_factors: every factor 1

    def model(self):
        return self._known


def exploring(current, every: int, seed: int):
    """``current`` whose every ``every``-th offer is a seeded random pool passage instead of the order's
    first: the model then learns its rates partly from passages chosen without regard to them (the
    decide order labels few passages that both runs rank, and the ones it picks in a cell are not a
    random sample of it)."""
    rng = random.Random(seed)
    step = itertools.count()

    def current_exploring():
        st = current()
        if next(step) % every == every - 1 and len(st.candidates) > 1:
            cands = list(st.candidates)
            cands.insert(0, cands.pop(rng.randrange(len(cands))))
            st = replace(st, candidates=tuple(cands))
        return st
    return current_exploring


def traced(current, every: int, full, n: int):
    """``current`` that also prints, at every ``every``-th step, the confident rule's drawn final t (mean
    and sd over the draws) beside the whole pool's t: whether the draws bracket the answer, and how wide."""
    t_full = math.copysign(sps.t.isf(full.p / 2, n - 1), full.delta) if full.p > 0 else math.inf
    step = itertools.count()

    def current_traced():
        st = current()
        i = next(step)
        c = st.settling.confidence
        if i % every == 0 and c is not None:
            print(f"  trace: {i} labels: drawn final t {c.t_mean:+.2f} ± {c.t_sd:.2f} over {c.draws} draws "
                  f"(P {c.probability:.3f} {c.winner}); the whole pool's t {t_full:+.2f}", flush=True)
        return st
    return current_traced


def whole_pool(metric: str, va, vb, text_of, grades, alpha: float):
    """The decision once every pool passage has the truth's verdict: what labelling the whole pool decides
    (the worst-case tracker: it fits no model), scored as the rule scores every step."""
    tracker = PairTracker(metric, va, vb, text_of, alpha=alpha, stop="certain")
    for c in tracker.state().candidates:
        tracker.apply(c.case_id, (c.key, *c.copies), grades.get((c.case_id, c.key), 0))
    end = tracker.state()
    assert not end.candidates, "the whole pool was labelled"
    return end.settling.now


def null_lists(ra, rb, seed: int):
    """Two runs made exchangeable: per case a coin decides which of the two real lists each side gets,
    so neither side is better by construction (the full pool's decision is a tie but for chance)."""
    rng = random.Random(seed)
    xa, xb = {}, {}
    for cid in sorted(set(ra) & set(rb)):
        if rng.random() < 0.5:
            xa[cid], xb[cid] = ra[cid], rb[cid]
        else:
            xa[cid], xb[cid] = rb[cid], ra[cid]
    return xa, xb


def count(text: str) -> int:
    """An argparse type: a whole number, 0 or more."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n} is below 0")
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--golden", type=Path, required=True, help="the fully judged golden file (the truth)")
    ap.add_argument("--corpus", required=True, help="the corpus folder (or 'demo'): passage texts for dedup")
    ap.add_argument("--corpus-name", default=None)
    ap.add_argument("--runs", nargs="+", default=None)
    ap.add_argument("--sweep", default=None)
    ap.add_argument("--last-sweep", action="store_true")
    ap.add_argument("--metrics", nargs="+", default=["recall_at_5", "mrr_at_10", "ndcg_at_10"])
    ap.add_argument("--keep-evidence", choices=("all", "first"), default="all")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--pairs-with", default=None, metavar="RUN_ID", help="only the pairs that include this run")
    ap.add_argument("--stop", nargs="+", choices=STOP_RULES, default=list(STOP_RULES),
                    help="the stopping rules to replay (a table each)")
    ap.add_argument("--level", type=float, default=LEVEL, help="the confident rule's level")
    ap.add_argument("--first-seed", type=count, default=SEED, help="the confident rule's first Monte Carlo seed "
                    f"(default {SEED}, the rule's own; --seeds N goes on from it)")
    ap.add_argument("--seeds", type=count, default=1,
                    help="the confident rule's Monte Carlo seeds per pair (a row each): its wrong-settled rate")
    ap.add_argument("--random-orders", type=count, default=0, metavar="N",
                    help="also label each pair in N random orders (seeded): the rule without the decide order")
    ap.add_argument("--order-by", choices=ORDERS, default=None,
                    help="the decide order: also what a label teaches the model, given to one passage per cell "
                    "drawn at random (learn-sampled: the default of --stop confident, as golden label --decide), "
                    "weight x sqrt(p (1 - p)) of the passage's rate alone (spread: the default before), by weight "
                    "(the default of --stop certain), or the teaching given to every passage (learn: measured and "
                    "not adopted, it declared a wrong tie on Cranfield; docs/how-to/golden-growth.md)")
    ap.add_argument("--model", choices=("features", "cells", "known"), default="features",
                    help="the confident rule's relevance model: per passage from its cell and features (default, as "
                    "golden label --decide), one rate per cell (the rule before), or known: the features model fitted "
                    "once on the whole pool's verdicts, without the per-question factor (a rule with nothing left to "
                    "learn: what the unjudged verdicts' own chance costs; use with --order-by spread)")
    ap.add_argument("--trace", type=count, default=0, metavar="N",
                    help="print at every N-th label the confident rule's drawn final t statistic (mean ± sd over "
                    "the draws) beside the whole pool's t")
    ap.add_argument("--explore", type=count, default=0, metavar="N",
                    help="every N-th offer a seeded random pool passage instead of the decide order's first (an "
                    "experiment: rates learnt from passages not chosen by them)")
    ap.add_argument("--null", type=count, default=0, metavar="N",
                    help="instead: N null pairs per pair (per case a coin swaps the two lists), the rate at which "
                    "a decision other than a tie is declared settled where the full pool gives a tie")
    args = ap.parse_args(argv)
    if args.runs:
        runs = [get_run(r, per_case=False) for r in args.runs]
    else:
        runs, _ = select_runs((), args.sweep, args.last_sweep, None)
    truth = load_golden(args.golden)
    start = without_judgements(args.golden, args.keep_evidence)
    docs = load_corpus(args.corpus if args.corpus == "demo" else project_path(args.corpus), args.corpus_name)
    text_of = doc_text_of(docs)
    ranked = {r.id: load_ranked_lists(r) for r in runs}
    label = {r.id: r.tags.get("variant") or r.label for r in runs}
    if len(set(label.values())) < len(label):  # sweep points of one variant: the overrides tell them apart
        label = {r.id: (r.label.split() or [r.id[:8]])[0] for r in runs}
    print(f"truth: {args.golden} ({len(truth.scorable)} scorable cases); start: its judgements removed"
          f"{' and each case cut to its first relevant span' if args.keep_evidence == 'first' else ''}")
    pairs = [(a, b) for a, b in itertools.combinations(runs, 2) if not args.pairs_with or args.pairs_with in (a.id, b.id)]
    if args.null:
        return null_table(args, pairs, ranked, label, start, truth, text_of)
    for stop in args.stop:
        print(f"\n### --stop {stop}" + (f" (level {args.level:g})" if stop == "confident" else ""))
        print("| metric | pair (A vs B) | order | pool | labels to settle | share | declared | rule | P | full pool "
              "| agree |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        wrong = over = rows = 0
        for metric in args.metrics:
            for a, b in pairs:
                min_cov = params_from_flat(a.params).min_coverage
                names = {"A": label[a.id], "B": label[b.id], "tie": "tie"}
                seeds = range(args.first_seed, args.first_seed + (args.seeds if stop == "confident" else 1))
                variants = [("decide", s, None) for s in seeds]
                variants += [(f"random {i}", SEED, 1000 + i) for i in range(args.random_orders)]
                for order_name, seed, shuffle in variants:
                    r = replay_pair(metric, start, truth, ranked[a.id], ranked[b.id], min_cov, text_of, args.alpha,
                                    stop=stop, seed=seed, shuffle=shuffle, level=args.level, order_by=args.order_by,
                                    model=args.model, trace=args.trace, explore=args.explore)
                    share = r["labels"] / r["pool"] if r["pool"] else 0.0
                    agree = r["declared"] == r["full"]
                    rows += 1
                    wrong += not agree
                    over += r["full"] != "tie" and share > 0.30 and shuffle is None
                    full = f"{names[r['full']]} (Δ{r['full_delta']:+.3f}, p={r['full_p']:.3f})"
                    j = r["judged"]
                    if (j.winner, round(j.delta, 3), round(j.p, 3)) != (r["full"], round(r["full_delta"], 3),
                                                                       round(r["full_p"], 3)):
                        full += f"; every judgement: {names[j.winner]} (Δ{j.delta:+.3f}, p={j.p:.3f})"
                    seed_note = f" seed {seed}" if (args.seeds > 1 or args.first_seed != SEED) and shuffle is None else ""
                    print(f"| {metric} | {label[a.id]} vs {label[b.id]} | {order_name}{seed_note} | {r['pool']} | "
                          f"{r['labels']} | {share:.0%} | {names[r['declared']]} | {r['rule']} | {r['p']:.3f} | "
                          f"{full} | {'yes' if agree else 'NO'} |")
                    sys.stdout.flush()
        print(f"--stop {stop}: wrong decisions declared settled: {wrong} of {rows} replays; pairs the full pool "
              f"separates that took more than 30% of the pool (decide order): {over}")
    return 0


def null_table(args, pairs, ranked, label, start, truth, text_of) -> int:
    """The null rate of settled: replays on exchangeable pairs, per rule."""
    for stop in args.stop:
        declared_non_tie = full_tie = wrong = n = 0
        labels = 0.0
        for metric in args.metrics:
            for a, b in pairs:
                min_cov = params_from_flat(a.params).min_coverage
                for i in range(args.null):
                    xa, xb = null_lists(ranked[a.id], ranked[b.id], 5700 + i)
                    r = replay_pair(metric, start, truth, xa, xb, min_cov, text_of, args.alpha, stop=stop,
                                    level=args.level, model=args.model, order_by=args.order_by)
                    n += 1
                    labels += r["labels"] / max(r["pool"], 1)
                    if r["full"] == "tie":
                        full_tie += 1
                        declared_non_tie += r["declared"] != "tie"
                    wrong += r["declared"] != r["full"]
                    print(f"null {stop} {metric} {label[a.id]}~{label[b.id]} #{i}: pool {r['pool']}, labels "
                          f"{r['labels']}, declared {r['declared']} ({r['rule']}, P {r['p']:.3f}), full pool {r['full']} "
                          f"(p={r['full_p']:.3f}); every judgement {r['judged'].winner} (p={r['judged'].p:.3f})")
                    sys.stdout.flush()
        print(f"--stop {stop}: {n} null pairs; the full pool gives a tie in {full_tie}; of those a decision other "
              f"than a tie was declared settled in {declared_non_tie} ({declared_non_tie / max(full_tie, 1):.1%}); "
              f"declared differs from the full pool in {wrong} of {n}; mean share of the pool labelled "
              f"{labels / max(n, 1):.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
