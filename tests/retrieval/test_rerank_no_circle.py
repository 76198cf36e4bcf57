"""No import circle between the rerankers (issue 58 item 5): rerank.py loads api_rerank.py, and
api_rerank.py reads the config values from rerank_params.py, never from rerank.py (not even for
annotations, where an ``if TYPE_CHECKING`` import kept the circle)."""

from __future__ import annotations

import ast
from pathlib import Path

import rag_experiments.retrieval as retrieval

FOLDER = Path(retrieval.__file__).parent


def _imports(module: str) -> set[str]:
    tree = ast.parse((FOLDER / f"{module}.py").read_text())
    out = set()
    for node in ast.walk(tree):  # every import, in functions and under TYPE_CHECKING too
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            out.add(node.module or "")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rag_experiments.retrieval."):
            out.add(node.module.rsplit(".", 1)[1])
    return out


def test_api_rerank_does_not_import_rerank_and_the_params_are_one_class():
    assert "rerank" not in _imports("api_rerank")
    assert "api_rerank" in _imports("rerank") and "rerank" not in _imports("rerank_params")
    from rag_experiments.retrieval import api_rerank, rerank, rerank_params

    assert rerank.RerankParams is rerank_params.RerankParams is api_rerank.RerankParams
