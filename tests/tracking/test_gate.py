"""`rag-exp gate`: today's run against the champion's recorded run (no Hydra subprocess here)."""

from __future__ import annotations

import numpy as np
from mlflow.tracking import MlflowClient

from rag_experiments.commands.gate import experiment_override

from .conftest import cli, per_case_frame
from .test_promote import KINDS, _cases


def _champion(make_run) -> str:
    rid = make_run(per_case_frame(_cases(30, 18), kinds=KINDS), name="champion")
    assert cli("promote") == 0
    return rid


def test_same_results_pass_and_write_the_summary(store, make_run, tmp_path, capsys):
    champ = _champion(make_run)
    now = make_run(per_case_frame(_cases(30, 18), kinds=KINDS), name="nightly")
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    assert cli("gate", "--run", now, "--markdown-summary", str(summary)) == 0
    assert "gate PASS" in capsys.readouterr().out
    tags = MlflowClient().get_run(now).data.tags
    assert tags["gate"] == "pass" and tags["gate_champion_run"] == champ and tags["gate_metric"] == "recall_at_5"
    assert tags["gate_p.recall_at_5"] == "1.000000" and tags["gate_champion_version"] == "1"
    md = summary.read_text()
    assert md.startswith("earlier step\n## Retrieval gate: ✅ PASS")  # appended, as $GITHUB_STEP_SUMMARY wants
    assert "| check | champion | current |" in md and "| recall@5 (exact) |" in md
    assert "<details>" in md and "| run | n | recall@5 |" in md


def test_regression_on_exact_fails_with_exit_code_1(store, make_run, tmp_path, capsys):
    _champion(make_run)
    # overall drop is small (-8/60 -> not significant on its own), but 8 of 18 exact hits lost
    now = make_run(per_case_frame(_cases(30, 10), kinds=KINDS), name="nightly")
    summary = tmp_path / "summary.md"
    assert cli("gate", "--run", now, "--markdown-summary", str(summary)) == 1
    out = capsys.readouterr().out
    assert "gate FAIL" in out and "recall@5 (exact): significantly worse" in out
    tags = MlflowClient().get_run(now).data.tags
    assert tags["gate"] == "fail" and "exact" in tags["gate_reason"]
    md = summary.read_text()
    assert "## Retrieval gate: ❌ FAIL" in md and "**Why:**" in md and "❌ **FAIL**" in md


def test_improvement_passes(store, make_run, capsys):
    _champion(make_run)
    now = make_run(per_case_frame(_cases(40, 20), kinds=KINDS), name="nightly")
    assert cli("gate", "--run", now) == 0


def test_newest_run_by_default_and_committed_record_as_fallback(store, make_run, capsys):
    champ = _champion(make_run)
    MlflowClient().delete_registered_model("rag-retriever-default")  # e.g. a fresh store in CI
    now = make_run(per_case_frame(_cases(30, 18), kinds=KINDS), name="nightly")
    assert cli("gate") == 0
    tags = MlflowClient().get_run(now).data.tags
    assert tags["gate"] == "pass" and tags["gate_champion_source"] == "record"
    assert tags["gate_champion_run"] == champ and tags["gate_champion_version"] == "1"  # from the record


def test_other_golden_set_fails(store, make_run, capsys):
    _champion(make_run)
    now = make_run(per_case_frame(_cases(30, 18), kinds=KINDS), name="nightly", golden="f" * 64)
    assert cli("gate", "--run", now) == 1
    out = capsys.readouterr().out
    assert "another golden set" in out and "gate FAIL" in out


def test_no_champion_is_a_user_error(store, make_run, capsys):
    now = make_run(per_case_frame(np.ones(4)), name="nightly")
    assert cli("gate", "--run", now) == 2
    assert "no champion" in capsys.readouterr().err


def test_run_now_needs_a_promoted_preset(store, capsys):
    root, _ = store
    from rag_experiments.tracking.champion import record_path

    record_path("default").parent.mkdir(parents=True)
    # a champion record exists, but no conf/experiment/promoted.yaml
    (root / "experiments/promoted/default.record.json").write_text(
        '{"run_id": "%s", "tags": {}, "metrics": {}, "per_case": {"columns": ["case_id"], "data": [["c"]]}}'
        % ("0" * 32))
    assert cli("gate", "--run-now") == 2
    assert "promoted.yaml does not exist" in capsys.readouterr().err


def test_experiment_override_follows_the_defaults_list(tmp_path):
    (tmp_path / "conf").mkdir()
    cfg = tmp_path / "conf" / "config.yaml"
    cfg.write_text("defaults:\n  - base_config\n  - _self_\n")
    assert experiment_override(tmp_path, "promoted") == "+experiment=promoted"
    cfg.write_text("defaults:\n  - base_config\n  - _self_\n  - experiment: null\n")
    assert experiment_override(tmp_path, "promoted") == "experiment=promoted"
    cfg.write_text("defaults:\n  - optional experiment: null\n")
    assert experiment_override(tmp_path, "promoted_faq") == "experiment=promoted_faq"


def test_a_run_now_with_overrides_is_tagged_with_them(store, make_run, monkeypatch, capsys):
    """`--run-now --set K=V` runs another config than the promoted one: the run is tagged gate_overrides
    (a secret masked), which history reads to leave it out of the nightly trend. The subprocess run is
    stood in for by a logged run: what is tested is the gate's record of it."""
    import rag_experiments.commands.gate as gate

    _champion(make_run)
    now = make_run(per_case_frame(_cases(30, 18), kinds=KINDS), name="nightly")
    monkeypatch.setattr(gate, "run_now", lambda name, overrides: now)
    assert cli("gate", "--run-now", "--set", "retrieval.variant=keyword", "--set",
               "db.url=postgresql://u:hunter2@h/db") == 0
    tags = MlflowClient().get_run(now).data.tags
    assert tags["gate_overrides"].startswith("retrieval.variant=keyword db.url=") and "hunter2" not in tags["gate_overrides"]
    plain = make_run(per_case_frame(_cases(30, 18), kinds=KINDS), name="nightly")
    assert cli("gate", "--run", plain) == 0 and "gate_overrides" not in MlflowClient().get_run(plain).data.tags
