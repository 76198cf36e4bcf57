"""The decision of ``golden label --decide`` kept per case: a verdict re-reads only its own case (the
loop asks after every label; the replay labels hundreds).

:class:`PairTracker` holds two runs' case views (:mod:`rag_experiments.evaluation.bounds`), the Δ's
ends per case, the weights of the unjudged passages, and for the confident rule
(:mod:`rag_experiments.golden.decide_stop`) each case's table of units to draw. The judged pool
passages that feed the rule's model are the verdicts applied here plus those given before
(:func:`judged_in_pool`: passages unjudged in the views without any judgement, judged now).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping, Sequence

import numpy as np

from ..evaluation import bounds as B
from ..evaluation.metric_key import MetricKey
from ..golden.decide import (ALPHA, Candidate, State, favoured_side, in_tail, normalised_text, one_per_text, order,
                             settle, text_groups)
from ..golden.decide_stop import (DRAWS, LEVEL, SEED, CaseTable, Judged, RelevanceModel, cell_of, confidence,
                                  learning_values, side_sign)
from ..golden.relevance_features import FEATURES, features
from ..golden.relevance_logit import FeatureModel

STOP_RULES = ("confident", "certain")
ORDERS = ("spread", "weight", "learn", "learn-sampled")  # PairTracker's order_by
# metrics whose relevance model splits the passages both runs rank by which ranks them higher (cell_of's
# by_rank): measured on MRR@10; nDCG also reads ranks but was replayed only with the cells before (and
# the favoured side: docs/how-to/golden-growth.md, "One side first"), so it keeps them
RANKED_METRICS = ("mrr",)


def judged_in_pool(start_a: Mapping[str, B.CaseView], start_b: Mapping[str, B.CaseView],
                   now_a: Mapping[str, B.CaseView], now_b: Mapping[str, B.CaseView], k: int,
                   text_of: Callable[[str], str], queries: Mapping[str, str] | None = None,
                   ) -> tuple[list[Judged], dict[tuple[str, str], int]]:
    """The pool passages judged since the start views (the golden set without its judgements): per
    passage where each run ranks it, its grade now and (``queries``: case -> question) its features;
    and (case, normalised text) -> grade."""
    judged: list[Judged] = []
    known: dict[tuple[str, str], int] = {}
    for cid in start_a:
        if cid not in start_b or cid not in now_a or cid not in now_b:
            continue
        ua, ub = start_a[cid].unknown(k), start_b[cid].unknown(k)
        for key in dict.fromkeys([*ua, *ub]):
            ra = start_a[cid].slots.index(key) + 1 if key in ua else None
            rb = start_b[cid].slots.index(key) + 1 if key in ub else None
            grade = now_a[cid].slots[ra - 1] if ra else now_b[cid].slots[rb - 1]
            if isinstance(grade, int):
                text = text_of(key)
                feats = features(queries.get(cid, ""), text or "") if queries is not None else ()
                judged.append(Judged(ra, rb, grade, cid, feats))
                if text:
                    known[(cid, normalised_text(text))] = grade
    return judged, known


class PairTracker:
    """The decision between two runs, per case: the Δ's ends, its value now, the unjudged passages'
    weights, and (``stop="confident"``) the table the rule draws from."""

    def __init__(self, metric: str, a: Mapping[str, B.CaseView], b: Mapping[str, B.CaseView],
                 text_of: Callable[[str], str], names: tuple[str, str] = ("A", "B"), alpha: float = ALPHA, *,
                 stop: str = "confident", level: float = LEVEL, draws: int = DRAWS, seed: int = SEED,
                 judged: Sequence[Judged] = (), known: Mapping[tuple[str, str], int] | None = None,
                 order_by: str | None = None, queries: Mapping[str, str] | None = None) -> None:
        if stop not in STOP_RULES:
            raise ValueError(f"stop rule {stop!r}: one of {', '.join(STOP_RULES)}")
        if order_by is not None and order_by not in ORDERS:
            raise ValueError(f"order {order_by!r}: one of {', '.join(ORDERS)}")
        self.metric, self.text_of, self.names, self.alpha = metric, text_of, names, alpha
        self.stop, self.level, self.draws, self.seed = stop, level, draws, seed
        # learn-sampled (the confident rule's default: spread's value, and what a label teaches the model
        # given to one passage per cell drawn at random, decide_stop.learning_values) | spread (the default
        # before: weight x sqrt(p (1 - p)) of the passage's own rate, the verdict's expected change of Δ) |
        # weight (the certain rule's: the largest change first) | learn (measured, not adopted: the teaching
        # given to every passage, so the heaviest of a cell taught it; a wrong tie on Cranfield). Measured in
        # docs/how-to/golden-growth.md: learn-sampled declared no wrong decision on the demo, Cranfield,
        # git-doc's 11 orders or 17 null pairs, with fewer labels than spread except on Cranfield's MRR@10
        # (for MRR a passage's weight is the expected change of its case's Δ under the model: mrr_effects)
        self.order_by = order_by or ("learn-sampled" if stop == "confident" else "weight")
        self.judged = list(judged)
        # case -> question: each passage's own rate from its features (relevance_logit), not only its cell's
        self.queries = queries
        self.known = dict(known or {})
        self.name, self.k = B.metric_parts(metric)
        self.by_rank = self.name in RANKED_METRICS  # the model's cells: decide_stop.cell_of
        shared = [cid for cid in a if cid in b]
        self.a, self.b = {c: a[c] for c in shared}, {c: b[c] for c in shared}
        self.cases: dict[str, tuple] = {}
        for cid in shared:
            self._read(cid)

    def _read(self, cid: str) -> None:
        va, vb = self.a[cid], self.b[cid]
        cands = [Candidate(s.case_id, s.key, s.weight, s.rank_a, s.rank_b, self.text_of(s.key))
                 for s in B.case_sways(self.name, self.k, cid, va, vb, len(self.a))]
        self.cases[cid] = (*B.case_delta(self.name, self.k, va, vb), cands, self._table(va, vb, cands))

    def _table(self, va: B.CaseView, vb: B.CaseView, cands: Sequence[Candidate]):
        """The case's units (one per text: copies take one verdict), their cells and texts; or None."""
        if not cands:
            return None
        groups = text_groups(cands)  # a near-duplicate takes the one verdict the loop asks for its group
        firsts: list[Candidate] = []
        ranks: list[list[int | None]] = []
        for c, i in zip(cands, groups):
            if i == len(firsts):
                firsts.append(c)
                ranks.append([c.rank_a, c.rank_b])
            ranks[i] = [_best(ranks[i][0], c.rank_a), _best(ranks[i][1], c.rank_b)]
        texts = [normalised_text(f.text) if f.text else f.key for f in firsts]
        table = CaseTable(self.name, self.k, va, vb, texts, {c.key: i for c, i in zip(cands, groups)})
        # a text group's features: its first passage's
        return table, [cell_of(ra, rb, self.by_rank) for ra, rb in ranks], texts, [self._features(f) for f in firsts]

    def _features(self, c: Candidate) -> tuple[float, ...]:
        return features(self.queries.get(c.case_id, ""), c.text) if self.queries is not None else ()

    def model(self) -> RelevanceModel:
        """The relevance model of the judged pool passages: with the features when the questions are known."""
        if self.queries is None:
            return RelevanceModel(self.judged, by_rank=self.by_rank)
        return FeatureModel(self.judged, len(FEATURES), by_rank=self.by_rank)

    def apply(self, case_id: str, keys: Sequence[str], grade: int) -> None:
        """Record a verdict on ``keys`` (a passage and its copies) of one case."""
        mine = [c for c in self.cases[case_id][4] if c.key in keys]
        if mine:
            self.judged.append(Judged(_best(*(c.rank_a for c in mine)), _best(*(c.rank_b for c in mine)), grade,
                                      case_id, self._features(mine[0])))
            for c in mine:  # every text of the group: a near-duplicate's differs from the first's
                if c.text:
                    self.known[(case_id, normalised_text(c.text))] = grade
        for key in keys:
            self.a[case_id] = B.with_verdict(self.a[case_id], key, grade)
            self.b[case_id] = B.with_verdict(self.b[case_id], key, grade)
        self._read(case_id)

    def state(self) -> State:
        rows = list(self.cases.values())
        d = B.delta_of(self.metric, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                       sum(r[3] for r in rows))
        settling = settle(d.per_case, d.per_case_low, d.per_case_high, self.alpha)
        modelled = self.stop == "confident" and not settling.certain
        model = self.model() if modelled or self.order_by != "weight" else None  # one fit a step, for both
        if modelled:
            settling = replace(settling, confidence=self.confidence(rows, [r[2] for r in rows], model))
        candidates = one_per_text(order(c for r in rows for c in r[4]))
        value, learns = (self._value(model, candidates) if model is not None and self.order_by != "weight"
                         else (None, {}))
        candidates = [replace(c, learns=learns[(c.case_id, c.key)]) if (c.case_id, c.key) in learns else c
                      for c in candidates]
        # The open end's side first: "only this side ranks it" is the set whose YES counts for that side
        # on recall, not on MRR, where a passage both rank counts for the one that ranks it higher. Under
        # the confident rule on MRR it labelled one side's own passages until they ran out, so the model
        # never learnt the rates of the shared passages split by who ranks them higher and drew them at
        # the prior (the demo's MRR@10 vector vs hybrid: the first 300 labels all on passages only vector
        # ranks, the final t drawn -3.45 ± 1.7 from 100 to 500 labels, 858 labels; by its value alone 61).
        # On recall@5 without it: fewer labels on three demo pairs, more on keyword vs hybrid_rerank (479 /
        # 633 / 776 against 149 / 336 / 510 under seeds 57-59), so recall keeps it (docs/how-to/
        # golden-growth.md, "One side first")
        favour = favoured_side(settling) if self.stop == "certain" or not self.by_rank else None
        candidates = order(candidates, favour, value)
        if settling.confidence is not None and in_tail(len(candidates), len(self.judged)):
            settling = replace(settling, tail=len(candidates))  # the last of the pool: labelled, not modelled
        return State(settling, d.text(*self.names), tuple(candidates), note=self._note())

    def _note(self) -> str:
        """What the settled decision leaves out, for a metric that reads every relevant passage of a case."""
        if self.name not in B.READS_EVERY_RELEVANT:
            return ""
        title = MetricKey.parse(self.metric).title
        return (f"{title} reads every relevant passage of a question, so labels on passages outside both top "
                f"{self.k} (another run's, deeper ranks) can still move Δ: run --decide again after them")

    def _value(self, model: RelevanceModel, candidates: Sequence[Candidate],
               ) -> tuple[Callable[[Candidate], float], dict[tuple[str, str], int]]:
        """The order's value of each candidate under ``order_by`` (spread, learn or learn-sampled), computed
        for all at once; and (learn-sampled) the candidates drawn to learn their cell: (case, key) -> cell."""
        cells = [cell_of(c.rank_a, c.rank_b, self.by_rank) for c in candidates]
        feats = [self._features(c) for c in candidates]
        p = model.means(cells, feats)
        if self.name in EXPECTED_EFFECTS:
            effects = EXPECTED_EFFECTS[self.name](candidates, p, self.a, self.b, self.k)
            weights, signs = np.abs(effects), np.sign(effects)
        else:
            weights = np.array([c.weight for c in candidates], dtype=float)
            signs = np.array([side_sign(c.rank_a, c.rank_b) for c in candidates])
        spread = weights * np.sqrt(p * (1 - p))
        values, learns = spread, {}
        if self.order_by in ("learn", "learn-sampled"):
            sampled = self.order_by == "learn-sampled"
            values = learning_values(model, cells, feats, weights, signs,
                                     sample_seed=self.seed if sampled else None, rates=p)
            if sampled:  # a drawn passage valued more for what it teaches than for its own verdict
                learns = {(c.case_id, c.key): cell for c, cell, v, s in zip(candidates, cells, values, spread)
                          if v * v > 2 * s * s}
        at = {(c.case_id, c.key): float(v) for c, v in zip(candidates, values)}
        return (lambda c: at[(c.case_id, c.key)]), learns

    def confidence(self, rows, now: Sequence[float], model: RelevanceModel):
        tables, cells, fixed, feats = [], [], [], []
        for (cid, row), delta in zip(zip(self.cases, rows), now):
            if row[5] is None:
                tables.append(delta)
                cells.append(())
                fixed.append(())
                feats.append(())
                continue
            table, unit_cells, texts, unit_features = row[5]
            tables.append(table)
            cells.append(unit_cells)
            fixed.append([self.known.get((cid, t)) for t in texts])
            feats.append(unit_features)
        return confidence(tables, cells, fixed, model, alpha=self.alpha, level=self.level,
                          draws=self.draws, seed=self.seed, case_ids=list(self.cases), features=feats)


