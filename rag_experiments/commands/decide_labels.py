"""`rag-exp golden label --decide A B`: label the passages that can change the decision between two
runs, in the order that settles it, and stop when it is settled (rag_experiments.golden.decide).

The verdicts go through the existing paths, with the provenance they record today: a person in the
terminal (``--by-hand``), a blind CSV in that order with a ``why`` column (``--export``; ``--import``
as always), or the LLM judge (the default). After each verdict the two runs' stored ranked lists
are rescored on the golden file as it now is (no re-run), and the line prints labels done, labels
left, the Δ with its bounds and the decision.
"""

from __future__ import annotations

import argparse
import csv
import io
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..corpus.loader import load_corpus
from ..errors import UserError
from ..evaluation import bounds as B
from ..evaluation.metric_key import MetricKey
from ..golden import hand_label as hl
from ..golden.decide import ALPHA, QUIT, SKIP, Candidate, run_loop, step_line, without_judgements
from ..golden.golden_file import GoldenFile
from ..golden.label import plan_labelling, run_labelling
from ..golden.relevance_features import case_queries
from ..golden.resolve import load_golden
from ..stats.maxt import all_pairs
from ..tracking.compare import run_labels
from ..tracking.configured import objective
from ..tracking.decide_tracker import PairTracker, SweepTracker, judged_in_pool
from ..tracking.pool import decide_run, decide_views, doc_text_of, ranked_of
from ..tracking.runs import sweep_children
from ..tracking.sweep_parent import best_of
from .llm_job import configured_corpus, counter_line, resolve_llm, run_llm_job
from .sheet_args import same_sheet_args

DEFAULT_METRIC = "recall_at_5"


def decide_metric(args: argparse.Namespace, run) -> str:
    metric = args.decide_metric or (MetricKey.parse(objective(run)).column if objective(run) else DEFAULT_METRIC)
    try:
        B.metric_parts(metric)
    except ValueError as exc:
        raise UserError(f"--decide-metric {metric}: {exc}", hint="e.g. --decide-metric recall_at_5") from None
    return metric


class Decision:
    """The runs, their ranked lists, the corpus: the state read again after every verdict. Two runs
    (``--decide A B``), or a sweep's best point against the points max-T cannot tell from it
    (``--decide --sweep PARENT``: :func:`sweep_points`)."""

    def __init__(self, args: argparse.Namespace, docs) -> None:
        self.args = args
        if args.sweep:
            runs = [r for r in sweep_children(args.sweep, per_case=False) if r.status == "FINISHED"]
            if len(runs) < 2:
                raise UserError(f"--sweep {args.sweep}: {len(runs)} finished point(s); a choice needs two or more",
                                hint="give a sweep parent's run id (the sweep prints it; the MLflow UI shows it above its points)")
        else:
            runs = [decide_run(args.decide[0]), decide_run(args.decide[1])]
            if runs[0].id == runs[1].id:
                raise UserError(f"--decide: {args.decide[0]} and {args.decide[1]} are the same run",
                                hint="give two different runs")
        self.metric = decide_metric(args, runs[0])
        self.k = B.metric_parts(self.metric)[1]
        self.ranked = {r.id: ranked_of(r) for r in runs}
        # the deepest stored list: a cut-off past it reads the lists whole (recall@50 on lists of 20 is recall@20)
        self.depth = max((len(lst.hits) for lists in self.ranked.values() for lst in lists.values()), default=0)
        self.docs = {d.doc_id: d for d in docs}
        self.text_of = doc_text_of(docs)
        self.start = without_judgements(args.golden)
        if args.sweep:
            runs = sweep_points(runs, self.views(load_golden(args.golden), runs), self.metric)
        self.runs = runs
        self.a, self.b = runs[0], runs[1]
        # named as compare's table names them (retrieval=hybrid), not by run names that carry every
        # override (retrieval=hybrid db.pgdata=/tmp/...): the git-doc transcript's finding 3
        self.label = dict(zip((r.id for r in runs), run_labels(runs)))
        self.names = (self.label[self.a.id], self.label[self.b.id] if not args.sweep else "the tied points")
        self.pool = {"decide": [r.id for r in runs], "metric": self.metric, "k": self.k}

    def views(self, golden, runs) -> dict[str, dict]:
        return {r.id: decide_views(golden, r, self.ranked[r.id], self.metric) for r in runs}

    def tracker(self, a, b, now: dict, start: dict) -> PairTracker:
        queries = case_queries(self.start.cases)  # the relevance model's features, as the replay passes them
        judged, known = judged_in_pool(start[a.id], start[b.id], now[a.id], now[b.id], self.k, self.text_of, queries)
        return PairTracker(self.metric, now[a.id], now[b.id], self.text_of, (self.label[a.id], self.label[b.id]),
                           stop=self.args.stop, level=self.args.stop_level, judged=judged, known=known,
                           queries=queries)

    def state(self):
        now = self.views(load_golden(self.args.golden), self.runs)
        start = self.views(self.start, self.runs)
        if not self.args.sweep:
            state = self.tracker(self.a, self.b, now, start).state()
        else:
            best = self.runs[0]
            state = SweepTracker({(self.label[best.id], self.label[r.id]): self.tracker(best, r, now, start)
                                  for r in self.runs[1:]}).state()
        return replace(state, judged=judged_pool_passages(start, now, self.k))

    def hits(self, c: Candidate) -> list[dict]:
        """The passage and its copies as labelling's hit dicts (the copies become near-duplicates)."""
        out = []
        for key in (c.key, *c.copies):
            doc_id, _, span = key.rpartition(":")
            start, end = (int(x) for x in span.split("-"))
            d = self.docs[doc_id]
            out.append({"chunk_id": key, "doc_id": doc_id, "source_uri": d.source_uri, "start": start, "end": end,
                        "text": d.text[start:end], "doc_hash": d.content_hash,
                        "rank": min(r for r in (c.rank_a, c.rank_b) if r)})
        return out

    def retrieve_for(self, chosen: list[Candidate]):
        queries = {c.case_id: c.query for c in load_golden(self.args.golden).cases}
        by_query: dict[str, list[dict]] = {}
        for c in chosen:
            by_query.setdefault(queries.get(c.case_id, ""), []).extend(self.hits(c))
        return lambda q: by_query.get(q, [])


