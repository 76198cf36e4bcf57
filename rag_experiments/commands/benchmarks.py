"""``rag-exp import-beir`` / ``rag-exp import-trec``: public benchmarks as a corpus folder plus a
benchmark golden set (see :mod:`rag_experiments.benchmarks.benchmark` for the output and the
grade mapping). Evaluate them at document level: ``python run.py experiment=cranfield``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

DEFAULT_ROOT = "benchmarks"


def _common(sp: argparse.ArgumentParser, default_map: str) -> None:
    from ..benchmarks.grade_maps import GRADE_MAPS  # not ..benchmarks.benchmark: the importers cost 0.1-0.4 s

    sp.add_argument("dir", type=Path, help="the collection's folder")
    sp.add_argument("out", type=Path, nargs="?",
                    help=f"output folder, gets corpus/ and golden.jsonl (default: {DEFAULT_ROOT}/<name> under the "
                    "project root, $RAG_EXP_HOME or the current folder)")
    sp.add_argument("--name", help="collection name: source_uri prefix, doc_type, corpus name (default: DIR's name)")
    sp.add_argument("--golden", type=Path, metavar="PATH",
                    help="golden-set file (default: OUT/golden.jsonl, OUT/golden-<split>.jsonl for other splits)")
    sp.add_argument("--doc-type", help="doc_type of every document (default: the name)")
    sp.add_argument("--grade-map", default=default_map, choices=sorted(GRADE_MAPS),
                    help=f"qrels grade -> gain -> golden grade (default: {default_map}); "
                    + "; ".join(f"{k}: {v.rule}" for k, v in GRADE_MAPS.items()))
    sp.add_argument("--skip-missing", action="store_true",
                    help="drop (and count) qrels lines naming a document missing from the corpus instead of failing")
    sp.add_argument("--no-progress", action="store_true", help="no progress bar")


def register(subparsers: Any) -> None:
    sp = subparsers.add_parser(
        "import-beir", help="import a BEIR dataset (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)",
        description="Write one Markdown file per document (front matter doc_id = the corpus _id) and a new "
        "golden set with one 'benchmark' case per query of the split that has a relevant document; its "
        "evidence is each relevant document, whole. Example: rag-exp import-beir ~/data/scifact "
        "&& python run.py experiment=beir corpus.path=benchmarks/scifact/corpus "
        "golden.path=benchmarks/scifact/golden.jsonl")
    _common(sp, "raw")
    sp.add_argument("--split", default="test", help="qrels split: qrels/<split>.tsv (default: test)")
    sp.set_defaults(func=cmd_import_beir)

    sp = subparsers.add_parser(
        "import-trec", help="import a SMART/TREC test collection (e.g. Cranfield: cran.all.1400, cran.qry, cranqrel)",
        description="Like import-beir, for the classic SMART layout: .I/.T/.A/.B/.W records for documents "
        "and queries, qrels 'query doc grade' (or TREC 'query iter doc grade'). Cranfield numbers the "
        "queries of its qrels by position in cran.qry (the default --query-numbering). Example: "
        "rag-exp import-trec /data/cranfield && python run.py experiment=cranfield")
    _common(sp, "cleverdon")
    sp.add_argument("--docs", help="documents file (default: the one *.all.* / *.ALL file in DIR)")
    sp.add_argument("--queries", help="queries file (default: the one *.qry file in DIR)")
    sp.add_argument("--qrels", help="qrels file (default: the one *qrel / *.REL file in DIR)")
    sp.add_argument("--query-numbering", default="position", choices=("position", "id"),
                    help="how qrels number queries: n-th record of the queries file (Cranfield), or its .I id "
                    "(default: position)")
    sp.add_argument("--encoding", default="auto",
                    help="file encoding (default: auto = UTF-8 per line where valid, else Latin-1)")
    sp.set_defaults(func=cmd_import_trec)


def _paths(args, split: str = "test") -> tuple[str, Path, Path]:
    from ..paths import project_root

    name = args.name or Path(args.dir).expanduser().resolve().name
    out = args.out or project_root() / DEFAULT_ROOT / name
    out = Path(out).expanduser()
    golden = args.golden or out / ("golden.jsonl" if split == "test" else f"golden-{split}.jsonl")
    return name, out / "corpus", Path(golden).expanduser()


def _progress(args) -> bool:
    return not args.no_progress and sys.stderr.isatty()


def cmd_import_beir(args) -> int:
    from ..benchmarks.beir import import_beir

    name, corpus_dir, golden = _paths(args, args.split)
    report = import_beir(args.dir, corpus_dir, golden, split=args.split, name=name, grades=args.grade_map,
                         doc_type=args.doc_type, skip_missing=args.skip_missing, progress=_progress(args))
    print(report.summary())
    return 0


def cmd_import_trec(args) -> int:
    from ..benchmarks.trec import import_trec

    name, corpus_dir, golden = _paths(args)
    report = import_trec(args.dir, corpus_dir, golden, name=name, docs=args.docs, queries=args.queries,
                         qrels=args.qrels, grades=args.grade_map, query_numbering=args.query_numbering,
                         encoding=args.encoding, doc_type=args.doc_type, skip_missing=args.skip_missing,
                         progress=_progress(args))
    print(report.summary())
    return 0