def mrr_effects(candidates: Sequence[Candidate], p: np.ndarray, a_views: Mapping[str, B.CaseView],
                b_views: Mapping[str, B.CaseView], k: int) -> np.ndarray:
    """Per candidate the expected change of its case's reciprocal-rank Δ (A - B) when its verdict turns
    from NO to YES, every other unjudged passage of the case relevant at its model rate ``p`` (the
    candidate's copies share its verdict): E[Δ | YES] - E[Δ | NO]. Reciprocal rank reads a list's first
    relevant passage, so a YES counts only as often as nothing above it is relevant, and it hides every
    passage below it: a passage both runs rank first has no weight by its ranks (its YES moves both
    lists alike), yet its YES sets the case's Δ to 0 whatever lies below."""
    at: dict[tuple[str, str], int] = {}
    for i, c in enumerate(candidates):
        for key in (c.key, *c.copies):
            at[(c.case_id, key)] = i
    effects = np.zeros(len(candidates))
    for cid in dict.fromkeys(c.case_id for c in candidates):
        lists = []
        for view in (a_views[cid], b_views[cid]):
            probs, owner = [], []
            for s in view.slots[:k]:
                i = at.get((cid, s)) if isinstance(s, str) else None
                owner.append(i)
                probs.append(float(p[i]) if i is not None else (0.0 if isinstance(s, str) else float(s > 0)))
            lists.append((probs, owner))
        for i in {i for _, owner in lists for i in owner if i is not None}:
            change = [expected_rr([1.0 if o == i else q for q, o in zip(probs, owner)])
                      - expected_rr([0.0 if o == i else q for q, o in zip(probs, owner)]) if i in owner else 0.0
                      for probs, owner in lists]  # a list without the passage does not move
            effects[i] = change[0] - change[1]
    return effects


