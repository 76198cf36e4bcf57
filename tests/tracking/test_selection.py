"""promote --sweep counts every point tried (max-T), and one tie rule names the same best point in
the sweep parent, compare, promote and the verdict."""

from __future__ import annotations

import numpy as np
from mlflow.tracking import MlflowClient

from rag_experiments.promotion import promote
from rag_experiments.tracking.champion import ALIAS, current_champion
from rag_experiments.tracking.promote import decide, pick_best
from rag_experiments.tracking.runs import get_run, sweep_children

from .conftest import cli, per_case_frame

MODEL = "rag-retriever-default"
KINDS = ["paraphrase"] * 40 + ["exact"] * 20
CHAMPION = np.array([1.0 if i % 2 else 0.0 for i in range(60)])


def _flip(values: np.ndarray, cases) -> np.ndarray:
    out = values.copy()
    out[list(cases)] = 1.0 - out[list(cases)]
    return out


def _null_sweep(make_run, make_parent) -> tuple[str, str]:
    """A champion and a sweep of 10 points that each change 9 of its cases: the best wins 8 and loses
    1 (alone: exact p = 20/512 = 0.039 < 0.05), the nine others win 5 and lose 4. Nothing here is
    better than the champion beyond what the best of 10 such points reaches by chance."""
    make_run(per_case_frame(CHAMPION, kinds=KINDS), name="champion")
    assert cli("promote", "--metric", "recall_at_5") == 0  # the first champion
    parent = make_parent("fusion.rrf_k=1..10")
    zeros, ones = np.flatnonzero(CHAMPION[:40] == 0), np.flatnonzero(CHAMPION[:40] == 1)
    best = make_run(per_case_frame(_flip(CHAMPION, [*zeros[:8], ones[0]]), kinds=KINDS), name="fusion.rrf_k=1",
                    parent=parent, tags={"sweep.job_num": "0"})
    rng = np.random.default_rng(4)
    for k in range(1, 10):
        cases = [*rng.choice(np.flatnonzero(CHAMPION == 0), 5, replace=False),
                 *rng.choice(np.flatnonzero(CHAMPION == 1), 4, replace=False)]
        make_run(per_case_frame(_flip(CHAMPION, cases), kinds=KINDS), name=f"fusion.rrf_k={k + 1}", parent=parent,
                 tags={"sweep.job_num": str(k)})
    return parent, best


def test_promote_sweep_refuses_the_best_of_ten_null_points_that_one_test_would_promote(store, make_run, make_parent,
                                                                                      capsys):
    parent, best = _null_sweep(make_run, make_parent)
    champion = current_champion()
    capsys.readouterr()
    # the uncorrected test (the rule before): the best point alone beats the champion
    alone = decide(champion, get_run(best), "recall_at_5")
    assert alone.ok and alone.checks[0].p < 0.05, alone.reasons
    # counting the ten points: refused, and the output says why with both p-values
    assert cli("promote", "--metric", "recall_at_5", "--sweep", parent) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "REFUSED" in out and "the best of 10 points is not significantly better than the champion" in out, out
    assert "FAIL: max-T" in out  # its row said "ok" beside the refusal (the check passes alone)
    assert "max-T adjusted p=" in out and "uncorrected p=0.039" in out, out
    family = [get_run(r.id) for r in sweep_children(parent, per_case=False)]
    selection = decide(champion, get_run(best), "recall_at_5", family=family).selection
    assert selection.points == 10 and selection.p_uncorrected < 0.05 <= selection.p_adjusted
    # --force promotes and says what it overrode
    assert cli("promote", "--metric", "recall_at_5", "--sweep", parent, "--force") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "FORCED" in out and "max-T adjusted p=" in out, out
    assert MlflowClient().get_model_version_by_alias(MODEL, ALIAS).run_id == best
    assert MlflowClient().get_run(best).data.tags["promoted_forced"] == "true"


def test_a_plain_promote_counts_every_run_of_the_store_it_chose_from(store, make_run, make_parent, capsys):
    """A plain promote chooses the best of every run in the store: it took the best of them with one
    uncorrected test and promoted the point promote --sweep had just refused (a new user on nginx's
    documentation: the best of 13 runs). Now the same max-T count applies, over the runs of the store
    other than the champion."""
    parent, best = _null_sweep(make_run, make_parent)
    capsys.readouterr()
    assert cli("promote", "--metric", "recall_at_5", "--sweep", parent, "--dry-run") == 1
    capsys.readouterr()
    result = promote("recall_at_5", dry_run=True)  # no --sweep: the store's 11 runs, the champion among them
    assert result.decision.candidate.id == best and not result.decision.ok
    sel = result.decision.selection
    assert sel.points == 10 and sel.tried == "runs in the store" and sel.p_uncorrected < 0.05 <= sel.p_adjusted
    assert cli("promote", "--metric", "recall_at_5") == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "the best of 10 runs in the store is not significantly better than the champion once every run tried is " \
           "counted" in out, out
    assert MlflowClient().get_model_version_by_alias(MODEL, ALIAS).run_id != best


