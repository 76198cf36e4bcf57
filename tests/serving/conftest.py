"""A champion whose config is the mini corpus, promoted into a throwaway MLflow store (the
tracking tests' ``store``), on the session's real PostgreSQL."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES
from tests.tracking.conftest import _template_db, base_config, make_run, per_case_frame, store  # noqa: F401

MODEL_URI = "models:/rag-retriever-default@champion"


def mini_config(**changes) -> dict:
    return base_config(**{"corpus.path": str(FIXTURES / "mini_corpus"), "corpus.name": "mini", **changes})


@pytest.fixture
def promote_mini(store, make_run, mini_docs):
    """promote_mini(corpus_digest=None, **config changes) -> run id: a run of the mini config,
    promoted to champion 'default' (the real mini corpus digest unless one is given)."""
    from rag_experiments.corpus.loader import corpus_manifest
    from rag_experiments.promotion import promote

    def make(corpus_digest: str | None = None, **changes) -> str:
        digest = corpus_digest or corpus_manifest(mini_docs)["digest"]
        rid = make_run(per_case_frame([1.0, 0.0] * 10), name="mini", config=mini_config(**changes), corpus=digest)
        assert promote("recall_at_5", force=True).promoted
        return rid

    return make
