"""rag-exp corpus: import HTML or Markdown documentation; show what a corpus folder holds; convert
its PDF, DOCX, PPTX and HTML files (cached) and print the formats table."""

from __future__ import annotations

from collections import Counter
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("corpus", help="import and inspect corpora")
    s = p.add_subparsers(dest="corpus_command", metavar="ACTION")
    imp = s.add_parser(
        "import-html", help="convert a folder of HTML pages (e.g. the PostgreSQL manual) to a Markdown corpus",
        description="Convert every *.html under SRC to Markdown with front matter (source_uri, title, doc_type) "
        "in DEST, keeping headings, code blocks and tables. A folder of Markdown files can be used as a "
        "corpus directly (corpus.path=FOLDER). Example: rag-exp corpus import-html "
        "/usr/share/doc/postgresql-doc-15/html corpora/pg15-full")
    imp.add_argument("src", type=Path, help="folder of .html files")
    imp.add_argument("dest", type=Path, help="output folder for .md files")
    imp.add_argument("--prefix", help="source_uri prefix (default: the source folder's name)")
    imp.set_defaults(func=_import_html)
    st = s.add_parser("stats", help="documents, size and doc types of a corpus folder ('demo' = shipped corpus)")
    st.add_argument("path", nargs="?", default="demo", help="corpus folder ('demo' = shipped corpus)")
    st.set_defaults(func=_stats)
    cv = s.add_parser(
        "convert", help="convert a folder's PDF/DOCX/PPTX/HTML files (cached) and print the formats table",
        description="Load a corpus folder as every run does: Markdown and .txt as they are, PDF (pypdf), DOCX "
        "(mammoth), PPTX (python-pptx) and HTML (the import-html rules) converted, each conversion cached by "
        "file content in .rag-exp/convert-cache (or $RAG_EXP_CONVERT_CACHE), so a re-run converts nothing. "
        "Prints per format: files, documents, characters, seconds, cache hits, failures and the converter; "
        "then each file that could not be loaded, with its reason. Example: rag-exp corpus convert docs/")
    cv.add_argument("path", nargs="?", default="demo", help="corpus folder ('demo' = shipped corpus)")
    cv.add_argument("--strict", action="store_true", help="exit 1 when any file could not be loaded")
    cv.set_defaults(func=_convert)
    p.set_defaults(func=lambda a: (p.print_help(), 1)[1])


def _import_html(args) -> int:
    from ..corpus.html_import import import_html_dir

    report = import_html_dir(args.src, args.dest, prefix=args.prefix)
    print(report.summary())
    return 0


def _stats(args) -> int:
    from ..corpus.loader import corpus_manifest, load_corpus

    docs = load_corpus(args.path)
    size = sum(len(d.text.encode()) for d in docs)
    print(f"{len(docs)} documents, {size / 1e6:.2f} MB of text, corpus digest {corpus_manifest(docs)['digest'][:16]}")
    for t, n in sorted(Counter(d.doc_type for d in docs).items()):
        print(f"  {t:12s} {n}")
    return 0


def _convert(args) -> int:
    import sys

    from ..corpus.loader import corpus_manifest, read_corpus

    loaded = read_corpus(args.path, progress=sys.stderr.isatty())
    report = loaded.report
    print(report.formats_table())
    print(f"\n{len(loaded.docs)} documents, corpus digest {corpus_manifest(loaded.docs)['digest'][:16]}; "
          f"{report.converted} files run through a converter now, "
          f"{sum(1 for r in report.files if r.cached)} answered from the conversion cache")
    for r in report.failures:
        print(f"  skipped {r.path}: {r.failure}")
    return 1 if args.strict and report.failures else 0