def test_a_real_winner_of_a_sweep_is_still_promoted(store, make_run, make_parent, capsys):
    make_run(per_case_frame(CHAMPION, kinds=KINDS), name="champion")
    assert cli("promote", "--metric", "recall_at_5") == 0
    parent = make_parent("fusion.rrf_k=1,2,3")
    zeros = np.flatnonzero(CHAMPION[:40] == 0)
    winner = make_run(per_case_frame(_flip(CHAMPION, zeros[:16]), kinds=KINDS), name="fusion.rrf_k=1",
                      parent=parent, tags={"sweep.job_num": "0"})
    for k in (2, 3):
        make_run(per_case_frame(_flip(CHAMPION, zeros[:k]), kinds=KINDS), name=f"fusion.rrf_k={k}", parent=parent,
                 tags={"sweep.job_num": str(k - 1)})
    result = promote("recall_at_5", sweep=parent, dry_run=True)
    assert result.decision.candidate.id == winner and result.decision.ok, result.decision.reasons
    assert result.decision.selection.points == 3 and result.decision.selection.p_adjusted < 0.001


def test_one_tie_rule_the_earliest_point_everywhere(store, make_run, make_parent):
    """rrf_k=60 and rrf_k=90 equal on every case: the parent, compare's order, the verdict and promote
    all name 60, the point Hydra listed first, although 90 started first and is the newer run id."""
    from rag_experiments.tracking.compare import build_comparison, run_labels, sweep_order
    from rag_experiments.tracking.sweep_parent import best_child
    from rag_experiments.tracking.verdict import verdicts

    parent = make_parent("fusion.rrf_k=30,60,90")
    same = (np.arange(60) % 3 != 0).astype(float)
    make_run(per_case_frame((np.arange(60) % 2).astype(float), kinds=KINDS), name="fusion.rrf_k=30", parent=parent,
             tags={"sweep.job_num": "0"})
    k90 = make_run(per_case_frame(same, kinds=KINDS), name="fusion.rrf_k=90", parent=parent,
                   tags={"sweep.job_num": "2"})
    k60 = make_run(per_case_frame(same, kinds=KINDS), name="fusion.rrf_k=60", parent=parent,
                   tags={"sweep.job_num": "1"})
    children = sweep_children(parent)
    assert best_child(children, "recall_at_5").id == k60
    assert pick_best(children, "recall_at_5").id == k60
    ordered = sweep_order(children, "recall_at_5")
    assert [r.id for r in ordered[1:]].index(k60) < [r.id for r in ordered[1:]].index(k90)
    cmp = build_comparison(ordered, ["recall_at_5"], labels=run_labels(ordered), n_resamples=200)
    assert verdicts(cmp, 200, 0)[0].best_run_id == k60
    assert promote("recall_at_5", sweep=parent, dry_run=True).decision.candidate.id == k60
    # outside one sweep (no parent): the run that started first wins a tie, whatever the list's order
    first = make_run(per_case_frame(same, kinds=KINDS), name="first")
    second = make_run(per_case_frame(same, kinds=KINDS), name="second")
    assert pick_best([get_run(second), get_run(first)], "recall_at_5").id == first


def test_promote_sweep_names_what_a_wrong_id_is(store, make_run, make_parent, capsys):
    """A child's id, a plain run's or an unknown one as --sweep said "no run states its objective; give
    --metric" (a new user's trial): the wrong diagnosis. Now: what the id is, and the parent's id."""
    plain = make_run(per_case_frame(CHAMPION, kinds=KINDS), name="plain")
    parent = make_parent("fusion.rrf_k=1,2")
    child = make_run(per_case_frame(CHAMPION, kinds=KINDS), name="fusion.rrf_k=1", parent=parent,
                     tags={"sweep.job_num": "0"})
    capsys.readouterr()
    for given, said in ((child, f"is a point of sweep {parent}, not a sweep's parent"),
                        (plain, "(plain) is not a sweep's parent: no run names it as its parent"),
                        ("0" * 32, "no run has this id in the store")):
        assert cli("promote", "--sweep", given) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"--sweep {given}: " in err and said in err and "states its objective" not in err, err
