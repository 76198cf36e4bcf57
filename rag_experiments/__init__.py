"""rag-experiments: evidence for tuning a RAG retriever.

``from rag_experiments import Retriever`` gives the configured or promoted retriever as a Python
object (:mod:`rag_experiments.serving`); ``from rag_experiments import Passage`` the typed passage a
team's own system returns (:mod:`rag_experiments.retrieval.passages`). Both are imported lazily so
``import rag_experiments`` stays cheap for the CLI and Hydra.
"""
__version__ = "0.1.0"

__all__ = ["Passage", "Retriever", "SearchHit", "__version__"]


def __getattr__(name: str):
    if name == "Passage":  # what a team's own system returns (retrieval=external)
        from .retrieval.passages import Passage

        return Passage
    if name in ("Retriever", "SearchHit"):
        from . import serving

        return getattr(serving, name)
    raise AttributeError(f"module 'rag_experiments' has no attribute {name!r}")