def judged_pool_passages(start: dict[str, dict], now: dict[str, dict], k: int) -> int:
    """The labels this decision has: the passages in any of the runs' top ``k`` that the golden set
    without its judgements leaves unjudged (the decision's pool) and that are judged now, by anyone and
    any route (a CSV import, the terminal, the judge, a copy's applied verdict), each counted once."""
    judged: set[tuple[str, str]] = set()
    for rid, views in start.items():
        for cid, view in views.items():
            later = now[rid].get(cid)
            if later is None:
                continue
            for key in view.unknown(k):
                if isinstance(later.slots[view.slots.index(key)], int):
                    judged.add((cid, key))
    return len(judged)


def sweep_points(runs: list, views: dict[str, dict], metric: str) -> list:
    """The sweep's best point on ``metric`` as the labels read now (:func:`sweep_parent.best_of`, the
    one tie rule) first, then the points the max-T test over every pair of points cannot tell from it
    (:func:`rag_experiments.stats.maxt.all_pairs`, as the sweep parent's verdict); when it tells every
    point from the best, the runner-up, so there is a choice to settle."""
    name, k = B.metric_parts(metric)
    shared = sorted(set.intersection(*(set(v) for v in views.values())))
    values = {r.id: [B.value(name, k, views[r.id][c]) for c in shared] for r in runs}
    mean = {rid: sum(v) / len(v) if v else 0.0 for rid, v in values.items()}
    best = best_of(runs, lambda r: mean[r.id])
    others = sorted((r for r in runs if r.id != best.id), key=lambda r: -mean[r.id])
    p = all_pairs(np.column_stack([values[r.id] for r in (best, *others)]))[0, 1:]
    tied = [r for r, q in zip(others, p) if q >= ALPHA]
    return [best, *(tied or others[:1])]


def label_decide(args: argparse.Namespace, console: Any, say, labeller: str) -> int:
    docs = load_corpus(configured_corpus(args.overrides))
    d = Decision(args, docs)
    a, b = d.names
    if args.sweep:
        say(console, f"deciding the best point of sweep {args.sweep[:12]} on {MetricKey.parse(d.metric).title}: {a} "
                     f"against {', '.join(d.label[r.id] for r in d.runs[1:])} (max-T cannot tell them from it); the "
                     f"passages unjudged in any top {d.k}, the one whose verdict can move a Δ most first",
            soft_wrap=True)
    else:
        say(console, f"deciding {a} ({d.a.id[:12]}) vs {b} ({d.b.id[:12]}) on {MetricKey.parse(d.metric).title}: "
                     f"the passages unjudged in either top {d.k}, the one whose verdict can move Δ most first")
    if d.depth < d.k:
        say(console, f"note: the runs' stored ranked lists hold at most {d.depth} hits a question, so "
                     f"{MetricKey.parse(d.metric).title} is decided on their top {d.depth} (the same as a cut-off of "
                     f"{d.depth}); a deeper cut-off needs runs that retrieve deeper", soft_wrap=True)
    if args.export is not None:
        return _export(d, args, console, say)
    if args.by_hand and args.dry_run:  # the LLM route's dry run is run_llm_job's (an estimate, nothing sent)
        say(console, step_line(d.state(), 0, a, b), soft_wrap=True)
        say(console, "dry run: nothing offered, nothing recorded")
        return 0
    if args.by_hand:
        def label(c: Candidate) -> int:
            plan = hl.plan_hand_labelling(args.golden, d.retrieve_for([c]), k=10**9, pool=d.pool)
            if not plan.offers and not plan.applied:
                return SKIP  # judged in the meantime under another span: read the state again
            report = hl.run_terminal(plan, labeller=labeller, doc_text=lambda i: d.docs[i].text if i in d.docs
                                     else None, console=console, judge_kind=args.judge_kind)
            if report.interrupted:
                return QUIT
            if report.labels or report.applied_earlier:
                return report.labels or 1
            return SKIP if report.skipped else QUIT

        report = run_loop(d.state, label, budget=args.max_labels, say=lambda t: say(console, t, soft_wrap=True),
                          a=a, b=b)
        return 0 if report.stopped != "quit" else 130
    return _judge(d, args, console, say)


