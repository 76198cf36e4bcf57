"""static-minilm: the shipped token table is checked before use, embeds deterministically, is a
valid ``embedding.name``, and ranks the right page first on the mini corpus's cases."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from rag_experiments.embedding.base import load_embedder
from rag_experiments.embedding.options import EmbeddingParams, check_embedder_name
from rag_experiments.embedding.static import TABLE_SHA256, StaticMiniLM, table_path
from rag_experiments.errors import ConfigError


@pytest.fixture(scope="module")
def static():
    return load_embedder("static-minilm")


def test_the_shipped_table_is_the_one_whose_sha256_the_code_names(static, tmp_path):
    assert static.model_sha256 == TABLE_SHA256 and static.model_id == f"static-minilm@{TABLE_SHA256[:12]}"
    assert static.dim == 256
    bad = tmp_path / "embeddings.npy"
    shutil.copyfile(table_path(), bad)
    with open(bad, "r+b") as fh:  # one byte of one vector changed: still a loadable .npy
        fh.seek(-3, 2)
        byte = fh.read(1)
        fh.seek(-3, 2)
        fh.write(bytes([byte[0] ^ 0x01]))
    with pytest.raises(ConfigError, match=r"embeddings\.npy has sha256 [0-9a-f]{64}, expected " + TABLE_SHA256):
        StaticMiniLM(bad)
    with pytest.raises(ConfigError, match="no token table at"):
        StaticMiniLM(tmp_path / "missing.npy")


def test_vectors_are_deterministic_unit_and_independent_of_the_batch(static):
    texts = ["How much memory can a sort use?", "work_mem", "", "SQLSTATE 23505 unique_violation",
             "A longer passage about autovacuum, which reclaims storage occupied by dead tuples. " * 5]
    a = static.embed(texts)
    b = static.embed(list(reversed(texts)))[::-1]
    alone = np.stack([static.embed([t])[0] for t in texts])
    assert a.dtype == np.float32 and a.shape == (5, 256)
    np.testing.assert_array_equal(a, static.embed(texts))
    np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(a, alone, atol=1e-6)
    norms = np.linalg.norm(a, axis=1)
    np.testing.assert_allclose(norms[[0, 1, 3, 4]], 1.0, atol=1e-5)
    assert norms[2] == 0.0  # no token: a zero vector, not NaN
    # a query is embedded like a document: one cached vector serves both
    assert static.space_parts("query") == static.space_parts("document")
    assert static.count_tokens("work_mem") == len(static.token_spans("work_mem")) > 0


def test_the_name_is_a_valid_embedder_and_its_config_group_composes():
    check_embedder_name("static-minilm")
    assert EmbeddingParams(name="static-minilm", batch_size=256).name == "static-minilm"
    with pytest.raises(ConfigError, match="static-minilm was trained without instruction prefixes"):
        EmbeddingParams(name="static-minilm", query_prefix="query: ")
    with pytest.raises(ConfigError, match="'static-minilm'"):  # the hint of a misspelt name offers it
        check_embedder_name("static-minlm")
    from rag_experiments.session import compose_settings

    settings, _ = compose_settings(["embedding=static"])
    assert settings.embedding.name == "static-minilm"


def test_it_ranks_each_cases_page_first_among_the_mini_corpus(static, mini_docs):
    """A sanity check, not a quality bar: the page a question is about is the nearest page for
    most of the mini corpus's hand-written cases (both kinds)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
    from mini_golden_spec import MINI_CASES

    stems = [d.doc_id.split("/")[-1].removesuffix(".html").removesuffix(".md") for d in mini_docs]
    pages = static.embed([d.text for d in mini_docs])
    queries = static.embed([query for _stem, _quote, query, _kind, _ident in MINI_CASES])
    top = [stems[i] for i in np.argmax(queries @ pages.T, axis=1)]
    right = [t == case[0] for t, case in zip(top, MINI_CASES)]
    assert sum(right) >= 0.7 * len(MINI_CASES), list(zip(top, [c[0] for c in MINI_CASES]))
