"""Cases that need more than one passage, written by hand (``rag-exp golden add --kind multi``).

A ``multi`` case has evidence groups with all-of semantics (see :mod:`.records`): the question needs
a passage of *every* group. By hand each group is one passage, given like ``golden add`` takes one
(a document and a quote, located by :func:`.add.locate_unique`'s rules): the first with
``--source-uri``/``--quote``, each further one with ``--group DOC QUOTE``. Evidence ``i`` is group
``i``. Two groups quoting the same passage, or one group only, are refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..errors import GoldenSetError, UserError
from ..types import Document
from .add import AddResult, production_case
from .golden_file import GoldenFile
from .records import new_id

KIND = "multi"


def multi_case(query: str, passages: Sequence[tuple[str, str]], *, docs: Sequence[Document],
               corpus: str | None = None, author: str | None = None, note: str | None = None,
               method: str = "human", grade: int = 2) -> tuple[dict, list[str]]:
    """Build (not append) a ``multi`` case: one evidence group per ``(source uri, quote)`` of
    ``passages``, in order. Returns the record and how each quote was located."""
    if len(passages) < 2:
        raise UserError(f"--kind multi needs at least two passages (--source-uri/--quote and one --group DOC QUOTE "
                        f"per further passage), got {len(passages)}")
    evidence, located, keys = [], [], []
    provenance: dict = {}
    doc_type = None
    for i, (source_uri, quote) in enumerate(passages):
        where = "--source-uri/--quote" if i == 0 else f"--group {i}"
        try:
            one = production_case(query, source_uri=source_uri, quote=quote, docs=docs, corpus=corpus,
                                  author=author, note=note, grade=grade, kind="paraphrase", method=method)
        except UserError as exc:  # the same error, naming which passage it is about
            exc.message = f"{where}: {exc.message}"
            exc.args = (exc.message if exc.hint is None else f"{exc.message}\n  hint: {exc.hint}",)
            raise
        ev = one.record["evidence"][0]
        key = (ev["doc_id"], ev["start"], ev["end"])
        for j, other in enumerate(keys):
            if other[0] == key[0] and other[1] < key[2] and key[1] < other[2]:
                raise UserError(f"{where}: the passage {ev['source_uri']} chars {key[1]}..{key[2]} overlaps the "
                                f"passage of group {j} ({other[1]}..{other[2]})",
                                hint="each group is a different part of the answer: quote another passage")
        keys.append(key)
        evidence.append({**ev, "group": i})
        located.append(one.located)
        provenance = one.record["provenance"]
        doc_type = doc_type or one.record["doc_type"]
    record = {"type": "case", "id": new_id("c", query, *[k for key in keys for k in key]), "query": " ".join(query.split()),
              "kind": KIND, "doc_type": doc_type, "evidence": evidence, "provenance": provenance}
    return record, located


def add_multi_case(golden_path: str | Path, query: str, passages: Sequence[tuple[str, str]], **kwargs) -> AddResult:
    """Build a ``multi`` case (:func:`multi_case`) and append it; ``located`` joins each quote's mode."""
    record, located = multi_case(query, passages, **kwargs)
    golden = GoldenFile(golden_path)
    if golden.exists() and any(r.id == record["id"] for r in golden.read_records()):
        raise GoldenSetError(f"{golden.path}: this case (same query and evidence) is already there: {record['id']}")
    written, = golden.append([record])
    return AddResult(written, ",".join(located))
