"""`rag-exp promote`: the paired gate, the registry alias, and the two YAML files."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from mlflow.tracking import MlflowClient

from rag_experiments.promotion import promote
from rag_experiments.tracking.champion import ALIAS, PRESET_DROP, current_champion

from .conftest import cli, per_case_frame

MODEL = "rag-retriever-default"
KINDS = ["paraphrase"] * 40 + ["exact"] * 20


def _cases(paraphrase_hits: int, exact_hits: int) -> np.ndarray:
    """recall@5 per case: the first ``paraphrase_hits`` paraphrase and ``exact_hits`` exact cases hit."""
    v = np.zeros(60)
    v[:paraphrase_hits] = 1
    v[40:40 + exact_hits] = 1
    return v


def _run(make_run, paraphrase_hits: int, exact_hits: int, name: str, **kw) -> str:
    return make_run(per_case_frame(_cases(paraphrase_hits, exact_hits), kinds=KINDS), name=name, **kw)


def _alias_run() -> str:
    return MlflowClient().get_model_version_by_alias(MODEL, ALIAS).run_id


def _compose(conf_dir, overrides):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from rag_experiments.config import register_schema

    register_schema()
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        return OmegaConf.to_container(compose("config", overrides=overrides), resolve=True)


def test_first_promotion_writes_both_yaml_files_and_reproduces_the_config(store, make_run, repo_conf, capsys):
    root, _ = store
    resolved = _compose(repo_conf, ["retrieval=vector", "fusion.rrf_k=33", "chunking.max_tokens=120",
                                    "eval.ks=[5,10,20]"])
    rid = _run(make_run, 30, 15, "retrieval=vector fusion.rrf_k=33", config=resolved)

    assert cli("promote", "--metric", "recall_at_5") == 0
    out = capsys.readouterr().out
    assert "promoted" in out and "replaced: nothing (first champion)" in out
    assert _alias_run() == rid
    assert MlflowClient().get_run(rid).data.tags["champion"] == "true"
    mv = MlflowClient().get_model_version_by_alias(MODEL, ALIAS)
    assert mv.source.startswith("models:/") and mv.run_id == rid and mv.tags["primary_metric"] == "recall_at_5"
    # the version is a pyfunc model carrying the config and the digests it was measured on
    import mlflow

    model = mlflow.pyfunc.load_model(f"models:/{MODEL}@{ALIAS}")
    assert model.metadata.get_params_schema().to_dict()[0]["name"] == "k"
    # "any", not "string": a string schema makes MLflow coerce non-strings before predict's own check
    assert [c["type"] for c in model.metadata.get_input_schema().to_dict()] == ["any"]
    inner = model.unwrap_python_model()
    assert inner.manifest["golden_sha256"] == "a" * 64 and inner.manifest["corpus_digest"] == "c" * 64
    assert inner.manifest["package_version"] and inner.manifest["run_id"] == rid
    assert inner.config["fusion"]["rrf_k"] == 33 and "db" not in inner.config and "tracking" not in inner.config

    promoted = root / "experiments" / "promoted" / "default.yaml"
    text = promoted.read_text()
    assert text.startswith("# Promoted retriever config 'default'")
    assert f"# run: {rid}" in text and "recall_at_5 = 0.7500" in text and "first champion" in text
    assert yaml.safe_load(text) == resolved  # the resolved config, under a comment header

    preset = root / "conf" / "experiment" / "promoted.yaml"
    ptext = preset.read_text()
    assert ptext.startswith("# @package _global_\n")
    body = yaml.safe_load(ptext)
    assert not set(PRESET_DROP) & set(body)
    # `python run.py experiment=promoted` composes to the same values (from the stock defaults)
    from rag_experiments.commands.gate import experiment_override

    again = _compose(repo_conf, [experiment_override(root, "promoted")])
    drop = lambda c: {k: v for k, v in c.items() if k not in PRESET_DROP}  # noqa: E731
    assert drop(again) == drop(resolved)
    assert again["retrieval"]["variant"] == "vector" and again["fusion"]["rrf_k"] == 33
    assert (root / "experiments" / "promoted" / "default.record.json").exists()


def test_better_on_paraphrase_but_worse_on_exact_is_refused(store, make_run, capsys):
    root, _ = store
    champ = _run(make_run, 10, 20, "champion")  # recall@5 0.50: all exact cases hit
    assert cli("promote") == 0
    before = (root / "experiments/promoted/default.yaml").read_text()
    cand = _run(make_run, 40, 8, "candidate")  # 0.80 overall: +30 paraphrase wins, 12 exact losses
    capsys.readouterr()

    assert cli("promote", "--metric", "recall_at_5") == 1
    out = capsys.readouterr().out
    assert "REFUSED" in out and "recall@5 (exact): significantly worse" in out
    assert "--force" in out
    assert _alias_run() == champ  # nothing changed
    assert "champion" not in MlflowClient().get_run(cand).data.tags
    assert (root / "experiments/promoted/default.yaml").read_text() == before
    # the overall improvement itself was significant: the exact guard is what refused it
    d = promote("recall_at_5", dry_run=True).decision
    overall, exact = d.checks
    assert overall.passed and overall.p < 0.05 and overall.delta == pytest.approx(0.3)
    assert not exact.passed and exact.delta == pytest.approx(-0.6) and exact.wtl.losses == 12


def test_clear_improvement_replaces_the_champion_and_says_by_how_much(store, make_run, capsys):
    root, _ = store
    old = _run(make_run, 10, 20, "old")
    assert cli("promote") == 0
    new = _run(make_run, 38, 20, "new")  # +28 paraphrase wins, exact unchanged
    capsys.readouterr()

    assert cli("promote") == 0
    out = capsys.readouterr().out
    assert f"replaced: run {old}" in out and "recall_at_5: 0.5000 -> 0.9667 (+0.4667" in out
    assert _alias_run() == new
    tags = MlflowClient().get_run(old).data.tags
    assert tags["champion"] == "false" and tags["replaced_by"] == new
    head = (root / "experiments/promoted/default.yaml").read_text()
    assert f"# replaced: run {old}" in head and "registry version 1" in head and "W/T/L 28/32/0" in head
    assert str(MlflowClient().get_model_version_by_alias(MODEL, ALIAS).version) == "2"


def test_not_significant_is_refused_and_force_promotes_with_a_tag(store, make_run, capsys):
    _run(make_run, 10, 20, "champion")
    assert cli("promote") == 0
    cand = _run(make_run, 11, 20, "one more hit")
    assert cli("promote") == 1
    assert "not significantly better" in capsys.readouterr().out
    assert cli("promote", "--force") == 0
    out = capsys.readouterr().out
    assert "FORCED" in out and "not significantly better" in out
    assert _alias_run() == cand
    assert MlflowClient().get_run(cand).data.tags["promoted_forced"] == "true"


def test_champion_on_another_golden_set_is_refused_unless_forced(store, make_run, capsys):
    _run(make_run, 10, 20, "champion", golden="1" * 64)
    assert cli("promote") == 0
    cand = _run(make_run, 40, 20, "candidate", golden="2" * 64)
    capsys.readouterr()
    assert cli("promote") == 1
    out = capsys.readouterr().out
    assert "WARNING" in out and "another golden set" in out and "paired test over cases is impossible" in out
    assert cli("promote", "--force") == 0
    assert _alias_run() == cand


def test_already_champion_changes_nothing(store, make_run, capsys):
    _run(make_run, 10, 20, "only")
    assert cli("promote") == 0
    assert cli("promote") == 0
    assert "already the champion" in capsys.readouterr().out
    assert str(MlflowClient().get_model_version_by_alias(MODEL, ALIAS).version) == "1"


def test_candidates_finished_on_the_newest_golden_set_of_the_sweep(store, make_run, make_parent):
    _run(make_run, 40, 20, "best but old golden", golden="1" * 64)
    parent = make_parent()
    a = _run(make_run, 20, 10, "a", parent=parent)
    b = _run(make_run, 30, 10, "b", parent=parent)
    _run(make_run, 40, 20, "failed", parent=parent, status="FAILED")
    _run(make_run, 5, 5, "outside the sweep")
    assert promote("recall_at_5", dry_run=True).decision.candidate.id == b  # newest golden: 1* excluded
    assert promote("recall_at_5", sweep=parent, dry_run=True).decision.candidate.id == b
    assert promote("mrr_at_10", sweep=parent, dry_run=True).decision.candidate.id == b
    assert current_champion() is None
    del a


def test_bad_name_is_a_user_error(store, make_run, capsys):
    _run(make_run, 1, 1, "x")
    assert cli("promote", "--name", "../etc") == 2
    assert "--name" in capsys.readouterr().err
