"""What every converter of :mod:`.convert` returns (:class:`Converted`) or raises
(:class:`ConversionError`), and the text handling they share: :func:`tidy` (the stored form of
converted text, see :mod:`.convert`), pages joined with their offsets, Markdown headings, the
converter id a corpus manifest records.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version


class ConversionError(Exception):
    """A file this module cannot turn into text; ``reason`` is one short line for the report."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Converted:
    """One converted file: the text and what the converter knew about its structure."""

    text: str
    title: str | None
    converter: str  # "pypdf 7.1.1": the package that read the file, and its version
    pages: tuple[int, ...] = ()  # start offset in ``text`` of page (PDF) / slide (PPTX) 1, 2, ...
    headings: tuple[tuple[int, int, str], ...] = field(default=())  # (offset, level, title)

    def to_json(self) -> dict:
        return {"text": self.text, "title": self.title, "converter": self.converter,
                "pages": list(self.pages), "headings": [list(h) for h in self.headings]}

    @classmethod
    def from_json(cls, d: dict) -> Converted:
        return cls(text=d["text"], title=d["title"], converter=d["converter"], pages=tuple(d["pages"]),
                   headings=tuple((int(o), int(lv), str(t)) for o, lv, t in d["headings"]))


# C0 controls but tab and newline, DEL, C1 controls: never text a reader sees (a PDF's form feed
# or NUL padding). Removed, not replaced: a replacement would be a character no quote holds.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_BLANK_RUN = re.compile(r"\n{3,}")


def tidy(text: str) -> str:
    """The stored form of converted text: see the module docstring. Empty when no text is left."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x0c", "\n")
    text = _CONTROL.sub("", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = _BLANK_RUN.sub("\n\n", text).strip("\n")
    return text + "\n" if text.strip() else ""


def join_parts(parts: list[str]) -> tuple[str, tuple[int, ...]]:
    """Pages (already tidied) joined by one blank line, and the start offset of each. An empty
    page starts where the next text starts, so :meth:`SourceFile.page_at` never lands on it."""
    text, starts = "", []
    for part in parts:
        if part and text:
            text += "\n"  # every tidied part ends with one newline: one more makes a blank line
        starts.append(len(text))
        text += part
    return text, tuple(starts)


_FENCE = re.compile(r"^(`{3,}|~{3,})")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")


def markdown_headings(text: str) -> tuple[tuple[int, int, str], ...]:
    """``(offset, level, title)`` of each ATX heading line outside fenced code blocks."""
    out: list[tuple[int, int, str]] = []
    fence: str | None = None
    offset = 0
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)[0]
            elif line.startswith(fence * 3):
                fence = None
        elif fence is None:
            h = _HEADING.match(line)
            if h:
                out.append((offset, len(h.group(1)), h.group(2)))
        offset += len(line) + 1
    return tuple(out)


def short_reason(exc: BaseException) -> str:
    """An exception as one short line for the report (at most 120 characters)."""
    msg = " ".join(str(exc).split()) or type(exc).__name__
    return msg if len(msg) <= 120 else msg[:117] + "..."


@lru_cache(maxsize=None)
def converter_id(package: str, label: str | None = None) -> str:
    """``"<label or package> <installed version>"``, e.g. ``"pypdf 7.1.1"``: what the corpus
    manifest records for a converted document."""
    try:
        ver = version(package)
    except PackageNotFoundError:
        ver = "unknown"
    return f"{label or package} {ver}"
