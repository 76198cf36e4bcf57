"""Comparison across golden versions: the gate, compare and promote survive the golden set growing.

Real golden file (the mini corpus's cases), real MLflow store, real evaluation of ranked lists
(no database: a "good" config ranks each case's evidence first, see golden_runs.py).
"""

from __future__ import annotations


import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.golden.resolve import load_golden
from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.tracking.runs import get_run
from rag_experiments.tracking.versioned import align

from .conftest import cli
from .golden_runs import log_golden_run, third

PRODUCTION_QUERY = "How much shared memory does the server take for its buffers by default?"
PRODUCTION_QUOTE = "The default is typically 128 megabytes"


@pytest.fixture
def golden(store, mini_golden):
    """The mini golden set inside the temp project, with the store's experiment id."""
    return mini_golden, store[1]


@pytest.fixture
def golden_add():
    """`rag-exp golden add` on the mini corpus's files (a quote needs no database)."""
    from tests.conftest import FIXTURES

    def add(path, query=PRODUCTION_QUERY, quote=PRODUCTION_QUOTE):
        assert cli("golden", "add", "--golden", str(path), "--query", query, "--source-uri",
                   "mini/runtime-config-resource.html", "--quote", quote, "--author", "oncall",
                   "--note", "incident 42", "--corpus", str(FIXTURES / "mini_corpus")) == 0
        return GoldenFile(path).read()[-1]["id"]

    return add


def _promote_champion(path, exp_id, **kw) -> str:
    rid = log_golden_run(path, name="champion", exp_id=exp_id, **kw)
    assert cli("promote") == 0
    return rid


def _tags(run_id):
    return MlflowClient().get_run(run_id).data.tags


def test_runs_record_the_version_as_a_prefix_and_keep_their_ranked_lists(golden):
    path, exp = golden
    rid = log_golden_run(path, exp_id=exp)
    tags = _tags(rid)
    assert tags["golden_records"] == "10" and len(tags["golden_head"]) == 64
    assert tags["golden_sha256"] == load_golden(path).digest
    assert "run.trec" in {a.path for a in MlflowClient().list_artifacts(rid)}


def test_gate_passes_after_a_production_case_is_appended_and_reports_it(golden, golden_add, tmp_path, capsys):
    path, exp = golden
    champ = _promote_champion(path, exp)
    case_id = golden_add(path)
    # the current config retrieves all old cases and misses the new production case
    now = log_golden_run(path, name="nightly", exp_id=exp, miss={case_id})
    summary = tmp_path / "summary.md"
    assert cli("gate", "--run", now, "--markdown-summary", str(summary)) == 0
    out = capsys.readouterr().out
    assert "gate PASS" in out and "NOT COMPARABLE" not in out
    assert "compared on the 10 shared cases" in out and "added 1 case(s) (1 production)" in out
    assert f"production {case_id}" in out and "not retrieved" in out
    tags = _tags(now)
    assert tags["gate"] == "pass" and tags["gate_champion_run"] == champ
    assert tags["gate_shared_cases"] == "10" and tags["gate_added_production"] == "1"
    assert tags["gate_p.recall_at_5"] == "1.000000"  # identical on the shared cases
    md = summary.read_text()
    assert "✅ PASS" in md and "New production cases (1)" in md and PRODUCTION_QUERY in md
    assert "| production | 1 | 0.000 |" in md  # how the current config does on them, by kind


def test_a_worse_config_still_fails_the_gate_after_the_golden_set_grew(golden, golden_add, capsys):
    path, exp = golden
    _promote_champion(path, exp)
    golden_add(path)
    cases = [c.case_id for c in load_golden(path).cases]
    now = log_golden_run(path, name="nightly", exp_id=exp, miss=set(cases[:9]))  # loses 9 of the 10 shared
    assert cli("gate", "--run", now) == 1
    out = capsys.readouterr().out
    assert "gate FAIL" in out and "recall@5: significantly worse" in out
    assert _tags(now)["gate"] == "fail" and _tags(now)["gate_shared_cases"] == "10"


def test_a_retired_case_leaves_the_shared_set(golden, capsys):
    path, exp = golden
    old = log_golden_run(path, name="before", exp_id=exp)
    retired = load_golden(path).cases[3].case_id
    # issue 10's `rag-exp golden retire` writes this record; the record-level API is the contract
    GoldenFile(path).append([{"type": "retire", "id": "r-dup", "target": retired, "reason": "duplicate", "who": "qa"}])
    new = log_golden_run(path, name="after", exp_id=exp)
    alignment = align([get_run(old), get_run(new)])
    gap = alignment.gap
    assert alignment.reason is None and gap.retired == (retired,)
    assert len(gap.shared) == 9 and retired not in gap.shared and gap.added.empty
    assert all(len(r.per_case) == 9 and r.metrics["n_cases"] == 9 for r in alignment.runs)
    assert cli("compare", old, new) == 0
    out = capsys.readouterr().out
    assert "compared on the 9 shared cases" in out and "1 were retired" in out and "NOT COMPARABLE" not in out


def test_a_superseded_label_is_reported_and_the_older_label_is_used(golden, capsys):
    path, exp = golden
    case = load_golden(path).cases[0]
    span = case.relevant[0].span.to_json()
    judge = {"kind": "llm", "model": "claude", "prompt_version": "v1"}
    GoldenFile(path).append([{"type": "judgement", "id": "j-1", "case_id": case.case_id, "span": span,
                              "verdict": "YES", "judge": judge}])
    old = log_golden_run(path, name="before", exp_id=exp)
    GoldenFile(path).append([{"type": "judgement", "id": "j-2", "case_id": case.case_id, "span": span,
                              "verdict": "PART", "judge": {"kind": "human", "name": "qa"},
                              "supersedes": "j-1", "reason": "answers only half"}])
    new = log_golden_run(path, name="after", exp_id=exp)
    alignment = align([get_run(old), get_run(new)])
    assert alignment.gap.superseded == (case.case_id,) and alignment.rescored == (new,)
    a, b = (r.per_case.set_index("case_id").loc[case.case_id] for r in alignment.runs)
    assert list(a["grades"]) == [2] and list(b["grades"]) == [2]  # the older label, for both
    assert get_run(new).per_case.set_index("case_id").loc[case.case_id]["grades"] == [1]  # as logged
    assert cli("compare", old, new, "--markdown") == 0
    assert "1 shared case(s) had a label superseded" in capsys.readouterr().out


