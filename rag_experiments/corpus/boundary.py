"""The corpus boundary: a load reads files inside the corpus folder and nothing else.

A corpus folder may hold symbolic links. One that leads outside the folder (``passwd.md ->
/etc/passwd``, a folder ``shared -> /home``) would put a file the team never meant to index into
the chunks table, the ``corpus show`` output and a served model's answers. So:

* a link to a **file** whose target (every link on the way resolved) is inside the corpus folder is
  read (the target's bytes, under the link's name): a team that links one page into two places
  means it; a link whose target is outside is refused, one line naming the link and its target;
* a link to a **folder** is never followed, inside or out (a link to a parent folder would loop,
  one to a sibling would load its documents twice): it is listed, one line naming it and its target;
* a file is opened component by component from the corpus folder with ``O_NOFOLLOW``
  (:func:`read_inside`), so a link swapped in between the check and the read is not followed either;
  ``O_NONBLOCK`` and a regular-file check keep a FIFO or a device named ``x.md`` from blocking the load;
* the size limit is checked on the open file before a byte is read (:data:`MAX_FILE_BYTES`);
* a file name that is not UTF-8 (Python hands it over with surrogate escapes, which no hash,
  PostgreSQL text or terminal line can hold) is refused, the name printed with its bytes escaped.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

# a larger file is refused before it is read: a text corpus with one 200 MB file is almost always a
# scan, a log or a media dump, and loading costs a few times the file in memory (tools/load_memory.py)
MAX_FILE_BYTES = 200 * 1024 * 1024


class Refused(Exception):
    """A file that must not be read; ``reason`` is one short line for the load report."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def printable(name: str) -> str:
    """``name`` with the bytes that are not UTF-8 escaped (``caf\\xe9.md``): safe to print and hash."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def name_problem(rel: str) -> str | None:
    """Why a file's relative path cannot name a document (not UTF-8), or None."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return (f"the file name is not valid UTF-8 ({printable(rel)}); rename it, e.g. "
                "convmv -f latin1 -t utf-8 --notest FILE")
    return None


def _real_root(root: Path) -> Path:
    return Path(os.path.realpath(root))


def link_problem(path: Path, root: Path) -> str | None:
    """Why ``path`` (under ``root``) must not be read because of a symbolic link, or None."""
    real = Path(os.path.realpath(path))
    real_root = _real_root(root)
    if real == real_root or real_root in real.parents:
        return None
    target = os.readlink(path) if path.is_symlink() else str(real)
    return (f"a symbolic link to {printable(target)}, outside the corpus folder: not read "
            "(copy the file into the folder to index it)")


def folder_link_problem(path: Path, root: Path) -> str:
    """The line for a link to a folder: never followed (see the module)."""
    real = Path(os.path.realpath(path))
    real_root = _real_root(root)
    inside = real == real_root or real_root in real.parents
    where = "inside the corpus folder" if inside else "outside the corpus folder"
    return (f"a symbolic link to the folder {printable(os.readlink(path))} ({where}): not followed "
            "(folder links never are; copy or move the documents into the corpus folder)")


def walk(root: Path) -> list[tuple[Path, bool]]:
    """Every file under ``root`` as ``(path, False)`` and every link to a folder as ``(path, True)``,
    sorted by path; folder links are not entered."""
    out: list[tuple[Path, bool]] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        base = Path(folder)
        for d in dirs:
            if os.path.islink(base / d):
                out.append((base / d, True))
        out += [(base / f, False) for f in files]
    return sorted(out, key=lambda x: x[0])


def read_inside(path: Path, root: Path, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of ``path``, a file under ``root``: :class:`Refused` if a link leads out of
    the folder, it is no regular file or it is over ``max_bytes``; OSError as ``open`` raises it."""
    problem = link_problem(path, root)
    if problem:
        raise Refused(problem)
    real_root = _real_root(root)
    parts = Path(os.path.realpath(path)).relative_to(real_root).parts
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(real_root, flags | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:  # each folder opened under the last one, never through a link
            nxt = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        leaf = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=fd)
    finally:
        os.close(fd)
    with os.fdopen(leaf, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise Refused("not a regular file (a FIFO, socket or device named like a document): not read")
        if st.st_size > max_bytes:
            raise Refused(f"{st.st_size / 1e6:,.0f} MB is over the {max_bytes // 2**20} MiB limit for one "
                                "document: not read; split it")
        os.set_blocking(f.fileno(), True)
        data = f.read(max_bytes + 1)  # a file that grew since fstat is still cut at the limit
    if len(data) > max_bytes:
        raise Refused(f"grew past the {max_bytes // 2**20} MiB limit for one document while read; split it")
    return data
