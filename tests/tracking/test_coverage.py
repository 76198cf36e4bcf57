"""Label coverage in every comparison: judged@k per run, its paired difference, one line when it
differs significantly, and promote refusing until the pool is judged (--force overrides).

Before: compare and promote said nothing about how many of each run's top 10 were ever judged."""

from __future__ import annotations

from rag_experiments.golden.resolve import EvalCase
from rag_experiments.tracking.compare import build_comparison
from rag_experiments.tracking.promote import coverage_reasons
from rag_experiments.tracking.runs import get_run
from rag_experiments.types import Hit

from .conftest import cli
from .golden_runs import filler, good, log_golden_run


def judged_ten(case: EvalCase) -> tuple[Hit, ...]:
    """The evidence span at each of the top 10 ranks: all ten judged (judged@10 = 1), then fillers."""
    span = case.relevant[0].span
    head = tuple(Hit(f"e{i}", span.doc_id, span.source_uri, case.doc_type, span.start, span.end, 2.0, i + 1)
                 for i in range(10))
    return head + tuple(filler(10, 11))


def test_a_run_judged_on_other_labels_is_said_in_compare_and_refused_by_promote(store, mini_golden, capsys):
    _, exp = store
    base = log_golden_run(mini_golden, good, name="judged-once", exp_id=exp)  # judged@10 = 0.1 a case
    other = log_golden_run(mini_golden, judged_ten, name="judged-ten", exp_id=exp)  # judged@10 = 1.0
    runs = [get_run(base), get_run(other)]
    cmp = build_comparison(runs, ["recall_at_5"], primary="recall_at_5", n_resamples=2000)
    assert [c.key.mlflow_name for c in cmp.columns][-1] == "judged_at_10"
    cell = cmp.rows[1].cells["judged_at_10"]
    assert cmp.rows[0].cells["judged_at_10"].value == 0.1 and cell.value == 1.0 and cell.delta == 0.9
    (line,) = [w for w in cmp.warnings if w.startswith("LABEL COVERAGE DIFFERS")]
    assert "judged@10 1.000 vs the baseline's 0.100" in line
    assert f"rag-exp golden label --pool {base} {other} -k 10" in line
    assert line.endswith(f"(no LLM key: label them yourself with rag-exp golden label --pool {base} {other} -k 10 "
                         "--by-hand)")  # the keyless way too (before: the LLM judge's command only)

    # the champion less judged than the candidate: the candidate's win may be the labels'
    reasons = coverage_reasons(runs[0], runs[1], alpha=0.05, n_resamples=2000)
    assert len(reasons) == 1 and "or promote --force, recorded" in reasons[0]
    # the candidate less judged and still winning wins conservatively: not refused
    assert coverage_reasons(runs[1], runs[0], alpha=0.05, n_resamples=2000) == []

    assert cli("compare", base, other) == 0
    assert "LABEL COVERAGE DIFFERS" in capsys.readouterr().out


def test_runs_judged_alike_get_no_coverage_line(store, mini_golden):
    _, exp = store
    a = log_golden_run(mini_golden, good, name="a", exp_id=exp)
    b = log_golden_run(mini_golden, good, name="b", exp_id=exp)
    cmp = build_comparison([get_run(a), get_run(b)], ["recall_at_5"], primary="recall_at_5", n_resamples=2000)
    assert not [w for w in cmp.warnings if "COVERAGE" in w]
    assert coverage_reasons(get_run(a), get_run(b), alpha=0.05, n_resamples=2000) == []