def _export(d: Decision, args: argparse.Namespace, console: Any, say) -> int:
    """The candidates in the order that settles the decision, with a ``why`` column (import as always)."""
    state = d.state()
    # what the terminal loop prints at each step (labels done, left, Δ, the decision now): a new user on the
    # CSV route ran a --dry-run after every import to see them (nginx docs, 2026-12-07)
    say(console, step_line(state, 0, *d.names, before=state.judged), soft_wrap=True)
    if state.settling.settled:
        say(console, "nothing to export: the decision is settled")
        return 0
    chosen = list(state.candidates[: args.max_labels] if args.max_labels else state.candidates)
    plan = hl.plan_hand_labelling(args.golden, d.retrieve_for(chosen), k=10**9, pool=d.pool)
    position = {(c.case_id, c.key): i for i, c in enumerate(chosen)}
    title = MetricKey.parse(d.metric).title
    why = {o.pair_id: chosen[position[(o.pair.case_id, _key(o))]].why(*d.names, title)
           for o in plan.offers if (o.pair.case_id, _key(o)) in position}
    ordered = sorted(plan.offers, key=lambda o: position.get((o.pair.case_id, _key(o)), 10**9))
    plan = replace(plan, offers=tuple(ordered))
    n = hl.export_csv(plan, args.export, {k: v.text for k, v in d.docs.items()}.get)
    _add_why(Path(args.export), why)
    if plan.applied:
        hl.append_held(GoldenFile(args.golden), list(plan.applied))
    again = same_sheet_args(args)  # the import needs the same golden file, corpus and labeller
    say(console, f"wrote {n} passage(s) to {args.export} in the order that settles the decision (column why); "
                 f"skipped: {counter_line(plan.skipped)}; fill in the verdict column, import it with "
                 f"rag-exp golden label {' '.join(again)} --import {shlex.quote(str(args.export))}, then run --decide "
                 "again to see whether it is settled"
                 + (" (a --set with a secret is masked as ***: put the value back)" if again.masked else ""),
        soft_wrap=True)
    return 0


def _key(offer) -> str:
    h = offer.pair.hit
    return B.passage_key(h["doc_id"], h["start"], h["end"])


def _add_why(path: Path, why: dict[str, str]) -> None:
    """Insert the ``why`` column before ``verdict`` (import reads columns by name)."""
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    head = rows[0]
    at = head.index("verdict")
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow([*head[:at], "why", *head[at:]])
    for row in rows[1:]:
        w.writerow([*row[:at], why.get(row[0], ""), *row[at:]])
    path.write_text(out.getvalue(), encoding="utf-8")


def _judge(d: Decision, args: argparse.Namespace, console: Any, say) -> int:
    """The LLM judge, a round of ``--concurrency`` passages at a time (best first), until settled or
    the budget; the first round's confirmation (the estimate of that round) covers the rounds after it."""
    price = resolve_llm(args)
    size = max(1, args.concurrency)
    done = {"labels": 0, "rounds": 0}

    def label(_first: Candidate) -> int:
        state = d.state()
        room = size if args.max_labels is None else max(1, min(size, args.max_labels - done["labels"]))
        plan = plan_labelling(args.golden, d.retrieve_for(list(state.candidates[:room])), k=10**9, model=args.model,
                              price=price, pool=d.pool, provider=args.provider)
        if not plan.pending:
            return SKIP
        report = run_llm_job(args, console, plan, run_labelling, "judging", price)
        if isinstance(report, int):  # a dry run, or the estimate declined
            return QUIT
        args.yes = True
        done["rounds"] += 1
        done["labels"] += report.judgements_appended
        return report.judgements_appended or QUIT

    report = run_loop(d.state, label, budget=args.max_labels, say=lambda t: say(console, t, soft_wrap=True),
                      a=d.names[0], b=d.names[1])
    say(console, f"LLM rounds: {done['rounds']}, judgements appended: {done['labels']}")
    return 0 if report.stopped != "quit" else 1
