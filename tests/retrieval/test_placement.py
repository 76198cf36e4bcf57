"""Placing passages in the corpus text: hand-worked offsets for each method, and the readers of
what real LangChain and LlamaIndex objects look like (the libraries themselves, not look-alikes)."""

from __future__ import annotations

import pytest

from rag_experiments.retrieval.passages import ExternalResultError, Passage, read_passage, read_result
from rag_experiments.retrieval.placement import Placer, strip_header
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
    assert (wrong.method, wrong.start, wrong.end) == ("exact", 6, 11) and "another text there" in wrong.note


def test_offsets_outside_the_document_fail_that_passage_never_the_run():
    # before: ExternalResultError, which ended the whole run at the first such passage
    out = place(document="d/one.html", start=0, end=99)
    assert out.method == "failed"
    assert out.note == "offsets 0..99 of 'd/one.html' do not fit (text: outside the document (0..42))"
    by_text = place(document="d/one.html", start=40, end=99, text="beta.")  # the text still places it
    assert (by_text.method, by_text.start, by_text.end) == ("exact", 6, 11) and "outside the document" in by_text.note
    assert place(document="d/one.html", start=5, end=5).method == "failed"  # no span


# a document loaded from a file with front matter: its text starts at raw char 40
FRONT = "---\nsource_uri: d/fm.html\ntitle: FM\n---\n"
FM = Document("d/fm.html", "d/fm.html", "FM", "misc", "# FM\n\nFirst line.\n\nSecond line here.\n", "t",
              text_offset=len(FRONT))
RAW = FRONT + FM.text


@pytest.mark.parametrize("mode", ["auto", "raw", "text"])
def test_raw_offsets_are_detected_by_the_text_or_declared(mode):
    placer = Placer([FM], offsets=mode)
    i = RAW.index("Second")
    raw = placer.place(Passage("d/fm.html", i, i + 17, "Second line here."))  # as LangChain/LlamaIndex count
    assert (raw.start, raw.end) == (FM.text.index("Second"), FM.text.index("Second") + 17)
    assert raw.method == ("exact" if mode == "text" else "offsets")  # told "text": placed by its text, noted
    j = FM.text.index("First")
    text = placer.place(Passage("d/fm.html", j, j + 11, "First line."))
    assert (text.start, text.end) == (j, j + 11) and text.method == ("exact" if mode == "raw" else "offsets")
    # no text to check them by: text takes them as text offsets, raw as raw ones, auto as the only
    # frame they fit (past the text's end as text offsets: raw; issue 55, tests/retrieval/test_placement_frames.py)
    bare = placer.place(Passage("d/fm.html", i, i + 17))
    if mode in ("raw", "auto"):
        assert (bare.method, FM.text[bare.start:bare.end]) == ("offsets", "Second line here.")
    else:
        assert bare.method == "failed" and "outside the document (0..37)" in bare.note


def test_a_raw_passage_starting_in_the_front_matter_is_placed_from_the_text_start():
    first = RAW[:RAW.index("First") + 11]  # LangChain's first chunk of the file: front matter + text
    p = Placer([FM]).place(Passage("d/fm.html", 0, len(first), first))
    assert (p.method, p.start, p.end) == ("offsets", 0, FM.text.index("First") + 11)
    assert "starts in the front matter" in p.note
    inside = Placer([FM], offsets="raw").place(Passage("d/fm.html", 4, 20))
    assert inside.method == "failed" and "inside the front matter (0..40)" in inside.note


LLAMA_HEADER = ("file_path: /data/corpus/one.md\nfile_name: one.md\nfile_type: text/markdown\nfile_size: 44\n"
                "creation_date: 2026-12-04\nlast_modified_date: 2026-12-04\n\n")


def test_a_metadata_header_of_any_length_is_stripped():
    # six metadata lines (LlamaIndex's get_content(metadata_mode="all")): before, only 3 leading
    # lines were dropped, the fuzzy matcher failed too, and the passage was a silent miss
    p = place(document="d/one.html", text=LLAMA_HEADER + "**Gamma**   delta `x_y`.")
    assert (p.method, p.start, p.end, p.note) == ("exact", 13, 37, "7 metadata/header line(s) dropped")
    fm = place(document="d/one.html", text="---\nsource_uri: d/one.html\ntags:\n  - a\ntitle: One\n---\nAlpha beta.")
    assert (fm.method, fm.start, fm.end) == ("exact", 0, 11)
    reflowed = place(document="d/one.html", text=LLAMA_HEADER + "gamma delta x_y.")
    assert (reflowed.method, reflowed.start, reflowed.end) == ("normalised", 15, 37)
    with_offsets = place(document="d/one.html", start=13, end=37, text=LLAMA_HEADER + "**Gamma**   delta `x_y`.")
    assert (with_offsets.method, with_offsets.start, with_offsets.end) == ("offsets", 13, 37)


def test_a_document_line_that_looks_like_metadata_is_kept():
    doc = Document("d/ex.html", "d/ex.html", "Ex", "misc", "Intro.\n\nExample: to keep logs, rotate.\n\nMore.", "t")
    p = Placer([doc]).place(Passage("d/ex.html", text=LLAMA_HEADER + "Example: to keep logs, rotate.\n\nMore."), "w")
    assert doc.text[p.start:p.end] == "Example: to keep logs, rotate.\n\nMore."  # not cut after "Example:"


@pytest.mark.parametrize("text, cuts", [
    (LLAMA_HEADER + "body", [1, 2, 3, 4, 5, 7]),
    ("---\na: 1\nb:\n  - x\n---\n\n# T\nbody", [6]),
    ("---\na: 1\n---\nk: v\n\nbody", [3, 5]),  # front matter, then metadata lines
    ("Note: one.\nbody", [1]),
    ("body\nk: v", []), ("http://example.com/x\nbody", []), ("12:30 meeting\nbody", []), ("Examples:\n\nbody", []),
    ("---\nnot yaml at all\n---\nbody", []),  # a horizontal rule, not front matter
    ("k: v\nk2: v2", [1]),  # nothing but metadata: no cut leaves no text
])
def test_strip_header_cuts(text, cuts):
    assert strip_header(text) == cuts


def test_fuzzy_search_is_bounded_by_work_and_unchanged_without_a_bound():
    from rag_experiments.golden.fuzzy import DocIndex, locate

    quote = ("The checkpointer writes all dirty pages to disk at every checkpoint, then it flushes the "
             "write-ahead log so that recovery can start there.")
    index = DocIndex(LONG.text)
    free = locate(index, quote, 0, quote, 0.85)
    assert free == locate(index, quote, 0, quote, 0.85, None) and free.status == "fuzzy"
    assert locate(index, quote, None, quote, 0.85, 10_000_000).start == free.start  # enough budget: same window
    bounded = locate(index, quote, None, quote, 0.85, 500)
    assert bounded.status == "none" and "work bound (500 token comparisons)" in bounded.note


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
