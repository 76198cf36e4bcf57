"""The vectors shipped with the demo (rag_experiments/embedding/shipped.py): they are what the
bundled model computes for the default chunking's texts, an ingest reads them only for texts they
cover, counts them apart from embedded texts and cached ones, and a benchmark never reads them."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from rag_experiments.chunk_index import embedding_space_key, ingest
from rag_experiments.chunking import chunk_corpus
from rag_experiments.corpus.loader import load_corpus
from rag_experiments.db.connect import connect
from rag_experiments.embedding import shipped
from rag_experiments.session import compose_settings
from rag_experiments.types import sha256_text

REMAKE = "the demo, the default chunking or the model changed: re-make them with `make demo-vectors`"


@pytest.fixture(scope="module")
def default_settings():
    settings, _ = compose_settings([])
    return settings


@pytest.fixture(scope="module")
def demo_docs(default_settings):
    return load_corpus(default_settings.corpus.path, default_settings.corpus.name)


@pytest.fixture(scope="module")
def pack():
    loaded = shipped.load()
    assert loaded is not None, f"no {shipped.shipped_path()}: {REMAKE}"
    return loaded


@pytest.fixture
def fresh(fresh_db_url):
    c = connect(fresh_db_url)
    yield c
    c.close()


def test_they_cover_every_text_of_the_default_chunking_of_the_demo(pack, default_settings, demo_docs, embedder):
    assert default_settings.corpus.path == "demo" and default_settings.embedding.name == "minilm-onnx"
    assert pack.space == embedding_space_key(embedder, "document"), REMAKE
    texts = {sha256_text(c.indexed_text) for c in chunk_corpus(demo_docs, default_settings.chunking, embedder)}
    missing = texts - set(pack.row)
    assert not missing, f"{len(missing)} of {len(texts)} texts have no shipped vector: {REMAKE}"
    assert pack.meta["texts"] == len(pack.row) == len(texts)  # nothing shipped that the demo does not use
    assert pack.vectors.dtype == np.float32 and pack.vectors.shape == (len(texts), embedder.dim)


def test_they_are_what_the_bundled_model_computes(pack, default_settings, demo_docs, embedder):
    chunks = chunk_corpus(demo_docs[:40], default_settings.chunking, embedder)
    sample = [c.indexed_text for c in chunks[::max(1, len(chunks) // 12)]][:12]
    fresh = embedder.embed(sample, batch_size=16)
    stored = np.stack([pack.vectors[pack.row[sha256_text(t)]] for t in sample])
    # the same model on the same texts; only the batch's padding differs (~1e-7)
    assert float(np.max(np.abs(fresh - stored))) < 1e-5


def test_an_ingest_reads_them_for_the_texts_they_cover_and_embeds_the_rest(fresh, default_settings, demo_docs,
                                                                           embedder, pack):
    params = default_settings.chunking
    # three pages as shipped, and a fourth edited: its texts are not in the file
    edited = replace(demo_docs[3], text=demo_docs[3].text + "\n\nA sentence no shipped vector knows.\n")
    docs = [*demo_docs[:3], edited]
    expected = {sha256_text(c.indexed_text) for c in chunk_corpus(docs, params, embedder)}
    covered = expected & set(pack.row)
    assert covered and expected - covered

    report = ingest(fresh, docs, params, embedder)
    assert report.shipped_vectors == len(covered)
    assert report.texts_embedded == report.n_chunks - len(covered) > 0
    assert report.embedding_cache_hits == 0
    assert f"{len(covered)} vectors shipped with the demo" in report.summary()
    # the chunks hold the shipped vectors, and the cache holds them for the next strategy
    rows = fresh.execute("SELECT text_hash, embedding FROM chunks WHERE strategy_id = %s",
                         (report.strategy_id,)).fetchall()
    for h, v in rows:
        if h in covered:
            assert np.array_equal(np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32),
                                  pack.vectors[pack.row[h]])
    cached = fresh.execute("SELECT count(*) FROM embedding_cache").fetchone()[0]
    assert cached == len(expected)


def test_a_benchmark_ingest_embeds_everything(fresh, default_settings, demo_docs, embedder, pack):
    docs = demo_docs[:2]
    report = ingest(fresh, docs, default_settings.chunking, embedder, shipped_vectors=False)
    assert report.shipped_vectors == 0 and report.texts_embedded == report.n_chunks > 0
    assert "shipped" not in report.summary()


def test_another_model_space_reads_nothing(pack):
    some = list(pack.row)[:5]
    assert pack.lookup(pack.space, some).keys() == set(some)
    assert pack.lookup("another-space", some) == {}


@pytest.mark.parametrize("content", [b"not a zip", b""])
def test_an_unreadable_file_warns_in_one_line_and_embeds_instead(tmp_path, content):
    bad = tmp_path / "demo_vectors.npz"
    bad.write_bytes(content)
    with pytest.warns(UserWarning, match=r"demo_vectors\.npz: unreadable shipped vectors .*make demo-vectors"):
        assert shipped.load(str(bad)) is None


def test_a_file_whose_rows_disagree_is_refused(tmp_path):
    bad = tmp_path / "demo_vectors.npz"
    np.savez(bad, meta=np.array(json.dumps({"space": "x"})), hashes=np.array([b"a" * 64, b"b" * 64]),
             vectors=np.zeros((3, 4), dtype=np.float32))
    with pytest.warns(UserWarning, match="2 hashes, vectors of shape"):
        assert shipped.load(str(bad)) is None
