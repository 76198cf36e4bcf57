"""The grade maps of the benchmark importers (:mod:`.benchmark`: the table there): a qrels grade
to a trec_eval gain to a golden grade. A module of its own so that ``rag-exp``'s parser (the
``--grade-map`` choices and help of import-beir / import-trec) reads them without importing the
importers (the golden-set builder, the corpus loader and converter: 0.1-0.4 s of every command's
start, measured with ``python -X importtime``; issue 44, item 8)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..errors import GoldenSetError


# -- grades -----------------------------------------------------------------------------------
def _cleverdon(grade: int, where: str) -> int | None:
    if grade in (-1, 5):
        return None  # "references of no interest"
    if 1 <= grade <= 4:
        return 5 - grade
    raise GoldenSetError(f"{where}: grade {grade} is not on the Cleverdon scale (1..4 relevant, -1 or 5 no interest)",
                         hint="pass --grade-map raw (grade = gain) or --grade-map binary")


def _raw(grade: int, where: str) -> int | None:
    return grade if grade > 0 else None


def _binary(grade: int, where: str) -> int | None:
    return 1 if grade > 0 else None


@dataclass(frozen=True)
class GradeMap:
    name: str
    to_gain: Callable[[int, str], "int | None"] = field(repr=False)
    high: int  # gain >= high -> golden grade 2, else 1
    rule: str

    def gain(self, grade: int, where: str) -> int | None:
        """The trec_eval gain of a qrels grade, or None when the line is dropped."""
        return self.to_gain(grade, where)

    def golden_grade(self, gain: int) -> int:
        return 2 if gain >= self.high else 1


GRADE_MAPS: dict[str, GradeMap] = {
    "cleverdon": GradeMap("cleverdon", _cleverdon, 3,
                          "gain = 5 - grade for grades 1..4, -1/5 dropped; golden 2 if gain >= 3 else 1"),
    "raw": GradeMap("raw", _raw, 2, "gain = grade, grades <= 0 dropped; golden 2 if gain >= 2 else 1"),
    "binary": GradeMap("binary", _binary, 1, "gain = 1 for grades > 0, others dropped; golden 2"),
}


def grade_map(name: str) -> GradeMap:
    try:
        return GRADE_MAPS[name]
    except KeyError:
        raise GoldenSetError(f"unknown grade map {name!r}; choose one of {', '.join(GRADE_MAPS)}") from None
