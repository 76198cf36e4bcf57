"""Retrieval: the keyword and vector legs, fusion, rerank, and the variants built from them."""
