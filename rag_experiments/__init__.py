"""rag-experiments: evidence for tuning a RAG retriever."""
__version__ = "0.1.0"
