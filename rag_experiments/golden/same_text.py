"""A verdict on a passage is a verdict on its text, wherever that text is (issue 57 item 4).

Documentation repeats itself (an all-in-one page, the HTML and the source of one manual page:
:mod:`rag_experiments.corpus.copies`), so a pool holds the same passage from several documents.
For one question, a passage whose text is the same as a passage already judged for that question
(after normalisation: whitespace, Markdown markup and case, :func:`.normalise.normalised`), or
a token similarity of at least :data:`NEAR_DUPLICATE` with the same identifiers, gets that
verdict, whoever gave it (a person, the LLM judge, an agent): it is never shown to a person or
sent to the judge again. The copy is its own ``judgement`` record (append-only, as every label)
with the original's ``judge`` (so its kind stays the original labeller's: a machine verdict
copied is still a machine verdict for the spot-check), ``applied_from`` (the id of the judgement
whose passage was judged) and ``similarity``.

Both labelling paths use it: the LLM judge (:func:`.label.plan_labelling`) and labelling by hand,
terminal or CSV, by a person or an agent (:func:`.hand_label.plan_hand_labelling`).
"""

from __future__ import annotations

from typing import Any, Sequence

from .fuzzy import guard_tokens, similarity
from .normalise import normalised
from .records import new_id
from .resolve import current

NEAR_DUPLICATE = 0.95  # token similarity at or above which two passages of a case are one passage


def _norm(text: str) -> str:
    return normalised(text)[0]


def near_duplicate(a: str, b: str) -> float | None:
    """The similarity of two passages when they count as one passage (1.0: the same text once
    normalised), else None."""
    na, nb = _norm(a), _norm(b)
    if na == nb:
        return 1.0
    la, lb = len(na), len(nb)
    if not la or not lb or min(la, lb) / max(la, lb) < 2 * NEAR_DUPLICATE - 1:  # cannot reach the threshold
        return None
    if guard_tokens(a) != guard_tokens(b):  # another identifier: another passage
        return None
    s = similarity(a, b)
    return round(s, 4) if s >= NEAR_DUPLICATE else None


def verdicts_by_case(records: Sequence) -> dict[str, list[dict]]:
    """case id -> the live judgements (raw records) of live cases, a person's first (resolution
    prefers a person's verdict on a passage to a machine's, so the copy does too)."""
    now = current(records)
    out: dict[str, list[dict]] = {}
    for j in sorted(now.live_judgements, key=lambda j: j.judge_kind != "human"):  # stable: file order within
        if j.case_id not in now.retired:
            out.setdefault(j.case_id, []).append(j.raw)
    return out


def judged_text(text: str, verdicts: Sequence[dict]) -> tuple[dict, float] | None:
    """The first of ``verdicts`` (raw judgement records of one case) whose passage is ``text``,
    with the similarity; None when no verdict covers it."""
    for rec in verdicts:
        sim = near_duplicate(text, rec["span"]["quote"])
        if sim is not None:
            return rec, sim
    return None


def applied_record(original: dict, case_id: str, hit: dict, sim: float, pool: dict | None = None,
                   sample: dict | None = None) -> dict:
    """The verdict of ``original`` (a judgement record) for the same text at ``hit`` (a retrieved
    passage: doc_id, source_uri, start, end, text, doc_hash): the original's judge (its kind kept),
    ``applied_from`` its id, the similarity, and the pool it was found in."""
    rec = {
        "type": "judgement",
        "id": new_id("j", case_id, hit["doc_id"], hit["start"], hit["end"], "applied", original["id"]),
        "case_id": case_id,
        "span": {"doc_id": hit["doc_id"], "source_uri": hit["source_uri"], "start": int(hit["start"]),
                 "end": int(hit["end"]), "quote": hit["text"], "doc_hash": hit["doc_hash"]},
        "verdict": original["verdict"],
        "judge": dict(original["judge"]),
        "applied_from": original["id"],
        "similarity": sim,
        "provenance": {"method": "applied", **({"pool": pool} if pool else {})},
    }
    if "group" in original:
        rec["group"] = original["group"]
    if sample:
        rec["sample"] = dict(sample)
    return rec


def split_same_text(pairs: Sequence[Any], earlier: dict[str, list[dict]], pool: dict | None = None
                    ) -> tuple[list[tuple[Any, list[dict]]], list[dict], dict[str, int]]:
    """For the LLM judge: the pairs (:class:`.label.Pair`) to send, each with the pairs of its case
    that repeat its text (``{hit, similarity, sample}``: sent once, the verdict written for each);
    the records copying an ``earlier`` verdict (:func:`verdicts_by_case`) to pairs whose text has
    one; and the counts (``same_text_already_judged``, ``same_text_sent_once``)."""
    counts = {"same_text_already_judged": 0, "same_text_sent_once": 0}
    applied: list[dict] = []
    sent: list[tuple[Any, list[dict]]] = []
    by_case: dict[str, list[int]] = {}
    for pair in pairs:
        known = judged_text(pair.hit["text"], earlier.get(pair.case_id, ()))
        if known is not None:
            applied.append(applied_record(known[0], pair.case_id, pair.hit, known[1], pool, pair.sample))
            counts["same_text_already_judged"] += 1
            continue
        for idx in by_case.get(pair.case_id, ()):
            sim = near_duplicate(pair.hit["text"], sent[idx][0].hit["text"])
            if sim is not None:
                sent[idx][1].append({"hit": dict(pair.hit), "similarity": sim, "sample": pair.sample})
                counts["same_text_sent_once"] += 1
                break
        else:
            by_case.setdefault(pair.case_id, []).append(len(sent))
            sent.append((pair, []))
    return sent, applied, {k: v for k, v in counts.items() if v}
