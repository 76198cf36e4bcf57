"""Text compared through whitespace, Markdown markup and case, with offsets back to the original.

The one normalisation every "does this passage occur in the document" question uses: a team's
passages placed in the corpus (:mod:`rag_experiments.retrieval.placement`, method ``normalised``)
and a quote a person types for ``rag-exp golden add`` (:mod:`.add`) or looks up with ``rag-exp
corpus show --grep``. Runs of whitespace become one space, Markdown markup characters
(:data:`MARKUP`: ``* ` # > | _ \\``) are dropped, letters are lower-cased. So ``ORIG_HEAD`` as a rendered
page shows it matches the converted text's backticked `` `ORIG_HEAD` ``, and ``--force`` its ``**--force**``.
"""

from __future__ import annotations

MARKUP = frozenset("*`#>|_\\")


def normalised(text: str) -> tuple[str, list[int]]:
    """The normalised text and, for each of its characters, the index of the original character."""
    out: list[str] = []
    where: list[int] = []
    space = True  # drop leading whitespace
    for i, c in enumerate(text):
        if c in MARKUP:
            continue
        if c.isspace():
            if not space:
                out.append(" ")
                where.append(i)
            space = True
            continue
        low = c.lower()
        out.append(low if len(low) == 1 else c)
        where.append(i)
        space = False
    if out and out[-1] == " ":
        out.pop()
        where.pop()
    return "".join(out), where


_DROP = {ord(c): None for c in MARKUP}


def rough(text: str) -> str:
    """A cheap superset filter for :func:`find_normalised`: the text without markup, lower-cased
    (whitespace kept). Every word of a normalised match is a substring of it, so a document whose
    ``rough`` text lacks the quote's longest word cannot hold the quote."""
    return text.translate(_DROP).lower()


def find_normalised(text: str, quote: str, norm: tuple[str, list[int]] | None = None) -> list[tuple[int, int]]:
    """Every non-overlapping ``(start, end)`` of ``text`` that equals ``quote`` once both are
    normalised; the span runs from the first to the last matched character of the original text
    (markup around the match stays outside it). ``norm``: ``normalised(text)``, when known."""
    q = normalised(quote)[0]
    if not q:
        return []
    n, where = norm or normalised(text)
    spans = []
    j = n.find(q)
    while j >= 0:
        spans.append((where[j], where[j + len(q) - 1] + 1))
        j = n.find(q, j + len(q))
    return spans
