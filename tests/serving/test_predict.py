"""The champion as a pyfunc model and as ``Retriever``: load, predict, refuse another corpus."""

from __future__ import annotations

import mlflow
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException

from .conftest import MODEL_URI

QUERY = "how much memory can a sort use"


def test_predict_refuses_a_database_without_the_corpus_then_ingests_when_asked(promote_mini, fresh_db_url,
                                                                              monkeypatch):
    monkeypatch.setenv("DATABASE_URL", fresh_db_url)
    promote_mini()
    model = mlflow.pyfunc.load_model(MODEL_URI)  # loading needs no database
    with pytest.raises(MlflowException) as err:
        model.predict([QUERY], params={"k": 5})
    msg = err.value.message
    assert "\n" not in msg and "has no strategy heading-" in msg and "rag-exp ingest --set corpus.path=" in msg
    assert "a served model never ingests on request" in msg and err.value.get_http_status_code() == 503

    # a request cannot make it ingest (issue 33: any HTTP client could start one)
    with pytest.raises(MlflowException) as err:
        model.predict([QUERY], params={"k": 5, "ingest": True})
    assert err.value.get_http_status_code() == 503

    ingest_as_operator(model)
    out = model.predict([QUERY], params={"k": 5})
    assert list(out["rank"]) == [1, 2, 3, 4, 5] and set(out["query"]) == {QUERY}
    assert out["score"].is_monotonic_decreasing


def ingest_as_operator(model) -> None:
    """What an operator does (Python API; `rag-exp ingest` from the shell): build the strategy."""
    from rag_experiments import Retriever

    with Retriever.from_config(model.unwrap_python_model().config, ingest=True):
        pass


def test_predict_list_dataframe_and_retriever_search_return_the_same_hits(promote_mini, pg_url, monkeypatch,
                                                                          capsys):
    from rag_experiments import Retriever, SearchHit

    monkeypatch.setenv("DATABASE_URL", pg_url)
    promote_mini()
    model = mlflow.pyfunc.load_model(MODEL_URI)
    ingest_as_operator(model)
    by_list = model.predict([QUERY, "text search configuration"], params={"k": 5})
    by_frame = model.predict(pd.DataFrame({"query": [QUERY, "text search configuration"]}), params={"k": 5})
    pd.testing.assert_frame_equal(by_list, by_frame)
    assert len(by_list) == 10
    first = by_list[by_list["query"] == QUERY]
    assert set(first.columns) >= {"chunk_id", "source_uri", "start", "end", "text", "score", "heading",
                                  "vector_rank", "keyword_rank", "fused_rank", "rerank_rank"}
    assert first["fused_rank"].tolist() == first["rank"].tolist()  # hybrid: the fused rank is the rank
    assert first["rerank_rank"].isna().all()
    assert any(r is not None for r in first["vector_rank"]) and any(r is not None for r in first["keyword_rank"])
    assert all(len(t) == e - s for t, s, e in zip(first["text"], first["start"], first["end"]))

    with Retriever.from_champion("default") as r:
        hits = r.search(QUERY, k=5)
    assert all(isinstance(h, SearchHit) for h in hits)
    assert [h.to_dict() for h in hits] == first.drop(columns="query").to_dict(orient="records")
    assert hits[0].heading and " > " not in hits[0].heading[:1]

    # the CLI prints the same hits as a table
    from tests.tracking.conftest import cli

    assert cli("search", QUERY, "-k", "3") == 0
    out = capsys.readouterr().out
    assert "champion rag-retriever-default" in out and hits[0].source_uri in out and "score" in out
    assert hits[0].heading.split(" > ")[0] in out and f"{hits[0].score:.4f}" in out
    assert cli("search", "", "-k", "3") == 2
    assert "query[0]: is empty" in capsys.readouterr().err


def test_a_database_on_another_corpus_version_is_refused_even_with_ingest(promote_mini, pg_url, monkeypatch):
    from rag_experiments.errors import UserError
    from rag_experiments import Retriever

    monkeypatch.setenv("DATABASE_URL", pg_url)
    promote_mini(corpus_digest="0" * 64)  # promoted on a corpus that is not the files on disk
    with pytest.raises(UserError, match="promoted on 000000000000"):
        Retriever.from_champion("default", ingest=True)  # the operator's ingest refuses another corpus
    with pytest.raises(MlflowException) as err:
        mlflow.pyfunc.load_model(MODEL_URI).predict([QUERY], params={"k": 5})
    assert err.value.get_http_status_code() == 503


BAD_INPUT = [
    ([""], {"k": 5}, "query[0]: is empty"),
    (["   "], {"k": 5}, "query[0]: is empty"),
    ([QUERY], {"k": 0}, "k: must be between 1 and 50"),
    ([QUERY], {"k": 10**9}, "k: must be between 1 and 50"),
    (["x" * 100_000], {"k": 5}, "has 100,000 characters; the limit is 4,000"),
    (["sort\x00memory"], {"k": 5}, "contains a NUL character (at 4)"),
    ([1, 2], {"k": 5}, "query[0]: must be a string, got int"),
    ([QUERY, 2], {"k": 5}, "query[1]: must be a string, got int"),
    ([QUERY] * 101, {"k": 5}, "at most 100 queries per call, got 101"),
]


def test_bad_input_is_an_invalid_parameter_error(promote_mini, pg_url, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", pg_url)
    promote_mini()
    model = mlflow.pyfunc.load_model(MODEL_URI)
    ingest_as_operator(model)
    for bad, params, needle in BAD_INPUT:
        with pytest.raises(MlflowException) as err:
            model.predict(bad, params=params)
        assert needle in err.value.message and err.value.get_http_status_code() == 400, (bad[0][:20], params)
