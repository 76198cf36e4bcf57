"""A LlamaIndex stack measured as an external retriever: its own chunker (``SentenceSplitter``)
and its own BM25 retriever (``llama_index.retrievers.bm25.BM25Retriever``, over bm25s), built
once per process.

    python run.py retrieval=external retrieval.external.target=examples.llamaindex_bm25:LlamaIndexBM25 \\
        retrieval.external.init.chunk_size=256

``NodeWithScore`` objects are returned as they come: the node's ``start_char_idx`` /
``end_char_idx`` place it by offset, its ``metadata["source_uri"]`` names the document. The
splitter counts tokens with a whitespace tokenizer here, so nothing is downloaded (LlamaIndex's
default tokenizer is tiktoken's, whose encoding files come from the network).
"""

from __future__ import annotations

from llama_index.core import Document
from llama_index.core.node_parser import SentenceSplitter
from llama_index.retrievers.bm25 import BM25Retriever

from rag_experiments.corpus.loader import load_corpus


class LlamaIndexBM25:
    def __init__(self, corpus: str = "demo", chunk_size: int = 256, chunk_overlap: int = 32) -> None:
        docs = [Document(text=d.text, metadata={"source_uri": d.source_uri}, id_=d.doc_id) for d in load_corpus(corpus)]
        splitter = SentenceSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap, tokenizer=str.split)
        self.nodes = splitter.get_nodes_from_documents(docs)
        self.chunk_size = chunk_size
        self._retrievers: dict[int, BM25Retriever] = {}

    def search(self, query: str, k: int):
        if k not in self._retrievers:  # its top-k is fixed at construction
            self._retrievers[k] = BM25Retriever.from_defaults(nodes=self.nodes, similarity_top_k=k)
        return self._retrievers[k].retrieve(query)
