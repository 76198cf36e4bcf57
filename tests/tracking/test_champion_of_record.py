"""One champion of record: the committed record.json is the champion until a promotion beats it.

A fresh clone has the committed ``experiments/promoted/default.record.json`` but an empty model
registry. ``promote`` must compare against the record (not say "no champion yet" and overwrite it
with a worse run), re-populate the registry from it, and agree with ``gate``.
"""

from __future__ import annotations

import json

import numpy as np
from mlflow.tracking import MlflowClient

from rag_experiments.tracking.champion import ALIAS, current_champion

from .conftest import cli, per_case_frame

MODEL = "rag-retriever-default"
KINDS = ["paraphrase"] * 40 + ["exact"] * 20


def _cases(paraphrase_hits: int, exact_hits: int) -> np.ndarray:
    v = np.zeros(60)
    v[:paraphrase_hits] = 1
    v[40:40 + exact_hits] = 1
    return v


def _run(make_run, paraphrase_hits: int, exact_hits: int, name: str) -> str:
    return make_run(per_case_frame(_cases(paraphrase_hits, exact_hits), kinds=KINDS), name=name)


def _fresh_clone_with_record(make_run, store) -> tuple[str, str]:
    """A committed record of a good champion; the registry (a new clone's store) knows nothing."""
    root, _ = store
    champ = _run(make_run, 30, 18, "committed champion")
    assert cli("promote") == 0
    MlflowClient().delete_registered_model(MODEL)
    MlflowClient().delete_run(champ)  # the champion's run lives in someone else's store
    record = root / "experiments/promoted/default.record.json"
    return champ, record.read_text()


def test_a_worse_run_in_a_fresh_clone_does_not_replace_the_committed_record(store, make_run, capsys):
    root, _ = store
    champ, record_before = _fresh_clone_with_record(make_run, store)
    worse = _run(make_run, 20, 18, "worse")
    capsys.readouterr()

    assert cli("promote") == 1
    out = capsys.readouterr().out
    assert "no champion yet" not in out and "REFUSED" in out and "not significantly better" in out
    assert (root / "experiments/promoted/default.record.json").read_text() == record_before
    # the registry is re-populated from the record: the alias is the committed champion's model
    mv = MlflowClient().get_model_version_by_alias(MODEL, ALIAS)
    assert mv.tags["record_run_id"] == champ and mv.tags["champion_source"] == "record"
    assert mv.source.startswith("models:/")
    stand_in = MlflowClient().get_run(mv.run_id)
    assert stand_in.data.tags["champion_source"] == "record" and "golden_sha256" not in stand_in.data.tags
    champion = current_champion()
    assert champion.run.id == champ and champion.source == "record" and champion.version == str(mv.version)
    # a second promote neither re-registers nor changes anything
    assert cli("promote") == 1
    assert MlflowClient().get_model_version_by_alias(MODEL, ALIAS).version == mv.version
    # gate and promote agree on who the champion is
    assert cli("gate", "--run", worse) == 1  # a significant regression against the record
    tags = MlflowClient().get_run(worse).data.tags
    assert tags["gate_champion_run"] == champ and tags["gate_champion_version"] == str(mv.version)


def test_a_run_that_beats_the_record_through_the_gate_replaces_it(store, make_run, capsys):
    root, _ = store
    champ, _ = _fresh_clone_with_record(make_run, store)
    better = _run(make_run, 40, 20, "better")
    capsys.readouterr()
    from rag_experiments.serving.model_logging import sync_with_record

    sync_with_record("default", MlflowClient())  # what promote does first: the record's model, in a stand-in run
    stand_in = MlflowClient().get_model_version_by_alias(MODEL, ALIAS).run_id
    assert MlflowClient().get_run(stand_in).data.tags["champion"] == "true"

    assert cli("promote") == 0
    # one row claims the title: the record's stand-in is not the champion any more (it kept champion=true)
    tags = MlflowClient().get_run(stand_in).data.tags
    assert tags["champion"] == "false" and tags["replaced_by"] == better
    out = capsys.readouterr().out
    assert f"replaced: run {champ}" in out
    record = json.loads((root / "experiments/promoted/default.record.json").read_text())
    assert record["run_id"] == better
    mv = MlflowClient().get_model_version_by_alias(MODEL, ALIAS)
    assert mv.run_id == better and "record_run_id" not in mv.tags
    assert current_champion().run.id == better and current_champion().source == "registry"


