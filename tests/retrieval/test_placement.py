"""Placing passages in the corpus text: hand-worked offsets for each method, and the readers of
what real LangChain and LlamaIndex objects look like (the libraries themselves, not look-alikes)."""

from __future__ import annotations

import pytest

from rag_experiments.retrieval.passages import ExternalResultError, Passage, read_passage, read_result
from rag_experiments.retrieval.placement import Placer
from rag_experiments.types import Document

TEXT = "Alpha beta.\n\n**Gamma**   delta `x_y`.\nEnd."
#       0         1         2         3         4
#       0123456789012345678901234567890123456789012
DOC = Document("d/one.html", "d/one.html", "One", "misc", TEXT, "t")
LONG = Document("d/long.html", "d/long.html", "Long", "misc",
                "Intro.\n\nThe checkpointer writes all dirty buffers to disk at every checkpoint, then it "
                "flushes the write-ahead log so that recovery can start from there.\n\nOutro.", "t")
PLACER = Placer([DOC, LONG])


def place(**kw):
    return PLACER.place(Passage(**kw), "test")


def test_exact_text():
    p = place(document="d/one.html", text="beta.")
    assert (p.method, p.start, p.end) == ("exact", 6, 11)


def test_normalised_whitespace_markup_and_case():
    p = place(document="d/one.html", text="gamma delta x_y.")
    assert (p.method, p.start, p.end) == ("normalised", 15, 37)  # from the G of **Gamma** to the final '.'
    assert TEXT[p.start:p.end] == "Gamma**   delta `x_y`."


def test_a_breadcrumb_in_front_is_dropped():
    p = place(document="d/one.html", text="One > Section\nGamma delta x_y.")
    assert (p.method, p.start, p.end, p.note) == ("normalised", 15, 37, "1 leading line(s) dropped")


def test_fuzzy_when_a_word_changed():
    p = place(document="d/long.html", text="The checkpointer writes all dirty pages to disk at every checkpoint, "
                                            "then it flushes the write-ahead log so that recovery can start there.")
    assert p.method == "fuzzy" and LONG.text[p.start:p.end].startswith("The checkpointer")
    assert LONG.text[p.start:p.end].endswith("start from there.")


def test_offsets_checked_against_the_text():
    assert (place(document="d/one.html", start=6, end=11).method) == "offsets"
    assert place(document="d/one.html", start=6, end=11, text="beta.").method == "offsets"
    wrong = place(document="d/one.html", start=0, end=5, text="beta.")  # the text wins over bad offsets
    assert (wrong.method, wrong.start, wrong.end) == ("exact", 6, 11) and "disagree" in wrong.note
    with pytest.raises(ExternalResultError, match=r"offsets 0..99 are outside document 'd/one.html' \(0..42\)"):
        place(document="d/one.html", start=0, end=99)


def test_unknown_document_failed_and_a_file_path_for_a_document():
    assert place(document="nowhere.html", text="beta.").method == "unknown_document"
    assert place(document="d/one.html", text="omega psi").method == "failed"
    assert place(document="/home/me/corpus/one.md", text="beta.").method == "exact"  # the file name, unique


def test_readers_of_mappings_objects_and_bad_answers():
    assert read_passage({"doc_id": "a", "start": 1, "end": 3, "score": "0.5", "id": 7}, "w") == \
        Passage("a", 1, 3, None, 0.5, "7")
    assert read_result({"results": [{"source_uri": "a", "text": "t"}]}, 5, "w") == [Passage("a", text="t")]
    for bad, msg in [({"text": "t"}, "names no document"), ({"doc_id": "a"}, "neither start/end offsets nor text"),
                     ({"doc_id": "a", "start": 1}, "give both start and end"),
                     ({"doc_id": "a", "start": True, "end": 3}, "integer character offset"),
                     ({"doc_id": "a", "text": "t", "score": float("nan")}, "score is NaN"), ("text", "a passage must be")]:
        with pytest.raises(ExternalResultError, match=msg):
            read_passage(bad, "w")
    with pytest.raises(ExternalResultError, match="2 passages returned for k=1"):
        read_result([{"doc_id": "a", "text": "t"}] * 2, 1, "w")


def test_langchain_documents_as_they_come():
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document as LCDocument

    p = read_passage(LCDocument(page_content="beta.", metadata={"source": "d/one.html", "start_index": 6}), "w")
    assert p == Passage("d/one.html", 6, 11, "beta.", None, None)
    assert PLACER.place(p, "w").method == "offsets"


def test_llamaindex_nodes_with_score_as_they_come():
    pytest.importorskip("llama_index.core")
    from llama_index.core.schema import NodeWithScore, TextNode

    node = TextNode(text="beta.", metadata={"source_uri": "d/one.html"}, start_char_idx=6, end_char_idx=11,
                    id_="n1")
    p = read_passage(NodeWithScore(node=node, score=2.5), "w")
    assert p == Passage("d/one.html", 6, 11, "beta.", 2.5, "n1")
