"""Placement (issue 55, item 3): bare offsets in ``auto`` mode into a document with front matter are
read in the frame the document allows, or refused in one line; a repeated text is placed at the
occurrence nearest the passage's offsets, or is ``ambiguous`` without them; a byte order mark does
not hide a passage's front matter."""

from __future__ import annotations

import pytest

from rag_experiments.retrieval.passages import ExternalResultError, Passage
from rag_experiments.retrieval.placement import METHODS, PLACED, AmbiguousOffsets, Placer, strip_header
from rag_experiments.types import Document

FRONT = "---\nsource_uri: d/fm.html\ntitle: Frames\n---\n"  # 43 characters
BODY = ("# Frames\n\nThe planner estimates the cost of each plan. The executor runs the cheapest plan it "
        "was given.\n\nVacuum reclaims storage occupied by dead tuples.\n")
DOC = Document("d/fm.html", "d/fm.html", "Frames", "misc", BODY, "t", text_offset=len(FRONT))
RAW = FRONT + BODY


def _raw_span(words: str) -> tuple[int, int]:
    i = RAW.index(words)
    return i, i + len(words)


def test_bare_raw_offsets_past_the_text_end_are_read_as_raw_and_later_ones_follow():
    placer = Placer([DOC])
    s, e = _raw_span("Vacuum reclaims storage occupied by dead tuples.")
    assert e > len(BODY)  # as text offsets: past the end (before: 'failed', counted as unplaced)
    p = placer.place(Passage("d/fm.html", s, e))
    assert (p.method, BODY[p.start:p.end]) == ("offsets", "Vacuum reclaims storage occupied by dead tuples.")
    assert "raw frame (as text offsets it runs past the text's end" in p.note
    # a later passage that would fit both frames is read as the system showed: raw
    s, e = _raw_span("The planner estimates")
    later = placer.place(Passage("d/fm.html", s, e))
    assert BODY[later.start:later.end] == "The planner estimates" and "an earlier passage fits no other" in later.note


def test_bare_raw_offsets_are_told_from_text_offsets_by_the_words_they_cut():
    s, e = _raw_span("The executor runs the cheapest plan")
    p = Placer([DOC]).place(Passage("d/fm.html", s, e))  # before: read as text offsets, a few words off
    assert BODY[p.start:p.end] == "The executor runs the cheapest plan"
    assert "raw frame (its span cuts no word, the other's does)" in p.note
    i = BODY.index("The planner estimates")
    t = Placer([DOC]).place(Passage("d/fm.html", i, i + len("The planner estimates")))
    assert BODY[t.start:t.end] == "The planner estimates" and "text frame" in t.note


def test_bare_offsets_ending_in_the_front_matter_are_text_offsets():
    p = Placer([DOC]).place(Passage("d/fm.html", 0, 8))
    assert (p.method, BODY[p.start:p.end]) == ("offsets", "# Frames")
    assert "as raw offsets it lies in the front matter" in p.note


def test_bare_offsets_that_fit_both_frames_alike_are_refused_in_one_line():
    body = "abc " * 40  # every 4th char a space, front matter of 44: both frames cut at the same edges
    doc = Document("d/x.md", "d/x.md", "X", "misc", body, "t", text_offset=44)
    with pytest.raises(AmbiguousOffsets) as err:
        Placer([doc]).place(Passage("d/x.md", 48, 59), "my-system, query #1 'q', passage 1")
    assert isinstance(err.value, ExternalResultError)
    msg = str(err.value)
    assert msg.startswith("my-system, query #1 'q', passage 1: offsets 48..59 into 'd/x.md' come without text")
    assert "retrieval.external.offsets=raw" in msg and "offsets=text" in msg
    # declared: no question asked
    assert Placer([doc], offsets="raw").place(Passage("d/x.md", 48, 59)).method == "offsets"
    assert Placer([doc], offsets="text").place(Passage("d/x.md", 48, 59)).method == "offsets"


def test_a_repeated_text_without_offsets_is_ambiguous_and_listed():
    doc = Document("d/r.md", "d/r.md", "R", "misc", "Note: see below.\n\nBody.\n\nNote: see below.\n", "t")
    p = Placer([doc]).place(Passage("d/r.md", text="Note: see below."))
    assert p.method == "ambiguous" and p.method in METHODS and p.method not in PLACED
    assert "the text occurs 2 times (0..16, 25..41)" in p.note  # before: 'exact' at the first occurrence
    once = Placer([doc]).place(Passage("d/r.md", text="Body."))
    assert (once.method, once.start) == ("exact", 18)


def test_a_repeated_text_is_placed_at_the_occurrence_nearest_its_offsets():
    doc = Document("d/r.md", "d/r.md", "R", "misc", "Note: see below.\n\nBody.\n\nNote: see below.\n", "t")
    # offsets that do not hold the text (the system's own frame is off by two), near the second one
    p = Placer([doc]).place(Passage("d/r.md", 27, 43, "Note: see below."))
    assert (p.method, p.start, p.end) == ("exact", 25, 41)  # before: 0..16
    assert "placed at the one nearest the offsets (25..41)" in p.note
    # the same through the normalisation (markup and case)
    n = Placer([doc]).place(Passage("d/r.md", 27, 43, "NOTE: see *below*."))
    assert (n.method, n.start, n.end) == ("normalised", 25, 41)
    amb = Placer([doc]).place(Passage("d/r.md", text="NOTE: see *below*."))
    assert amb.method == "ambiguous"


def test_a_passage_read_with_a_byte_order_mark_loses_its_front_matter():
    text = "\ufeff" + FRONT + "The planner estimates the cost of each plan."
    assert strip_header(text)  # before: [] (the BOM hid the '---' line)
    p = Placer([DOC]).place(Passage("d/fm.html", text=text))
    assert (p.method, BODY[p.start:p.end]) == ("exact", "The planner estimates the cost of each plan.")
