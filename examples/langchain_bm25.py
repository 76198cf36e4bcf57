"""A LangChain stack measured as an external retriever: its own chunker
(``RecursiveCharacterTextSplitter``, ``add_start_index=True``) and its own BM25 retriever
(``langchain_community.retrievers.BM25Retriever``, over rank_bm25), built once per process.

    python run.py retrieval=external retrieval.external.target=examples.langchain_bm25:LangChainBM25 \\
        retrieval.external.init.chunk_size=800

LangChain ``Document`` objects are returned as they come: ``metadata["source"]`` names the corpus
document (its source_uri) and ``metadata["start_index"]`` places the chunk by offset.
"""

from __future__ import annotations

from langchain_community.retrievers import BM25Retriever
from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter

from rag_experiments.corpus.loader import load_corpus


class LangChainBM25:
    def __init__(self, corpus: str = "demo", chunk_size: int = 800, chunk_overlap: int = 100) -> None:
        docs = [Document(page_content=d.text, metadata={"source": d.source_uri}) for d in load_corpus(corpus)]
        splitter = RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap,
                                                  add_start_index=True)
        self.chunks = splitter.split_documents(docs)
        self.retriever = BM25Retriever.from_documents(self.chunks, k=20)

    def search(self, query: str, k: int) -> list[Document]:
        self.retriever.k = k
        return self.retriever.invoke(query)
