"""Texinfo boilerplate the checks missed (issue 44 transcript, "found, not fixed" 7; zsh-doc: 144
of 186 HTML pages are redirect stubs, 35 carry navigation bars, 726 lines): a redirect stub is
flagged as boilerplate, navigation-bar lines are counted and given as spans. Shapes as the HTML
converter writes them (texi2any 6.8 pages of zsh-doc 5.9)."""

from __future__ import annotations

from rag_experiments.corpus.quality import assess, navigation_spans
from rag_experiments.types import Document

NAV = "| [ << ] | [ < ] | [ Up ] | [ > ] | [ >> ] | | | | | [Top] | [Contents] | [Index] | [ ? ] |"
RULE = "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
PAGE = (f"# User Contributions (zsh)\n\n{NAV}\n{RULE}\n\n# 26 User Contributions\n\n"
        "The Zsh source distribution includes a number of items contributed by the user community. "
        "These are not inherently a part of the shell, and some may not be available in every zsh "
        "installation. The most significant of these are documented here.\n\n"
        "| Option | Meaning |\n| --- | --- |\n| -a | all of them |\n\n"
        f"{NAV}\n{RULE}\n\nNext: [Utilities](Utilities.html), Previous: [Intro](Intro.html), Up: [Top](index.html)\n")


def doc(doc_id: str, text: str) -> Document:
    return Document(doc_id, doc_id, doc_id, "doc", text, corpus="t")


def test_redirect_stub_is_boilerplate():
    stub = doc("Aliasing.html", "# Aliasing (zsh)\n\nThe node you are looking for is at Aliasing.\n")
    moved = doc("old.html", "# Old page\n\nThis page has moved to [the new manual](new/index.html).\n")
    short = doc("Intro.html", "# Intro\n\nZsh is a shell designed for interactive use.\n")
    q = assess([stub, moved, short], dictionary=None).by_id()
    assert q["Aliasing.html"].boilerplate and q["old.html"].boilerplate
    assert q["Aliasing.html"].warnings() == [
        "boilerplate: a redirect stub (its text only points elsewhere: 'The node you are looking for is at Aliasing.')"]
    assert not q["Intro.html"].boilerplate and q["Intro.html"].warnings() == []


def test_a_long_page_mentioning_a_move_is_not_a_stub():
    text = "# Moving\n\n" + "When a file has moved to another folder, git notices the rename. " * 10
    assert assess([doc("mv.html", text)], dictionary=None).docs[0].redirect is None


def test_navigation_lines_are_flagged_with_their_spans():
    spans = navigation_spans(PAGE)
    lines = [PAGE[a:b] for a, b in spans]
    assert lines == [NAV, RULE, NAV, RULE,
                     "Next: [Utilities](Utilities.html), Previous: [Intro](Intro.html), Up: [Top](index.html)"]
    q = assess([doc("User-Contributions.html", PAGE)], dictionary=None).docs[0]
    assert not q.boilerplate and q.navigation == spans and q.boilerplate_spans() == spans
    assert q.warnings() == ["boilerplate lines: 5 navigation-bar lines ([ << ] [ Up ] [Contents] ...; "
                            "DocQuality.boilerplate_spans gives them)"]
    # an ordinary table (its rule too) and prose with brackets are not navigation
    assert "| -a | all of them |" not in lines and "| Option | Meaning |" not in lines
    assert navigation_spans("See [Index] and [Contents] for more.\n[x] done\n") == ()