def test_a_record_changed_under_git_wins_over_a_stale_registry(store, make_run, capsys):
    root, _ = store
    first = _run(make_run, 10, 18, "first")
    assert cli("promote") == 0
    second = _run(make_run, 40, 20, "second")
    assert cli("promote") == 0
    record_second = (root / "experiments/promoted/default.record.json").read_text()
    # someone else's promotion arrives by git pull while this store still points at `second`
    # (simulated: the record of `first` comes back)
    data = json.loads(record_second)
    data["run_id"] = first
    (root / "experiments/promoted/default.record.json").write_text(json.dumps(data))
    assert current_champion().run.id == first and current_champion().source == "record"
    del second


def test_the_champion_of_record_explains_itself_and_a_dry_run_registers_nothing(store, make_run, capsys):
    import pytest
    from mlflow.exceptions import MlflowException

    champ, _ = _fresh_clone_with_record(make_run, store)
    _run(make_run, 20, 18, "worse progress=False")
    capsys.readouterr()

    assert cli("promote", "--dry-run") == 1  # refused: the worse run does not beat the record
    out = capsys.readouterr().out
    assert "this dry run registers nothing" in out and "version 1" not in out
    with pytest.raises(MlflowException):
        MlflowClient().get_registered_model(MODEL)  # a dry run registers nothing, and says so

    assert cli("promote") == 1  # re-populates the registry from the record
    mv = MlflowClient().get_model_version_by_alias(MODEL, ALIAS)
    stand_in = MlflowClient().get_run(mv.run_id)
    # named for the retriever it is, not for Hydra's overrides
    assert stand_in.info.run_name == "champion: hybrid, heading-200, ?, rrf_k=60"
    metrics = stand_in.data.metrics
    intervals = sorted(k for k in metrics if k.endswith((".ci_low", ".ci_high")))
    assert intervals == ["recall_at_5.ci_high", "recall_at_5.ci_low"]  # the lean list: the objective's only
    assert "recall_at_5.exact" in metrics and "mrr_at_10" in metrics and "n_cases" in metrics
    # the description says what the retriever is and what it was measured on; the record's run is
    # not in this store (deleted above), so no link to it
    text = mv.description
    # the first line plain: the registry's version list shows it as text (raw ** there, issue 48)
    assert text.splitlines()[0] == "hybrid, heading-200, ?, rrf_k=60"
    # the runs list says what the stand-in's metrics were measured on (a column of the opening view)
    assert stand_in.data.tags["measured_on"] == f"golden {'a' * 12}"
    assert "vector + keyword search fused (rrf_k=60, candidate depth 50)" in text
    assert "- chunking: heading, 200 tokens, overlap 0, breadcrumbs" in text
    assert f"version {'a' * 12}" in text and f"corpus {'c' * 12}" in text
    assert "- objective recall_at_5 = 0.8000 [" in text and "(95% bootstrap interval)" in text
    assert f"measured in run {champ}, which is not in this store" in text and "](#/" not in text
    assert f"stand-in run {stand_in.info.run_id}" in text


def test_a_promoted_runs_version_links_to_its_run_in_model_training_mode(store, make_run, capsys):
    run = _run(make_run, 30, 18, "first")
    assert cli("promote") == 0
    out = capsys.readouterr().out
    assert "MLflow UI, the champion in the registry: http://127.0.0.1:5000/#/models/rag-retriever-default/versions/1" \
           "?workflowType=machine_learning" in out
    mv = MlflowClient().get_model_version_by_alias(MODEL, ALIAS)
    exp_id = MlflowClient().get_run(run).info.experiment_id
    assert f"measured in run [{run}](#/experiments/{exp_id}/runs/{run}?workflowType=machine_learning)" in mv.description
