"""Which PostgreSQL 15 manual pages make up the shipped demo corpus, and how to rebuild it.

Regenerate (Debian/Ubuntu: ``apt-get install postgresql-doc-15``)::

    python -m devtools.demo_selection \\
        /usr/share/doc/postgresql-doc-15/html rag_experiments/data/demo_corpus

The selection (see :func:`is_demo_page`):

* every page of these families: ``runtime-config*`` (server configuration, plus
  ``config-setting``), ``functions*`` (functions and operators), ``textsearch*`` (full text
  search), ``indexes*`` (indexes), ``tutorial*`` (the tutorial), ``errcodes-appendix``;
* the introduction page of each built-in index access method (``btree-intro`` ...);
* the SQL command reference pages listed in :data:`SQL_COMMANDS`;
* minus chapter pages that hold only a table of contents (:data:`TOC_ONLY_PAGES`).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from rag_experiments.corpus.html_import import ImportReport, html_to_markdown, import_html_dir

SOURCE_PREFIX = "postgresql-15"

PAGE_FAMILIES = ("runtime-config", "functions", "textsearch", "indexes", "tutorial")

EXTRA_PAGES = frozenset(
    {
        "errcodes-appendix",
        "config-setting",
        "btree-intro",
        "gin-intro",
        "gist-intro",
        "spgist-intro",
        "brin-intro",
        "hash-intro",
    }
)

# Chapter pages whose only content is a table of contents (they convert to an empty text).
TOC_ONLY_PAGES = frozenset({"textsearch", "tutorial-advanced", "tutorial-sql", "tutorial-start"})

# sql-<name>.html pages: the commonly used commands.
SQL_COMMANDS = frozenset(
    """
    select selectinto values insert update delete merge truncate copy
    createtable createtableas altertable droptable
    createindex alterindex dropindex reindex
    createview alterview dropview creatematerializedview refreshmaterializedview
    createfunction alterfunction dropfunction createprocedure call do
    createtrigger droptrigger createsequence altersequence
    createschema dropschema createdatabase alterdatabase dropdatabase
    createrole alterrole droprole createuser grant revoke alterdefaultprivileges createpolicy
    createextension alterextension dropextension
    createtype createdomain createstatistics createtablespace
    vacuum analyze explain cluster checkpoint altersystem
    begin commit rollback savepoint rollback-to release-savepoint start-transaction
    set-transaction lock prepare-transaction
    set show reset prepare execute deallocate declare fetch
    listen notify comment
    createtsconfig altertsconfig createtsdictionary
    createpublication createsubscription
    """.split()
)


def is_demo_page(filename: str) -> bool:
    """Whether ``filename`` (e.g. ``"sql-createindex.html"``) belongs to the demo corpus."""
    name = Path(filename).name
    if not name.endswith(".html"):
        return False
    stem = name[: -len(".html")]
    if stem in TOC_ONLY_PAGES:
        return False
    if stem in EXTRA_PAGES:
        return True
    if stem.startswith("sql-"):
        return stem[len("sql-") :] in SQL_COMMANDS
    return any(stem == f or stem.startswith(f + "-") for f in PAGE_FAMILIES)


def _doc_version(src: Path) -> str:
    """``"15.20"`` from the manual's index page title, or ``"15.x"`` if not found."""
    for page in ("index.html", "legalnotice.html"):
        try:
            text = (src / page).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        m = re.search(r"PostgreSQL (15\.\d+) Documentation", text)
        if m:
            return m.group(1)
    return "15.x"


def write_notice(src: Path, dest: Path) -> Path:
    """Write ``dest/NOTICE``: where the pages come from and the PostgreSQL licence text."""
    _title, licence = html_to_markdown((src / "legalnotice.html").read_text(encoding="utf-8"))
    paragraphs = [
        p for p in licence.split("\n\n") if p and not p.startswith("# ") and p != "**Legal Notice**"
    ]
    version = _doc_version(src)
    header = [
        "Demo corpus for rag-experiments",
        "",
        "The Markdown files in this folder are converted from the PostgreSQL 15 documentation",
        f"(PostgreSQL {version}) as shipped by Debian's postgresql-doc-15 15.x package",
        "(HTML pages in /usr/share/doc/postgresql-doc-15/html), by",
        "devtools.demo_selection. The conversion drops navigation and page",
        "layout; the text is otherwise unchanged.",
        "",
        "The PostgreSQL documentation is distributed under the PostgreSQL Licence:",
        "",
        "",
    ]
    notice = dest / "NOTICE"
    notice.write_bytes(("\n".join(header) + "\n\n".join(paragraphs).rstrip("\n") + "\n").encode())
    return notice


def build_demo_corpus(src: Path, dest: Path, progress: bool = True) -> ImportReport:
    """Rebuild the demo corpus in ``dest``: convert the selected pages, drop stale ``.md``
    files, write ``NOTICE``."""
    before = {p.name for p in dest.glob("*.md")} if dest.is_dir() else set()
    report = import_html_dir(
        src, dest, select=is_demo_page, progress=progress, prefix=SOURCE_PREFIX
    )
    written = {Path(f).stem + ".md" for f in _selected_names(src)} - {
        Path(s.filename).stem + ".md" for s in report.skipped
    }
    for stale in sorted(before - written):
        (dest / stale).unlink()
    write_notice(src, dest)
    return report


def _selected_names(src: Path) -> list[str]:
    return sorted(p.name for p in src.glob("*.html") if is_demo_page(p.name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.demo_selection",
        description="Rebuild the demo corpus from the PostgreSQL 15 manual's HTML pages.",
    )
    parser.add_argument("src", type=Path, help="e.g. /usr/share/doc/postgresql-doc-15/html")
    parser.add_argument("dest", type=Path, help="e.g. rag_experiments/data/demo_corpus")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = parser.parse_args(argv)
    from rag_experiments.errors import UserError

    try:
        report = build_demo_corpus(args.src, args.dest, progress=not args.no_progress)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(report.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