EXPECTED_EFFECTS = {"mrr": mrr_effects}  # metric -> signed effects for the order (recall: measured, not adopted)


def expected_rr(probs: Sequence[float]) -> float:
    """The expected reciprocal rank of a list whose rank r is relevant with chance ``probs[r - 1]``
    (independently)."""
    none_above, total = 1.0, 0.0
    for r, q in enumerate(probs, 1):
        total += none_above * q / r
        none_above *= 1 - q
    return total


def _best(*ranks: int | None) -> int | None:
    found = [r for r in ranks if r]
    return min(found) if found else None


def decide_state(metric: str, a: Mapping[str, B.CaseView], b: Mapping[str, B.CaseView],
                 text_of: Callable[[str], str], names: tuple[str, str] = ("A", "B"), alpha: float = ALPHA,
                 **rule) -> State:
    """The decision between two runs now: the paired Δ's bounds, the stopping rule's reading, and the
    unjudged passages in the order that settles it (one per text in a case). ``rule``: PairTracker's
    stop, level, draws, seed, judged, known."""
    return PairTracker(metric, a, b, text_of, names, alpha, **rule).state()


class SweepTracker:
    """The choice among a sweep's best points: the best against each point it cannot be told from,
    one :class:`PairTracker` a pair, one verdict for all. Settled when every pair is; the passages are
    offered by the most a verdict can move any open pair's Δ (one per text in a case)."""

    def __init__(self, pairs: Mapping[tuple[str, str], PairTracker]) -> None:
        self.pairs = dict(pairs)

    def apply(self, case_id: str, keys: Sequence[str], grade: int) -> None:
        for tracker in self.pairs.values():
            if case_id in tracker.cases:
                tracker.apply(case_id, keys, grade)

    def state(self) -> State:
        states = {names: t.state() for names, t in self.pairs.items()}
        open_ = {names: s for names, s in states.items() if not s.settling.settled}
        best: dict[tuple[str, str], Candidate] = {}
        for s in open_.values():
            for c in s.candidates:
                slot = (c.case_id, c.key)
                if slot not in best or c.weight > best[slot].weight:
                    best[slot] = replace(c, learns=None)  # offered here by weight, not drawn to learn a cell
        shown_names, shown = next(iter(open_.items())) if open_ else next(reversed(states.items()))
        lines = "; ".join(f"{s.bounds_line.split(':')[0]} [{'settled' if s.settling.settled else 'open'}]"
                          for s in states.values())
        return State(shown.settling, f"{len(open_)} of {len(states)} pair(s) open: {lines}",
                     tuple(order(one_per_text(order(best.values())))), shown_names, note=shown.note)