def test_a_rewritten_golden_file_is_not_comparable(golden, tmp_path, capsys):
    path, exp = golden
    _promote_champion(path, exp)
    records = GoldenFile(path).read()
    path.unlink()
    path.with_name(path.stem + ".manifest.json").unlink()
    # history rewritten: the same cases in another order (an edited line would be refused by read())
    GoldenFile(path).append([{k: v for k, v in r.items() if k != "prev"} for r in reversed(records)])
    now = log_golden_run(path, name="nightly", exp_id=exp)
    summary = tmp_path / "summary.md"
    assert cli("gate", "--run", now, "--markdown-summary", str(summary)) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "gate FAIL" in out and "not on one chain" in out and "not an ancestor" in out
    assert "not an ancestor" in summary.read_text()


def test_an_edited_and_rechained_line_is_named_as_the_first_line_that_differs(golden, capsys):
    """Before: the message named the recorded version's last line (mini.jsonl:10) for an edit of line 3."""
    path, exp = golden
    _promote_champion(path, exp)
    records = GoldenFile(path).read()
    assert records[2]["type"] == "case"
    records[2]["query"] += " (edited)"
    path.unlink()
    path.with_name(path.stem + ".manifest.json").unlink()
    GoldenFile(path).append([{k: v for k, v in r.items() if k != "prev"} for r in records])  # re-chained
    now = log_golden_run(path, name="nightly", exp_id=exp)
    assert cli("gate", "--run", now) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert f"{path}:3 is the first line that differs from the version run" in out
    assert "at or before line 10" in out


def test_a_newer_run_without_stored_ranked_lists_cannot_be_rescored(golden, golden_add, capsys):
    path, exp = golden
    _promote_champion(path, exp)
    golden_add(path)
    now = log_golden_run(path, name="nightly", exp_id=exp, run_file=False)
    assert cli("gate", "--run", now) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "has no stored ranked lists (run.trec)" in out


def test_promote_compares_on_the_shared_cases_when_the_golden_set_grew(golden, golden_add, capsys):
    path, exp = golden
    cases = [c.case_id for c in load_golden(path).cases]
    _promote_champion(path, exp, miss=set(cases[:8]))  # a weak champion: 2 of 10
    golden_add(path)
    better = log_golden_run(path, name="better", exp_id=exp)
    # the weak champion's misses were never judged (judged@10 0.02 vs 0.10): promote says so first
    assert cli("promote") == 1
    assert "LABEL COVERAGE DIFFERS" in capsys.readouterr().out
    assert cli("promote", "--force") == 0
    out = capsys.readouterr().out
    assert "promoted" in out and _tags(better)["champion"] == "true"
    assert "compared on the 10 shared cases" in " ".join(out.split())


def test_rescored_values_pair_with_logged_ones_as_ties(golden, golden_add):
    """per_case.json keeps 10 decimals: a rescored 1/3 is a tie with a logged 0.3333333333, not a loss."""
    path, exp = golden
    old = log_golden_run(path, third, name="before", exp_id=exp)
    golden_add(path)
    new = log_golden_run(path, third, name="after", exp_id=exp)
    a, b = align([get_run(old), get_run(new)]).runs
    assert a.per_case["mrr_at_10"].tolist() == b.per_case["mrr_at_10"].tolist() == [0.3333333333] * 10


def test_only_the_golden_files_in_use_are_searched_for_the_versions(golden, tmp_path):
    """Before: the default experiments/golden/<golden_set tag> was searched too, and its unrelated
    state ("has only N records ... truncated") was reported for runs that never used it."""
    from types import SimpleNamespace

    from rag_experiments.tracking.versioned import candidate_files

    path, _ = golden
    used = SimpleNamespace(params={"golden.path": str(path)}, tags={"golden_set": "demo.jsonl"})
    assert candidate_files([used]) == [path]
    gone = SimpleNamespace(params={"golden.path": str(tmp_path / "moved.jsonl")}, tags={"golden_set": "demo.jsonl"})
    assert candidate_files([gone])[-1].name == "demo.jsonl"  # a file no longer there: the tag is the fallback


def test_promote_says_which_value_of_the_candidate_the_table_compares(golden, golden_add, capsys):
    """Issue 48 item 1: the candidate measured on a newer golden version reads one value on all its
    cases and another on the cases it shares with the champion's version; promote's first line says
    both and which one the table compares (it printed the first, the table the second, unexplained)."""
    path, exp = golden
    cases = [c.case_id for c in load_golden(path).cases]
    _promote_champion(path, exp, miss=set(cases[:8]))
    golden_add(path)
    added = [c.case_id for c in load_golden(path).cases if c.case_id not in cases]
    log_golden_run(path, name="better", exp_id=exp, miss=set(added))  # hits the 10 shared, misses the new
    assert cli("promote", "--force") == 0
    out = " ".join(capsys.readouterr().out.split())
    n = len(cases) + len(added)
    assert f"= {10 / n:.4f} on all its cases" in out, out
    assert "1.0000 on the 10 cases it shares with the champion's golden version" in out, out
