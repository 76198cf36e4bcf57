"""rag-exp corpus: import HTML or Markdown documentation; show what a corpus folder holds; convert
its PDF, DOCX, PPTX and HTML files (cached) and print the formats table; list its documents and
show one document's text as loaded (the text golden quotes and spans index into); list the
languages (text search configurations) corpus.language accepts."""

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
        "then each file that could not be loaded, with its reason, and each document whose text looks wrong "
        "(a warning): garbled text (words glued or split by the converter: 'aDocument', 'Dele gation'; or "
        "hardly any known words), and tables of contents or indexes (boilerplate: dot leaders, page numbers; "
        "for a PDF, which pages). Known words: those in 2+ files of the folder, plus /usr/share/dict/words when "
        "installed (Debian: wamerican). Last, the documents that are mostly copies of others (an all-in-one page, "
        "an index page, the HTML and the source of one page: corpus.copies=exclude indexes without them), each "
        "with the share of it found elsewhere. Example: rag-exp corpus convert docs/")
    cv.add_argument("path", nargs="?", default="demo", help="corpus folder ('demo' = shipped corpus)")
    cv.add_argument("--strict", action="store_true",
                    help="exit 1 when any file could not be loaded or has a warning (garbled text, boilerplate)")
    cv.add_argument("--copy-threshold", type=float, default=0.8, metavar="SHARE",
                    help="a document is listed as a copy when this share of its words (in runs of 5) is found in the "
                    "documents kept (default 0.8, as corpus.copy_threshold)")
    cv.set_defaults(func=_convert)

    def corpus_opt(sp) -> None:
        sp.add_argument("--corpus", default=None, metavar="demo|FOLDER",
                        help="the corpus (default: the configured corpus.path: demo, or the project's from rag-exp init)")

    ls = s.add_parser(
        "list", help="the documents of a corpus: source_uri, title, characters, format",
        description="One line per document as every run loads it: its source_uri (what golden add --source-uri "
        "and corpus show take; a doc_id or a unique file stem work too), title, characters of text and format "
        "(md, txt, or the converter of an HTML/PDF/DOCX/PPTX file).")
    corpus_opt(ls)
    ls.add_argument("--grep", metavar="TEXT", help="only documents whose source_uri or title contains TEXT "
                    "(case-insensitive)")
    ls.set_defaults(func=lambda a: _piped(_list, a))
    sh = s.add_parser(
        "show", help="a document's text as loaded (converted), with line numbers and char offsets",
        description="Print the document's text exactly as a golden quote must match it and as spans index into "
        "it (Markdown as it is after its front matter; HTML, PDF, DOCX and PPTX as converted: `ORIG_HEAD` on a "
        "page may be `` `ORIG_HEAD` `` here). Each line shows its number and the char offset where it starts. "
        "--grep shows only where TEXT occurs, found as rag-exp golden add finds a quote (verbatim, else through "
        "whitespace, Markdown markup and case), with --context lines around each match and each match's char span.")
    sh.add_argument("doc", metavar="DOC", help="the document: its source_uri, doc_id or unique file stem "
                    "(rag-exp corpus list)")
    corpus_opt(sh)
    sh.add_argument("--grep", metavar="TEXT", help="show only the matches of TEXT (through whitespace, markup and case)")
    sh.add_argument("--context", type=int, default=2, metavar="N",
                    help="with --grep: lines shown before and after each match (default: 2)")
    sh.set_defaults(func=lambda a: _piped(_show, a))
    lg = s.add_parser(
        "languages", help="the values corpus.language accepts: PostgreSQL's text search configurations",
        description="List the text search configurations of the database (pg_ts_config: $DATABASE_URL, else the "
        "embedded server): each is a value of corpus.language, which sets the stemming and stop words of the "
        "keyword leg, its BM25 statistics and RM3 for that strategy (default: english). 'simple' lower-cases "
        "without stemming or stop words (a language PostgreSQL has no stemmer for). Example: "
        "rag-exp run corpus.path=docs-de corpus.language=german")
    lg.set_defaults(func=_languages)
    p.set_defaults(func=lambda a: (p.print_help(), 1)[1])


def _import_html(args) -> int:
    from ..corpus.html_import import import_html_dir

    report = import_html_dir(args.src, args.dest, prefix=args.prefix)
    print(report.summary())
    return 0


