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
(the paired t-test on the truth, unjudged = miss, as compare would score it) and whether they agree.
A settled decision that differs from the full pool's is a wrong decision declared settled.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag_experiments.corpus.loader import load_corpus  # noqa: E402
from rag_experiments.evaluation import bounds as B  # noqa: E402
from rag_experiments.evaluation.relevance import credit  # noqa: E402
from rag_experiments.evaluation.rescore import params_from_flat  # noqa: E402
from rag_experiments.golden.decide import outcome, run_loop  # noqa: E402
from rag_experiments.golden.golden_file import GoldenFile  # noqa: E402
from rag_experiments.golden.records import Case, Judgement  # noqa: E402
from rag_experiments.golden.resolve import load_golden, resolve  # noqa: E402
from rag_experiments.paths import project_path  # noqa: E402
from rag_experiments.tracking.pool import PairTracker, doc_text_of  # noqa: E402
from rag_experiments.tracking.runs import get_run, select_runs  # noqa: E402
from rag_experiments.tracking.versioned import load_ranked_lists  # noqa: E402


def start_golden(path: Path, keep: str):
    """The truth's file without its judgements (and, with keep=first, each case's first relevant span only)."""
    records = GoldenFile(path).read_records()
    kept = []
    for r in records:
        if isinstance(r, Judgement):
            continue
        if keep == "first" and isinstance(r, Case) and r.evidence:
            best = max(range(len(r.evidence)), key=lambda i: (r.evidence[i][1], -i))
            r = replace(r, evidence=(r.evidence[best],), groups=(r.groups[best],) if r.groups else r.groups)
        kept.append(r)
    return resolve(tuple(kept), path, "start")


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


def replay_pair(metric: str, start, truth, ra, rb, min_cov: float, text_of, alpha: float):
    k = B.metric_parts(metric)[1]
    va, vb = B.views(start, ra, k, min_cov), B.views(start, rb, k, min_cov)
    ta, tb = B.views(truth, ra, k, min_cov), B.views(truth, rb, k, min_cov)
    shared = [cid for cid in va if cid in vb and cid in ta and cid in tb]
    va, vb = {c: va[c] for c in shared}, {c: vb[c] for c in shared}
    name = B.metric_parts(metric)[0]
    full = outcome([B.value(name, k, ta[c]) - B.value(name, k, tb[c]) for c in shared], alpha)
    grades = truth_grades(truth, ra, k, min_cov)
    for key, g in truth_grades(truth, rb, k, min_cov).items():
        grades[key] = max(grades.get(key, 0), g)
    tracker = PairTracker(metric, va, vb, text_of, alpha=alpha)
    first = tracker.state()
    pool = len(first.candidates)
    pool_passages = sum(1 + len(c.copies) for c in first.candidates)

    def label(c) -> int:
        tracker.apply(c.case_id, (c.key, *c.copies), grades.get((c.case_id, c.key), 0))
        return 1

    report = run_loop(tracker.state, label, budget=None, say=lambda _t: None)
    declared = report.last.settling.low
    return {"pool": pool, "passages": pool_passages, "labels": report.labels, "declared": declared.winner,
            "full": full.winner, "full_delta": full.delta, "full_p": full.p, "stopped": report.stopped}


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
    args = ap.parse_args(argv)
    if args.runs:
        runs = [get_run(r, per_case=False) for r in args.runs]
    else:
        runs, _ = select_runs((), args.sweep, args.last_sweep, None)
    truth = load_golden(args.golden)
    start = start_golden(args.golden, args.keep_evidence)
    docs = load_corpus(args.corpus if args.corpus == "demo" else project_path(args.corpus), args.corpus_name)
    text_of = doc_text_of(docs)
    ranked = {r.id: load_ranked_lists(r) for r in runs}
    label = {r.id: r.tags.get("variant") or r.label for r in runs}
    print(f"truth: {args.golden} ({len(truth.scorable)} scorable cases); start: its judgements removed"
          f"{' and each case cut to its first relevant span' if args.keep_evidence == 'first' else ''}")
    print("| metric | pair (A vs B) | pool (passages) | labels to settle | share | declared | full pool | agree |")
    print("|---|---|---|---|---|---|---|---|")
    wrong, over = 0, 0
    for metric in args.metrics:
        for a, b in itertools.combinations(runs, 2):
            if args.pairs_with and args.pairs_with not in (a.id, b.id):
                continue
            min_cov = params_from_flat(a.params).min_coverage
            r = replay_pair(metric, start, truth, ranked[a.id], ranked[b.id], min_cov, text_of, args.alpha)
            share = r["labels"] / r["pool"] if r["pool"] else 0.0
            names = {"A": label[a.id], "B": label[b.id], "tie": "tie"}
            agree = r["declared"] == r["full"]
            wrong += not agree
            over += r["full"] != "tie" and share > 0.30
            full = f"{names[r['full']]} (Δ{r['full_delta']:+.3f}, p={r['full_p']:.3f})"
            print(f"| {metric} | {label[a.id]} vs {label[b.id]} | {r['pool']} ({r['passages']}) | {r['labels']} | "
                  f"{share:.0%} | {names[r['declared']]} | {full} | {'yes' if agree else 'NO'} |")
            sys.stdout.flush()
    print(f"wrong decisions declared settled: {wrong}; pairs the full pool separates that took more than 30% "
          f"of the pool: {over}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
