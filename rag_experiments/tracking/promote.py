"""Whether the best run may become champion, only on evidence: the checks promote and the nightly gate share.

The champion lives in the MLflow model registry: registered model ``rag-retriever-<name>``,
alias ``champion``; each version is the run's retriever logged as an MLflow pyfunc model (config,
digests, package version; :mod:`rag_experiments.serving.model_logging`), so
``mlflow.pyfunc.load_model("models:/rag-retriever-<name>@champion")`` answers queries. The
committed ``experiments/promoted/<name>.record.json`` is the champion of record: promote and gate
compare against it, and the registry is re-populated from it when it does not mirror it.

Promotion gate (paired randomization test over cases aligned by ``case_id``):

* the candidate must beat the champion on the primary metric: delta > 0 and p < alpha;
* and must not lose on the ``exact`` segment: not (delta < 0 and p < alpha).

The two checks are not Holm-corrected together: the second is a guard, and correcting it would
make a real loss on exact queries *easier* to pass. When the champion was measured on an earlier
version of the candidate's golden set (a prefix of the same chain), both are paired on that
version's cases and labels (:mod:`.versioned`: the newer run rescored from its stored ranked
lists). A champion measured on another golden set (not an ancestor) or corpus cannot be paired
with the candidate: promotion is then refused unless ``--force``.

The act (the committed files and the registry version) is :mod:`rag_experiments.promotion`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from typing import Any, Collection, Sequence

from ..errors import UserError
from ..evaluation.metric_key import MetricKey, Segment
from ..stats.maxt import against_control
from ..stats.paired import WinTieLoss, paired_permutation_test, win_tie_loss
from ..stats.power import PowerEstimate, estimate
from ..stats.shown import p_eq
from .champion import Champion
from .champion_newest import on_newest
from .compare import Pairing, paired_values
from .coverage import JUDGED_PREFIX, CoverageGap, fix_command, judged_columns, with_judged_at
from .judge_corrected_log import judge_corrected_lines
from .sampled_log import sampled_lines
from .split_decision import on_cases, shared_ids
from .noise_floor import floor_for, within_line
from .ownership import KILLED_REASON
from .runs import RunView, client, get_run, search, sweep_children
from .sweep_parent import best_of
from .verdict import common_values
from .versioned import eval_level, not_comparable

GUARD_SEGMENT = "exact"


@dataclass(frozen=True)
class Check:
    """One paired comparison of candidate against champion on one metric (and segment)."""

    key: str  # recall_at_5 or recall_at_5.exact
    title: str
    champion: float | None
    candidate: float | None
    delta: float | None
    p: float | None
    n: int
    wtl: WinTieLoss | None
    passed: bool
    note: str = ""
    power: PowerEstimate | None = None  # what these paired cases could detect (stats.power)
    noise: str | None = None  # 'within the HNSW noise floor ...' (tracking.noise_floor), when it is
    # the champion rescored on the newest golden version (tracking.champion_newest), when it was measured
    # on an older one: its value there, shown beside the value the check compares
    champion_newest: float | None = None


@dataclass(frozen=True)
class Selection:
    """The primary metric's test of "the best of N points beats the champion", knowing that N were
    tried: the best point's max-T adjusted p-value over all N points' differences from the champion
    (:func:`rag_experiments.stats.maxt.against_control`, Westfall & Young 1993), beside the
    uncorrected p of the best alone."""

    points: int  # N: the sweep's points (or the store's runs) that paired with the champion
    cases: int  # the cases every one of them shares with the champion
    p_adjusted: float
    p_uncorrected: float
    delta: float  # the best point's difference from the champion on those cases
    tried: str = "sweep points"  # what the N are: "sweep points", "runs in the store"

    @property
    def noun(self) -> str:
        return "point" if self.tried == "sweep points" else "run"

    def passed(self, alpha: float) -> bool:
        return self.delta > 0 and self.p_adjusted < alpha

    def line(self, metric: str, alpha: float) -> str:
        verdict = "significant" if self.passed(alpha) else "NOT significant"
        return (f"{metric}: the best of {self.points} {self.tried} vs the champion, every {self.noun} counted "
                f"(max-T, Westfall-Young): Δ{self.delta:+.3f}, adjusted {p_eq(self.p_adjusted, alpha)} "
                f"(uncorrected {p_eq(self.p_uncorrected, alpha)}, as if it were the only point tried), {verdict} at "
                f"alpha {alpha:g}, {self.cases} cases")


@dataclass(frozen=True)
class Decision:
    candidate: RunView
    champion: Champion | None
    metric: str
    alpha: float
    checks: list[Check]
    ok: bool  # the gate's verdict without --force
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # golden versions differ but lie on one chain: the checks ran on the older version's shared
    # cases (tracking.versioned); ``compared`` = (champion, candidate) rebased onto it
    gap: Any = None
    compared: tuple[RunView, RunView] | None = None
    unlike: Any = None  # tracking.versioned.Unlike: the two runs do not pair (level, golden chain); no table
    # what the reader should know beside the verdict: a difference within the HNSW noise floor, or an
    # HNSW run without a measured floor (tracking.noise_floor)
    notes: list[str] = field(default_factory=list)
    # the champion on the newest golden version (tracking.champion_newest.OnNewest), None when it was
    # measured on the newest one
    newest: Any = None
    # the best of a sweep's points against the champion with every point counted (stats.maxt), None
    # when the candidate was not chosen among several points (promote without --sweep, the gate)
    selection: Selection | None = None
    # the cases the checks were restricted to, in words ("the 69 held-out test cases"), None for every
    # case: promote --sweep with a dev/test split, gate --decide-on test (tracking.split_decision)
    decided_on: str | None = None


# -- candidates -----------------------------------------------------------------------------------
def eligible(run: RunView, metric: str) -> bool:
    t = run.tags
    return (run.status == "FINISHED" and t.get("sweep") != "parent" and t.get("comparison") != "true"
            and "gate" not in t and bool(t.get("golden_sha256")) and metric in run.metrics)


def candidate_runs(metric: str, sweep: str | None = None, experiment: str | None = None, c=None) -> list[RunView]:
    """FINISHED runs (of the sweep, else of the store or ``experiment``) with the metric, on the
    golden set of the newest of them."""
    c = c or client()
    if sweep:
        parent = get_run(sweep, per_case=False, c=c)
        if parent.status == "KILLED":
            raise UserError(f"sweep {parent.id} ({parent.name}) was KILLED "
                            f"({parent.tags.get(KILLED_REASON, 'its process died')}): its points are incomplete",
                            hint="rerun the sweep and promote from the complete one")
        runs = sweep_children(sweep, per_case=False, c=c)
        say_killed_skipped(runs)
    else:
        runs = search("attributes.status = 'FINISHED'", per_case=False, c=c, experiment=experiment)
        say_killed_skipped(search("attributes.status = 'KILLED'", per_case=False, c=c, experiment=experiment))
    runs = [r for r in runs if eligible(r, metric)]
    if not runs:
        where = f"sweep {sweep}" if sweep else (f"experiment {experiment!r}" if experiment else "the store")
        raise UserError(f"no FINISHED run in {where} logged {metric!r}")
    newest = max(runs, key=lambda r: r.start_time)
    return [r for r in runs if r.golden == newest.golden]


def same_level(runs: Sequence[RunView], champion: Champion | None) -> list[RunView]:
    """The candidates evaluated at the champion's level (``eval.level``), with a note naming the
    runs of another level left out; all of them when none is at that level (the decision then
    refuses, naming the champion, the best of them and the two levels)."""
    if champion is None:
        return list(runs)
    level = eval_level(champion.run)
    same = [r for r in runs if eval_level(r) == level]
    if same and len(same) < len(runs):
        other = sorted({eval_level(r) for r in runs} - {level})
        print(f"note: left out {len(runs) - len(same)} run(s) evaluated at {', '.join(other)} level: the champion "
              f"{champion.run.id[:12]} was evaluated at {level} level, and only runs of one level pair",
              file=sys.stderr)
    return same or list(runs)


def say_killed_skipped(runs: Sequence[RunView]) -> int:
    """Print one note for the KILLED runs among ``runs`` (never candidates); return their count."""
    killed = [r for r in runs if r.status == "KILLED" and r.tags.get("sweep") != "parent"]
    if killed:
        ids = ", ".join(r.id[:12] for r in killed[:5]) + (" ..." if len(killed) > 5 else "")
        print(f"note: skipped {len(killed)} KILLED run(s) (their process died before they finished): {ids}",
              file=sys.stderr)
    return len(killed)


def pick_best(runs: Sequence[RunView], metric: str) -> RunView:
    """Highest mean on ``metric``; a tie goes to the earliest point (:func:`.sweep_parent.best_of`,
    the rule the sweep parent, compare and the gate use)."""
    best = best_of(runs, lambda r: r.metrics[metric])
    if best is None:
        raise UserError(f"no run to choose from on {metric!r}")
    return best


# -- checks ---------------------------------------------------------------------------------------
def paired_check(champion: RunView, candidate: RunView, metric: str, segment: Segment | None, alpha: float,
                 mode: str, n_resamples: int = 10000, seed: int = 13) -> Check:
    """``mode='beat'``: pass when significantly better; ``mode='no_loss'``: pass unless significantly worse."""
    mk = MetricKey.parse(metric)
    mk = mk if segment is None else mk.on(segment)
    key, title = mk.mlflow_name, mk.title
    a_val, b_val = champion.metric(key), candidate.metric(key)
    if champion.per_case is None or candidate.per_case is None:
        return Check(key, title, a_val, b_val, None, None, 0, None, False, "no per-case table: no paired test")
    a, b = paired_values(champion.per_case, candidate.per_case, mk.column, mk.segment)
    if len(a) == 0:
        if segment is not None:
            return Check(key, title, a_val, b_val, None, None, 0, None, True, "no cases in this segment: skipped")
        return Check(key, title, a_val, b_val, None, None, 0, None, False, "no common cases")
    delta = float(b.mean() - a.mean())
    p = paired_permutation_test(a, b, n_resamples=n_resamples, seed=seed)
    significant = p < alpha
    passed = (significant and delta > 0) if mode == "beat" else not (significant and delta < 0)
    a_val = float(a.mean()) if a_val is None else a_val
    b_val = float(b.mean()) if b_val is None else b_val
    return Check(key, title, a_val, b_val, delta, p, len(a), win_tie_loss(a, b), passed,
                 power=estimate(a, b, alpha))


def digest_warnings(champion: RunView, candidate: RunView) -> list[str]:
    out = []
    for tag, what in (("golden_sha256", "golden set"), ("corpus_digest", "corpus")):
        x, y = champion.tags.get(tag), candidate.tags.get(tag)
        if x != y:
            out.append(f"the champion was measured on another {what} ({tag} {str(x)[:12]} vs {str(y)[:12]}): "
                       "the paired test over cases is impossible")
    return out


def dirty_tree_reason(run: RunView) -> str | None:
    """Why a run cannot be promoted as reproducible: it was logged from a git tree with
    uncommitted changes (tag ``git_dirty=true``), so its commit plus its config does not give
    back the code that produced its numbers. None when the tree was clean (or git was absent)."""
    if run.tags.get("git_dirty") != "true":
        return None
    return (f"run {run.id} was logged from a git tree with uncommitted changes (git_dirty=true, commit "
            f"{str(run.tags.get('git_commit', '?'))[:12]}): its commit and config do not reproduce it; "
            "commit the changes and run it again")


def refuse_dirty_tree(decision: Decision) -> Decision:
    """The gate's decision, refused when the candidate's run came from a dirty tree."""
    reason = dirty_tree_reason(decision.candidate)
    if reason is None:
        return decision
    # an accepted decision's reasons are notes ("no champion yet"), not grounds for refusal
    reasons = (list(decision.reasons) if not decision.ok else []) + [reason]
    return replace(decision, ok=False, reasons=reasons)


MULTI_SEGMENT = "multi"  # cases with evidence groups (golden add --kind multi, golden generate --multi)


def _has_kind(run: RunView, kind: str) -> bool:
    pc = run.per_case
    return pc is not None and "kind" in pc and bool((pc["kind"] == kind).any())


def decide(champion: Champion | None, candidate: RunView, metric: str, alpha: float = 0.05, mode: str = "beat",
           guard_segment: str = GUARD_SEGMENT, n_resamples: int = 10000, seed: int = 13,
           family: Sequence[RunView] = (), cases: Collection[str] | None = None,
           tried: str = "sweep points") -> Decision:
    """The gate. ``mode='beat'`` (promote): the candidate must beat the champion on ``metric`` and
    not lose on ``guard_segment``. ``mode='no_loss'`` (nightly gate): it must lose on neither.
    ``family``: every point the candidate was chosen from (``promote --sweep``, or every run of the store
    for a plain promote; with per-case tables; ``tried`` says which in the lines);
    with two or more, the candidate must also beat the champion once all of them are counted
    (:class:`Selection`), else it is refused. ``cases``: check only these case ids (the held-out test
    cases of a dev/test split, :mod:`.split_decision`), after aligning golden versions."""
    if champion is None:
        return Decision(candidate, None, metric, alpha, [], True, ["no champion yet"])
    champ_run, cand_run, gap = champion.run, candidate, None

    unlike = not_comparable([champ_run, cand_run])  # another eval level, or golden versions on no one chain
    if unlike is not None:
        return Decision(candidate, champion, metric, alpha, [], False, [unlike.line],
                        digest_warnings(champ_run, cand_run), unlike=unlike)
    if champ_run.golden != cand_run.golden:
        from .versioned import align  # another golden version: on one chain, compare on the shared cases

        alignment = align([champ_run, cand_run])
        if alignment.gap is not None:
            (champ_run, cand_run), gap = alignment.runs, alignment.gap
        elif alignment.reason:
            return Decision(candidate, champion, metric, alpha, [], False,
                            ["champion and candidate cannot be compared case by case", alignment.reason],
                            digest_warnings(champ_run, cand_run))
    warnings = digest_warnings(champ_run, cand_run)
    if warnings:
        return Decision(candidate, champion, metric, alpha, [], False,
                        ["champion and candidate cannot be compared case by case"], warnings)
    decided_on = None
    if cases is not None:  # the held-out cases only: the runs' tables and values cut to them
        champ_run, cand_run = on_cases(champ_run, cases), on_cases(cand_run, cases)
        decided_on = f"the {len(shared_ids(champ_run, cand_run))} held-out test cases"
    seg = Segment("kind", guard_segment) if guard_segment else None
    checks = [paired_check(champ_run, cand_run, metric, None, alpha, mode, n_resamples, seed)]
    if seg is not None:
        checks.append(paired_check(champ_run, cand_run, metric, seg, alpha, "no_loss", n_resamples, seed))
        # questions that need several passages (kind multi), when both runs have them: no loss there either
        if guard_segment != MULTI_SEGMENT and all(_has_kind(r, MULTI_SEGMENT) for r in (champ_run, cand_run)):
            checks.append(paired_check(champ_run, cand_run, metric, Segment("kind", MULTI_SEGMENT), alpha, "no_loss",
                                       n_resamples, seed))
    checks, notes = noise_notes(checks, champ_run, cand_run)
    # shown, not decided on: people's labels on a case sample
    notes += judge_corrected_lines([champ_run, cand_run], ["champion", "candidate"], [metric])
    notes += sampled_lines([champ_run, cand_run], ["champion", "candidate"])
    reasons = []
    if mode == "beat":  # promote: a candidate judged on other labels than the champion is not comparable yet
        reasons += coverage_reasons(champ_run, cand_run, alpha, n_resamples, seed, metric)
    for chk in checks:
        if chk.passed:
            continue
        if chk.p is None:
            reasons.append(f"{chk.title}: {chk.note}")
        elif mode == "beat" and chk.key == metric:
            reasons.append(f"{chk.title}: not significantly better than the champion "
                           + (f"on {decided_on} " if decided_on else "")
                           + f"(Δ{chk.delta:+.3f}, {p_eq(chk.p, alpha)}, alpha {alpha:g})"
                           + (f"; {chk.power.sentence()}" if chk.power is not None else "")
                           + (f"; {chk.noise}" if chk.noise else ""))
        else:
            reasons.append(f"{chk.title}: significantly worse than the champion "
                           + (f"on {decided_on} " if decided_on else "") + f"(Δ{chk.delta:+.3f}, {p_eq(chk.p, alpha)})"
                           + (f"; but {chk.noise}" if chk.noise else ""))
    selection = None
    if mode == "beat" and len(family) > 1:
        selection = selection_check(champion.run, family, candidate.id, metric, n_resamples, seed)
        selection = replace(selection, tried=tried) if selection is not None else None
        if selection is None:
            notes.append(f"the {len(family)} points could not be paired with the champion on shared cases: "
                         "no test counting every point tried; the uncorrected p-value above is optimistic")
        else:
            notes.insert(0, selection.line(MetricKey.parse(metric).title, alpha))
            if checks[0].passed and not selection.passed(alpha):
                many = "points" if selection.noun == "point" else tried
                reasons.append(f"{checks[0].title}: the best of {selection.points} {many} is not significantly "
                               f"better than the champion once every {selection.noun} tried is counted (max-T adjusted "
                               f"{p_eq(selection.p_adjusted, alpha)}, uncorrected {p_eq(selection.p_uncorrected, alpha)}, "
                               f"alpha {alpha:g}): the best of many equal points often looks better by chance")
    checks, newest = with_newest(checks, champion, metric)
    if newest is not None:
        notes.insert(0, newest.line(metric, champion.run.metric(metric)))
    return Decision(candidate, champion, metric, alpha, checks, not reasons, reasons, warnings, gap,
                    (champ_run, cand_run) if gap is not None else None, notes=notes, newest=newest,
                    selection=selection, decided_on=decided_on)


def selection_check(champion: RunView, family: Sequence[RunView], best_id: str, metric: str,
                    n_resamples: int = 10000, seed: int = 13) -> Selection | None:
    """The best point (``best_id``) against the champion within the family of all ``family`` points
    (max-T over their differences from the champion, on the cases all of them share with it; runs on
    another version of the golden set are rebased as :func:`decide` rebases one). None when fewer
    than two points pair with the champion or the best does not."""
    runs = [champion, *family]
    if len({r.golden for r in runs}) > 1:
        from .versioned import align  # as in decide: only when golden versions differ

        alignment = align(runs)
        if alignment.gap is None:
            return None
        runs = list(alignment.runs)
    champ, points = runs[0], [r for r in runs[1:] if r.per_case is not None]
    if champ.per_case is None:
        return None
    key = MetricKey.parse(metric)
    base, matrix, names = common_values({r.id: Pairing(champ.per_case, r.per_case) for r in points}, key)
    if best_id not in names or len(names) < 2:
        return None
    j = names.index(best_id)
    adjusted = against_control(base, matrix, n_resamples=n_resamples, seed=seed)
    raw = paired_permutation_test(base, matrix[:, j], n_resamples=n_resamples, seed=seed)
    return Selection(len(names), len(base), float(adjusted[j]), float(raw), float(matrix[:, j].mean() - base.mean()))


def with_newest(checks: list[Check], champion: Champion, metric: str) -> tuple[list[Check], Any]:
    """The checks with the champion's value on the newest golden version (its ranked lists rescored,
    :mod:`.champion_newest`) beside the value each compares, and that rescoring; unchanged when the
    champion was measured on the newest version."""
    newest = on_newest(champion)
    if newest is None:
        return checks, None
    return [replace(chk, champion_newest=newest.value(chk.key)) for chk in checks], newest


def noise_notes(checks: list[Check], champion: RunView, candidate: RunView) -> tuple[list[Check], list[str]]:
    """The checks with ``noise`` set where their Δ is within the HNSW noise floor, and the notes to
    print: one per such check, or one saying an HNSW run has no measured floor. Exact runs: none."""
    floor, note = floor_for([champion, candidate])
    notes = [note] if note else []
    if floor is None:
        return checks, notes
    out = []
    for chk in checks:
        line = within_line(chk.key, chk.title, chk.delta, floor)
        if line:
            notes.append(line)
            chk = replace(chk, noise="within the HNSW noise floor")
        out.append(chk)
    return out, notes


def coverage_reasons(champion: RunView, candidate: RunView, alpha: float, n_resamples: int = 10000,
                     seed: int = 13, metric: str | None = None) -> list[str]:
    """Why the candidate cannot be promoted yet: the champion's judged@k is significantly lower
    than the candidate's (rag_experiments.tracking.coverage: its unjudged hits may be relevant),
    with the command that judges the two runs' pool. ``metric``: judged@k at its depth (one labelling
    depth: recall@5 -> judged@5 and ``-k 5``, :func:`.coverage.with_judged_at`), when it can be scored."""
    if champion.per_case is None or candidate.per_case is None:
        return []
    cols = judged_columns([champion, candidate])
    deep = with_judged_at([champion, candidate], metric) if metric else None
    if deep is not None:
        (champion, candidate), column = deep
        cols = [column]
    for col in cols:
        a, b = paired_values(champion.per_case, candidate.per_case, col, None)
        if not len(a):
            continue
        p = paired_permutation_test(a, b, n_resamples=n_resamples, seed=seed)
        if p < alpha and b.mean() > a.mean():  # the champion less judged: the win may be the labels'
            k = int(col[len(JUDGED_PREFIX):])
            gap = CoverageGap(f"the candidate {candidate.id[:12]}", col, float(a.mean()), float(b.mean()),
                              float(b.mean() - a.mean()), p, fix_command([champion, candidate], k))
            return [gap.line() + f" (no LLM key: label them yourself with {gap.command} --by-hand; "
                    "or promote --force, recorded)"]
    return []
