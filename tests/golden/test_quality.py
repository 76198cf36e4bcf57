"""The golden set's quality report: hand-worked overlaps, duplicates and coverage, and the
demo's numbers (paraphrase 0.33, exact 0.64)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from rag_experiments.golden.quality import content_words, overlap, quality_report


def case(cid, query, quote, kind="paraphrase", doc="d1", doc_type="config"):
    span = NS(quote=quote, doc_id=doc)
    return NS(case_id=cid, query=query, kind=kind, doc_type=doc_type, relevant=(NS(ref=f"{cid}#0", span=span),))


def test_content_words_and_overlap_by_hand():
    assert content_words("What is the default of work_mem?") == {"default", "work_mem"}
    # question content words: sets, memory, sort -> 2 of 3 in the passage ("memory", "sort")
    assert overlap("What sets the memory of a sort?", "Memory used by a sort operation") == pytest.approx(2 / 3)
    assert overlap("what is it?", "anything") is None  # no content word: no overlap to measure


def test_report_warns_on_copied_paraphrases_duplicates_and_uncovered_types():
    cases = [case("c1", "memory used by sort operations", "Memory used by sort operations before spilling"),
             case("c2", "sort operations memory used", "Memory used by sort operations"),  # c1's words again
             case("c3", "What is work_mem?", "work_mem sets the memory", kind="exact")]
    docs = [NS(doc_type="config"), NS(doc_type="tutorial")]
    r = quality_report(cases, docs)
    assert r.overlap_by_kind == {"exact": 1.0, "paraphrase": 1.0}
    assert r.near_duplicates == [("c1", "c2", 1.0)]
    assert any("paraphrase questions copy their passage" in w for w in r.warnings)
    assert any("near-duplicate" in w for w in r.warnings)
    assert any("no case: tutorial" in w for w in r.warnings)
    assert r.max_cases_per_doc == 3


def test_the_demo_golden_set():
    from pathlib import Path

    from rag_experiments.corpus.loader import DEMO, load_corpus
    from rag_experiments.golden.resolve import load_golden

    demo = Path(__file__).resolve().parents[2] / "experiments" / "golden" / "demo.jsonl"
    r = quality_report(load_golden(demo).scorable, load_corpus(DEMO, "demo"))
    assert r.overlap_by_kind == {"exact": 0.642, "paraphrase": 0.33}
    assert not r.near_duplicates and not any("paraphrase" in w for w in r.warnings)


def test_near_duplicates_equal_the_all_pairs_comparison():
    """The prefix-filtered search finds exactly the pairs (and order, and Jaccard) comparing all
    pairs finds, on random word sets built to hold many near-duplicates and exact thresholds."""
    import random
    from itertools import combinations

    from rag_experiments.golden.quality import DUPLICATE_JACCARD, near_duplicates

    rng = random.Random(5)
    vocab = [f"w{i}" for i in range(60)]
    for trial in range(40):
        base = [set(rng.sample(vocab, rng.randint(1, 9))) for _ in range(25)]
        words = []
        for n in range(120):
            s = set(rng.choice(base))
            for _ in range(rng.randint(0, 2)):  # a near copy: a word swapped, added or dropped
                op = rng.random()
                if op < 0.4 and s:
                    s.discard(rng.choice(sorted(s)))
                elif op < 0.8:
                    s.add(rng.choice(vocab))
            words.append((f"c{n}", s if rng.random() > 0.05 else set()))
        for t in (DUPLICATE_JACCARD, 0.5, 2 / 3, 1.0):
            expect = [(a, b, round(len(wa & wb) / len(wa | wb), 3)) for (a, wa), (b, wb) in combinations(words, 2)
                      if wa and wb and len(wa & wb) / len(wa | wb) >= t]
            assert near_duplicates(words, t) == expect, (trial, t)