def _languages(args) -> int:
    from ..db.connect import connect, resolve_database_url

    with connect(resolve_database_url()) as conn:
        rows = conn.execute(
            "SELECT CASE WHEN n.nspname = 'pg_catalog' THEN c.cfgname ELSE n.nspname || '.' || c.cfgname END,"
            " coalesce(obj_description(c.oid, 'pg_ts_config'), '')"
            " FROM pg_ts_config c JOIN pg_namespace n ON n.oid = c.cfgnamespace ORDER BY 1").fetchall()
    width = max(len(r[0]) for r in rows)
    for name, description in rows:
        print(f"{name:{width}s}  {description}".rstrip())
    print(f"\n{len(rows)} configurations; set one with corpus.language=NAME (default: english)")
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

    from ..corpus.copies import find_copies
    from ..corpus.loader import corpus_manifest, read_corpus
    from ..corpus.quality import assess

    loaded = read_corpus(args.path, progress=sys.stderr.isatty())
    report = loaded.report
    quality = assess(loaded.docs)
    flagged = [(q.doc_id, w) for q in quality.flagged for w in q.warnings()]
    print(report.formats_table())
    vocab = "words in 2+ files" + (f" and {quality.dictionary}" if quality.dictionary else
                                   " (no dictionary at /usr/share/dict/words: apt install wamerican adds one)")
    print(f"\n{len(loaded.docs)} documents, corpus digest {corpus_manifest(loaded.docs)['digest'][:16]}; "
          f"{report.converted} files run through a converter now, "
          f"{sum(1 for r in report.files if r.cached)} answered from the conversion cache; "
          f"{len(flagged)} warning(s) from the text checks (known words: {vocab})")
    for r in report.failures:
        print(f"  skipped {r.path}: {r.failure}")
    word = "failed" if args.strict else "warning"
    for path, w in flagged:
        print(f"  {word} {path}: {w}")
    for line in find_copies(loaded.docs, args.copy_threshold).lines():  # corpus.copies=exclude would drop these
        print(line)
    return 1 if args.strict and (report.failures or flagged) else 0


def _piped(command, args) -> int:
    """Run a command whose output is often piped into head or less: a reader that stops early
    ends it quietly (exit 0), not with a BrokenPipeError traceback."""
    import os
    import sys

    try:
        rc = command(args)
        sys.stdout.flush()
        return rc
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


def _corpus_arg(args) -> str:
    if args.corpus is not None:
        return args.corpus
    from .golden import configured_corpus

    return configured_corpus([])


def _format_of(doc, formats: dict[str, str]) -> str:
    if doc.source is not None:
        return doc.source.converter  # "pypdf 7.1.1", "html_import ..."
    return formats.get(doc.doc_id, "md")  # front matter may give an id that is not the path: Markdown


def _list(args) -> int:
    from ..corpus.loader import corpus_files, load_corpus, resolve_corpus_dir

    corpus = _corpus_arg(args)
    docs = load_corpus(corpus)
    root = resolve_corpus_dir(str(corpus))
    formats = {f.relative_to(root).as_posix(): fmt for f, fmt in corpus_files(root)}
    if args.grep:
        needle = args.grep.lower()
        docs = [d for d in docs if needle in d.source_uri.lower() or needle in d.title.lower()]
    rows = [(d.source_uri, d.title, f"{len(d.text):,}", _format_of(d, formats)) for d in docs]
    heads = ("source_uri", "title", "chars", "format")
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(heads)]
    widths[1] = min(widths[1], 50)

    def line(r) -> str:
        title = r[1] if len(r[1]) <= widths[1] else r[1][: widths[1] - 3] + "..."
        return f"{r[0]:<{widths[0]}}  {title:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]}"

    print(line(heads))
    for r in rows:
        print(line(r))
    total = sum(len(d.text) for d in docs)
    print(f"{len(rows)} documents, {total:,} characters ({corpus}); a document's text: rag-exp corpus show DOC")
    return 0


def _show(args) -> int:
    from ..corpus.loader import load_corpus
    from ..corpus.lookup import Lines, find_document
    from ..errors import UserError
    from ..golden.add import find_quote

    if args.context < 0:
        raise UserError(f"--context must be >= 0, got {args.context}")
    corpus = _corpus_arg(args)
    doc = find_document(load_corpus(corpus), args.doc, str(corpus))
    lines = Lines(doc.text)
    width = len(str(len(lines)))
    owidth = len(str(len(doc.text)))

    def emit(n: int, mark: str = " ") -> None:
        a, b = lines.span(n)
        print(f"{n:>{width}} {a:>{owidth}} {mark}| {doc.text[a:b]}")

    print(f"{doc.source_uri}: {doc.title!r}, {len(doc.text):,} chars, {len(lines)} lines (doc_id {doc.doc_id}, "
          f"doc_type {doc.doc_type}); columns: line, char offset of the line, text")
    if not args.grep:
        for n in range(1, len(lines) + 1):
            emit(n)
        return 0
    mode, spans = find_quote(doc.text, args.grep)
    if not spans:
        print(f"{args.grep!r}: no match (compared verbatim, through whitespace, and through markup and case)")
        return 1
    how = {"exact": "verbatim", "whitespace": "through whitespace", "normalised": "through whitespace, markup and case"}
    print(f"{args.grep!r}: {len(spans)} match(es), {how[mode]}")
    shown = 0
    for i, (start, end) in enumerate(spans, 1):
        first, last = lines.line_of(start), lines.line_of(max(start, end - 1))
        lo, hi = max(1, first - args.context, shown + 1), min(len(lines), last + args.context)
        if lo > shown + 1 and shown:
            print("--")
        print(f"match {i}: chars {start}..{end}, line {first}" + (f"-{last}" if last != first else ""))
        for n in range(lo, hi + 1):
            emit(n, ">" if first <= n <= last else " ")
        shown = max(shown, hi)
    return 0
