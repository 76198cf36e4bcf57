"""Identifiers a person names (issue 44 transcript, "found, not fixed" 3): names in capitals
(HISTSIZE, REPORTTIME) were not found, so `golden add --kind exact` refused them without
--identifier, and the ones found were recorded lower-cased ('auto_cd' for AUTO_CD). The index
keys (extract_identifiers: the keyword leg's matching) stay as they were."""

from __future__ import annotations

import pytest

from rag_experiments.golden import add
from rag_experiments.identifiers import extract_identifiers, find_identifiers, written_in


@pytest.mark.parametrize("question, expected", [
    ("What does HISTSIZE control?", ["HISTSIZE"]),
    ("What is REPORTTIME for?", ["REPORTTIME"]),
    ("What does ORIG_HEAD point to after a reset?", ["ORIG_HEAD"]),
    ("What does push.autoSetupRemote do?", ["push.autoSetupRemote"]),
    ("When should I use git rebase --autosquash?", ["--autosquash"]),
    ("What does the AUTO_CD option do?", ["AUTO_CD"]),
    ("what is SQLSTATE 42P01", ["42P01", "SQLSTATE"]),  # the index shapes first
    ("set PATH, then Path again", ["PATH"]),  # distinct ignoring case, as first written
    ("is upsert part of standard SQL, or JSON?", ["JSON"]),  # SQL: an acronym (under 4 characters)
    ("does it apply to SELECT FOR UPDATE without NOWAIT?", ["SELECT", "UPDATE", "NOWAIT"]),
    ("read pg_hba.conf; raise work_mem, e.g. to 64MB", ["pg_hba.conf", "work_mem"]),
])
def test_find_identifiers_as_written(question, expected):
    assert find_identifiers(question) == expected


def test_index_keys_unchanged():
    # the keyword leg's keys: the same shapes, lower-cased; no capitals-only or camelCase names
    assert extract_identifiers("HISTSIZE ORIG_HEAD push.autoSetupRemote --autosquash SELECT 42P01") == [
        "orig_head", "--autosquash", "42p01"]


def test_written_in():
    assert written_in("HISTSIZE", "The `HISTSIZE` parameter")
    assert not written_in("PATH", "the path to the file")  # capitals: a name, not the word
    assert not written_in("HIST", "HISTSIZE")  # a whole token
    assert written_in("push.autoSetupRemote", "**push.autosetupremote**")
    assert not written_in("--autosquash", "--autosquashed")


ZSH = ("# Parameters\n\n`HISTSIZE` <S>\n\nThe maximum number of events stored in the internal history list.\n\n"
       "`REPORTTIME`\n\nIf nonnegative, commands whose combined user and system execution times are greater "
       "than this value have timing statistics printed for them.\n\nThe path of the history file.\n\n"
       "# Options\n\n**AUTO_CD** (-J)\n\nIf a command is the name of a directory, perform the `cd` command.\n\n"
       "git sets `ORIG\\_HEAD` before a reset; **push.autoSetupRemote** sets up the upstream; "
       "`--autosquash` moves fixups.\n")
DOC = {"doc_id": "Parameters.html", "source_uri": "Parameters.html", "doc_type": "doc", "text": ZSH,
       "content_hash": "h"}


@pytest.mark.parametrize("question, quote, identifier", [
    ("What does HISTSIZE control?", "The maximum number of events", "HISTSIZE"),
    ("What is REPORTTIME for?", "timing statistics printed", "REPORTTIME"),
    ("What does the AUTO_CD option do?", "perform the `cd` command", "AUTO_CD"),
    ("What is ORIG_HEAD?", "before a reset", "ORIG_HEAD"),
    ("What does push.autoSetupRemote do?", "sets up the upstream", "push.autoSetupRemote"),
    ("What does --autosquash do?", "moves fixups", "--autosquash"),
])
def test_exact_cases_record_the_identifier_as_written(question, quote, identifier):
    rec = add.production_case(question, source_uri="Parameters.html", quote=quote, kind="exact",
                              doc_lookup=lambda uri: DOC).record
    assert rec["identifier"] == identifier


def test_a_name_in_capitals_must_be_in_capitals_in_the_document():
    with pytest.raises(add.UserError, match=r"names no identifier that the evidence's document holds \(PATH"):
        add.production_case("What does PATH do?", source_uri="Parameters.html", quote="The path of the history",
                            kind="exact", doc_lookup=lambda uri: DOC)


@pytest.mark.parametrize("question, expected", [
    ("Wie setze ich größe_max höher?", ["größe_max"]),
    ("Was bewirkt GRÖSSE_MAX in der Datei?", ["GRÖSSE_MAX"]),
    ("Wozu dient die Einstellung größe.maxWert?", ["größe.maxWert"]),
    ("Как изменить ПЕРЕМЕННАЯ_ОКРУЖЕНИЯ?", ["ПЕРЕМЕННАЯ_ОКРУЖЕНИЯ"]),
    ("Что делает push.autoSetupRemote и HISTSIZE?", ["push.autoSetupRemote", "HISTSIZE"]),
])
def test_identifiers_in_any_script_are_found_as_written(question, expected):
    """A question in German or Russian names identifiers with non-ASCII letters; before, only ASCII
    shapes were found and `golden add --kind exact` asked for --identifier."""
    assert find_identifiers(question) == expected
