"""One champion of record: the committed record.json is the champion until a promotion beats it.

A fresh clone has the committed ``experiments/promoted/default.record.json`` but an empty model
registry. ``promote`` must compare against the record (not say "no champion yet" and overwrite it
with a worse run), re-populate the registry from it, and agree with ``gate``.
"""

from __future__ import annotations

import json

import numpy as np
from mlflow.tracking import MlflowClient

from rag_experiments.tracking.promote import ALIAS, current_champion

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

    assert cli("promote") == 0
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
