"""The retrieval-system registry (rag_experiments.retrieval.systems): every variant is one registered
entry, and validation, the MLflow config pruning and the run-name summary read it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rag_experiments.errors import ConfigError
from rag_experiments.retrieval.retriever import VARIANTS
from rag_experiments.retrieval.systems import owned_config, registry, system_type
from rag_experiments.tracking.retriever_summary import long, short

CONF = Path(__file__).resolve().parents[2] / "conf" / "retrieval"


def test_every_variant_is_registered_once_and_every_option_names_one():
    names = list(registry())
    assert names[:7] == ["vector", "keyword", "hybrid", "hybrid_rerank", "external", "http", "stored"]
    assert "bm25s" in names and len(set(names)) == len(names)
    # the Retriever class implements exactly the registered systems with legs
    assert VARIANTS == tuple(n for n, s in registry().items() if s.legs)
    for yaml_file in CONF.glob("*.yaml"):
        variant = re.search(r"^variant: (\S+)", yaml_file.read_text(), re.M).group(1)
        assert variant in registry(), yaml_file
    for name, system in registry().items():
        assert system.kind in ("index", "team") and system.summary and (CONF / f"{name}.yaml").is_file(), name


def test_an_unknown_variant_is_one_line_naming_the_key_and_the_choices():
    with pytest.raises(ConfigError) as exc:
        system_type("hybird")
    assert str(exc.value) == ("retrieval.variant: unknown variant 'hybird'; use one of "
                              + ", ".join(registry()))


def test_the_checks_that_depend_on_the_system_read_the_registry():
    from rag_experiments.retrieval.fusion import FusionParams
    from rag_experiments.retrieval.query_rewrite import QueryParams
    from rag_experiments.retrieval.retriever import RetrievalParams

    with pytest.raises(ConfigError, match=r"fusion.engine=sql implements variant 'hybrid' only, not 'bm25s'"):
        RetrievalParams(variant="bm25s", fusion=FusionParams(engine="sql"))
    with pytest.raises(ConfigError, match=r"retrieval=bm25s does not rewrite queries"):
        RetrievalParams(variant="bm25s", query=QueryParams(rewrite="multi_query"))
    with pytest.raises(ConfigError, match=r"retrieval=keyword has no vector leg"):
        RetrievalParams(variant="keyword", query=QueryParams(rewrite="hyde"))
    assert system_type("hybrid_rerank").rerank and not system_type("hybrid").rerank
    assert [n for n, s in registry().items() if s.embeds_queries] == ["vector", "hybrid", "hybrid_rerank"]


RETRIEVAL = {"variant": None, "keyword": {"rank": "bm25"}, "use_cache": True,
             "external": {"target": "m:f", "max_unplaced": 0.1, "offsets": "auto", "cache": True},
             "http": {"url": "http://127.0.0.1:1/s", "format": "rag"},
             "stored": {"path": "run.trec", "format": "trec"}}


@pytest.mark.parametrize("variant, kept", [
    ("hybrid", {"variant", "keyword", "use_cache"}),
    ("bm25s", {"variant", "keyword", "use_cache"}),
    ("external", {"variant", "keyword", "use_cache", "external"}),
    ("http", {"variant", "keyword", "use_cache", "http", "external"}),
    ("stored", {"variant", "keyword", "use_cache", "stored", "external"}),
])
def test_a_run_logs_only_the_config_its_system_owns(variant, kept):
    out = owned_config({**RETRIEVAL, "variant": variant})
    assert set(out) == kept
    if variant == "stored":  # the one knob it shares with retrieval=external
        assert out["external"] == {"max_unplaced": 0.1}
    if variant == "http":  # and a service its answer cache's knobs (issue 55: version, cache, the check)
        assert out["external"] == {"max_unplaced": 0.1, "version": None, "cache": True, "verify": None,
                                   "verify_share": None, "verify_seed": None}
    if variant == "external":
        assert out["external"] == RETRIEVAL["external"]


CONFIG = {"chunking": {"name": "heading", "max_tokens": 200, "overlap": 0}, "embedding": {"name": "minilm-onnx"},
          "fusion": {"method": "rrf", "rrf_k": 30, "depth": 50}, "rerank": {"name": "cross", "cutoff": 20},
          "retrieval": {"keyword": {"k1": 0.9, "b": 0.4}, "external": {"target": "my.mod:search"},
                        "http": {"url": "http://u:secret@127.0.0.1:9/search"}, "stored": {"path": "r.trec"}}}


@pytest.mark.parametrize("variant, expected", [
    ("vector", "vector, heading-200, minilm-onnx"),
    ("keyword", "keyword, heading-200"),
    ("hybrid", "hybrid, heading-200, minilm-onnx, rrf_k=30"),
    ("hybrid_rerank", "hybrid_rerank, heading-200, minilm-onnx, rrf_k=30, rerank cross@20"),
    ("external", "external my.mod:search, heading-200"),
    ("stored", "stored r.trec, heading-200"),
    ("bm25s", "bm25s k1=0.9 b=0.4, heading-200"),
    ("gone", "gone, heading-200, minilm-onnx"),  # a run of a system this version lacks
])
def test_the_run_name_is_the_systems_own_description(variant, expected):
    config = {**CONFIG, "retrieval": {**CONFIG["retrieval"], "variant": variant}}
    assert short(config) == expected


def test_the_registered_description_says_what_the_system_is_and_hides_secrets():
    def text(variant):
        return long({**CONFIG, "retrieval": {**CONFIG["retrieval"], "variant": variant}}, {}, "recall_at_5", {}, None, "r1")

    assert "- retriever: `keyword`: keyword search (BM25 in PostgreSQL)" in text("keyword")
    assert "embedding model" not in text("keyword") and "embedding model" not in text("bm25s")
    assert ("- retriever: `hybrid_rerank`: vector + keyword search fused (rrf_k=30, candidate depth 50), reranked "
            "by cross over the top 20") in text("hybrid_rerank")
    http = text("http")
    assert "a team's own system (`retrieval=http`" in http and "secret" not in http
