"""Every config group option and experiment preset composes; bad values name their key."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from rag_experiments.config import Settings, register_schema, settings_from_cfg
from rag_experiments.errors import ConfigError

CONF = Path(__file__).resolve().parent.parent / "conf"
GROUPS = sorted(p.name for p in CONF.iterdir() if p.is_dir() and p.name != "experiment")


def _compose(overrides=(), return_hydra=False):
    register_schema()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=return_hydra)


@pytest.mark.parametrize("group, option", [(g, p.stem) for g in GROUPS for p in sorted((CONF / g).glob("*.yaml"))])
def test_every_group_option_composes_and_validates(group, option):
    cfg = _compose([f"{group}={option}"])
    settings_from_cfg(cfg)


@pytest.mark.parametrize("preset", sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")))
def test_every_experiment_preset_composes(preset):
    cfg = _compose([f"experiment={preset}"], return_hydra=True)
    settings_from_cfg(cfg)


def _leaves(value, prefix=""):
    """A settings value or config container as {dotted key: value} (tuples read as lists)."""
    import dataclasses

    if dataclasses.is_dataclass(value):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)
                 if not f.metadata.get("omegaconf_ignore")}
    if isinstance(value, dict):
        return {k: v for key, sub in value.items() for k, v in _leaves(sub, f"{prefix}{key}.").items()}
    return {prefix[:-1]: list(value) if isinstance(value, tuple) else value}


# What the default group options choose on purpose, against their dataclass's default: nothing.
# (retrieval.keyword.rank was bm25 in the configs and ts_rank in KeywordParams, so code that built
# KeywordParams() by hand, such as the bench's latency rows, silently timed another ranking.)
CHOSEN_BY_DEFAULT_OPTIONS: dict = {}


def test_each_knob_has_one_default():
    """A knob's default is its params dataclass field's; a group YAML that restates it must say the
    same, so a YAML default that drifts from the dataclass (or the reverse) fails here."""
    composed, declared = _leaves(settings_from_cfg(_compose())), _leaves(Settings())
    assert composed.keys() == declared.keys()
    differ = {k: (composed[k], declared[k]) for k in composed if composed[k] != declared[k]}
    assert differ == CHOSEN_BY_DEFAULT_OPTIONS


@pytest.mark.parametrize("overrides", [[], ["experiment=beir"], ["embedding=openai", "rerank=voyage"]])
def test_settings_mirror_the_config_tree(overrides):
    """settings.<group>.<key> is the composed <group>.<key>, for every key (one shape)."""
    from omegaconf import OmegaConf

    cfg = _compose(overrides)
    assert _leaves(settings_from_cfg(cfg)) == _leaves(OmegaConf.to_container(cfg, resolve=True))


def test_defaults():
    s = settings_from_cfg(_compose())
    assert s.retrieval.variant == "hybrid" and s.chunking.name == "heading"
    assert s.eval.ks == (5, 20) and s.fusion.rrf_k == 60
    assert s.golden.file.name == "demo.jsonl"


@pytest.mark.parametrize("override, key", [
    ("fusion.rrf_k=0", "fusion.rrf_k"),
    ("fusion.rrf_k=-5", "fusion.rrf_k"),
    ("fusion.vector_weight=-1", "fusion.vector_weight"),
    ("fusion.keyword_weight=-0.5", "fusion.keyword_weight"),
    ("fusion.depth=10", "fusion.depth"),
    ("retrieval.variant=bm25", "retrieval.variant"),
    ("chunking.overlap=300", "chunking.overlap"),
    ("chunking.max_tokens=0", "chunking.max_tokens"),
    ("rerank.cutoff=0", "rerank.cutoff"),
    ("eval.ks=[0,5]", "eval.ks"),
    ("objective=precision_at_3", "objective"),
    ("retrieval.keyword.rank=bm42", "retrieval.keyword.rank"),
    ("retrieval.keyword.k1=-0.1", "retrieval.keyword.k1"),
    ("retrieval.keyword.b=1.2", "retrieval.keyword.b"),
    ("retrieval.keyword.b=-0.1", "retrieval.keyword.b"),
    ("fusion.engine=spark", "fusion.engine"),
    ("eval.level=page", "eval.level"),
    ("eval.bootstrap_samples=-1", "eval.bootstrap_samples"),
    ("retrieval.hnsw.m=1", "retrieval.hnsw"),
    ("retrieval.hnsw.ef_search=0", "retrieval.hnsw.ef_search"),
    ("embedding.batch_size=0", "embedding.batch_size"),
    ("ingest.executor=spark", "ingest.executor"),
])
def test_bad_values_are_rejected_with_the_key(override, key):
    with pytest.raises(ConfigError) as err:
        settings_from_cfg(_compose([override]))
    assert key in str(err.value)


def test_checks_that_span_groups_name_both_keys():
    with pytest.raises(ConfigError, match="fusion.engine=sql implements variant 'hybrid' only"):
        settings_from_cfg(_compose(["retrieval=vector", "fusion.engine=sql"]))


def test_wrong_types_and_unknown_options_fail_at_composition():
    from hydra.errors import ConfigCompositionException

    with pytest.raises(Exception) as err:
        _compose(["fusion.rrf_k=sixty"])
    assert "rrf_k" in str(err.value)
    with pytest.raises(ConfigCompositionException) as err:
        _compose(["retrieval=bm25"])
    assert "retrieval" in str(err.value)
