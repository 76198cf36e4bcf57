"""compare / promote / the gate show the judge-corrected values and paired difference (real MLflow).

Two runs on the golden set of tests/golden/test_spotcheck_cases.py with every case checked by
people: under the machine's labels both have RR@10 = 1 on every case (Δ 0); under people's, the
baseline has 1/3 on even cases and the candidate 1 everywhere, so the corrected Δ is +1/3.
"""

from __future__ import annotations

import pytest

from rag_experiments.evaluation.evaluate import EvalParams, evaluate
from rag_experiments.evaluation.judge_corrected import judge_corrected
from rag_experiments.golden.resolve import load_golden
from rag_experiments.tracking.judge_corrected_log import judge_corrected_lines, log_judge_corrected
from rag_experiments.tracking.mlflow_run import per_case_for_mlflow
from rag_experiments.tracking.runs import runs_by_ids

from ..golden.test_spotcheck_cases import N, build_golden, check_cases, results_of

METRICS = ["recall_at_5", "mrr_at_10"]


def _logged_run(make_run, golden, results, name: str, corrected: bool = True) -> str:
    g = load_golden(golden)
    ev = evaluate(g, results, EvalParams())
    run_id = make_run(per_case_for_mlflow(ev.per_case), name=name, golden=g.digest)
    if corrected:
        log_judge_corrected(run_id, judge_corrected(g, results, EvalParams(), ev.per_case))
    return run_id


def test_compare_lines_hold_the_corrected_values_and_the_corrected_difference(store, make_run):
    tmp, _ = store
    golden = build_golden(tmp / "experiments" / "golden" / "g.jsonl")
    check_cases(golden, list(range(N)))
    g = load_golden(golden)
    a = _logged_run(make_run, golden, results_of(g), "baseline")
    b = _logged_run(make_run, golden, results_of(g, order=(0, 1, 2)), "candidate")
    runs = runs_by_ids([a, b])
    lines = judge_corrected_lines(runs, ["baseline", "candidate"], METRICS)
    # every case checked: se = sd(H) / sqrt(40), sd^2 = 40 (1/3)^2 / 39 = 0.11396, se = 0.053376, df 39,
    # t = 2.02269: 2/3 +- 0.10796 = [0.559, 0.775]; the difference (2/3 on even cases, 0 on odd) has the
    # same spread around 1/3: [0.225, 0.441]
    assert lines[0] == ("judge-corrected baseline (people's labels on 40 cases): recall@5 1.000 [1.000, 1.000]; "
                        "mrr@10 0.667 [0.559, 0.775]")
    assert "mrr@10 1.000 [1.000, 1.000] Δ+0.333 [+0.225, +0.441] * (machine labels Δ+0.000, 40 people-checked cases)" \
        in lines[1]
    assert lines[-1].startswith("judge-corrected: 95% intervals with the judge's error in them")


def test_no_corrected_metrics_no_lines_and_a_baseline_without_them_is_said(store, make_run):
    tmp, _ = store
    golden = build_golden(tmp / "experiments" / "golden" / "g.jsonl")
    g = load_golden(golden)
    a = _logged_run(make_run, golden, results_of(g), "baseline", corrected=False)
    b = _logged_run(make_run, golden, results_of(g), "candidate", corrected=False)
    assert judge_corrected_lines(runs_by_ids([a, b]), ["baseline", "candidate"], METRICS) == []
    check_cases(golden, list(range(N)))
    c = _logged_run(make_run, golden, results_of(g), "checked")
    lines = judge_corrected_lines(runs_by_ids([a, c]), ["baseline", "checked"], METRICS)
    assert lines[0].startswith("judge-corrected: the baseline baseline logged none")
    assert "Δ" not in lines[1]


@pytest.fixture(autouse=True)
def _no_ci_noise(monkeypatch):
    monkeypatch.delenv("RAG_EXP_RESAMPLES", raising=False)


def test_compare_promote_and_the_gate_print_the_corrected_difference(store, make_run):
    from rag_experiments.tracking.champion import Champion
    from rag_experiments.tracking.compare import build_comparison
    from rag_experiments.tracking.promote import decide

    tmp, _ = store
    golden = build_golden(tmp / "experiments" / "golden" / "g.jsonl")
    check_cases(golden, list(range(N)))
    g = load_golden(golden)
    a = _logged_run(make_run, golden, results_of(g), "baseline")
    b = _logged_run(make_run, golden, results_of(g, order=(0, 1, 2)), "candidate")
    champ, cand = runs_by_ids([a, b])
    want = "Δ+0.333 [+0.225, +0.441] * (machine labels Δ+0.000, 40 people-checked cases)"
    cmp = build_comparison([champ, cand], metrics=["mrr_at_10"], segments=[], primary="mrr_at_10",
                           labels=["baseline", "candidate"])
    assert any(want in n and n.startswith("judge-corrected candidate") for n in cmp.notes)
    assert "Δ+0.333 [+0.225, +0.441] \\* (machine labels" in cmp.to_markdown()  # Markdown escapes the star
    for mode in ("beat", "no_loss"):  # promote, the nightly gate
        decision = decide(Champion(champ, None, "registry", "mrr_at_10"), cand, "mrr_at_10", mode=mode,
                          guard_segment="", n_resamples=200)
        assert any(want in n and n.startswith("judge-corrected candidate") for n in decision.notes), mode
