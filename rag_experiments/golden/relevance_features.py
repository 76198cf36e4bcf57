"""What predicts, without an LLM, that an unjudged pool passage is relevant: the features of the
confident stopping rule's relevance model (:mod:`.relevance_logit`, used by :mod:`.decide_stop`).

* **overlap**: the share of the question's terms that the passage contains. Terms are words of two
  or more letters or digits, lower-cased, English stop words out, crudely stemmed (a few suffixes
  stripped, so "indexes" and "index" meet): a passage that answers a question usually repeats its
  words, and the pool holds both runs' passages, including the dense run's that share none.

Tried and left out: 1 when the passage's document holds a relevant passage of the same question (its
evidence or a verdict YES / PART so far; with a stem that also cut a final "e"): on the demo's six
recall@5 pairs it took 2,275 labels against 2,173 with the overlap alone (vector vs keyword 670 against
585, vector vs hybrid_rerank 176 against 148; the other four within 11). The bundled embedding model's cosine
of question and passage was not tried: embedding a pool (Cranfield's pairs: about 3,000 passages) at
the int8 MiniLM's ~2,000 tokens/s of a 2-core machine costs minutes before the first offer.

The model learns the slope from the judged pool passages; a feature that did not predict relevance
gets a slope near 0 and changes nothing. Both the real loop (``golden label --decide``) and the
replay (``tools/label_replay.py``) reach these features through one path: the tracker's
``queries`` (:func:`case_queries` of the golden set) and the passage texts it already reads.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, Mapping

WORD = re.compile(r"[^\W_]{2,}")
STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
how i if in into is it its itself just me more most my no nor not now of off on once only or other our ours
out over own same she should so some such than that the their theirs them then there these they this those
through to too under until up very was we were what when where which while who whom why will with would you
your yours use used using get set way also may must shall one two etc
""".split())
SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "es", "ed", "ly", "s")
FEATURES = ("overlap",)  # the names, in the order of :func:`features`


def stem(word: str) -> str:
    """A crude English stem: the first of SUFFIXES that leaves three or more letters is cut off."""
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


@lru_cache(maxsize=131072)  # the loop reads the same passages again after every verdict
def terms(text: str) -> frozenset[str]:
    """The text's stemmed terms, stop words out."""
    return frozenset(stem(w) for w in WORD.findall(text.lower()) if w not in STOP_WORDS)


def overlap(query: str, text: str) -> float:
    """The share of the query's terms found in the text (0 when the query has none)."""
    q = terms(query)
    return len(q & terms(text)) / len(q) if q else 0.0


def features(query: str | None, text: str) -> tuple[float, ...]:
    """The passage's features for its question (FEATURES' order); () when the question is unknown."""
    if query is None:
        return ()
    return (overlap(query, text),)


def case_queries(cases: Iterable) -> Mapping[str, str]:
    """case id -> its question: what the tracker needs to compute the features (the golden set's cases;
    the one path of golden label --decide and the replay)."""
    return {c.case_id: c.query for c in cases}
