"""rag-exp triage: RETRIEVAL or GENERATION failure, and where the evidence sat."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser(
        "triage", help="was a bad answer a RETRIEVAL or a GENERATION failure?",
        description="Runs QUERY through every variant of the configured chunking and reports where the "
        "expected evidence sat (vector, keyword, fused and reranked rank, or absent). RETRIEVAL: it never "
        "reached the top --context chunks of the configured variant; GENERATION: it did, and the model "
        "failed to use it. Offers to append the query to the golden set as a production case.",
        epilog='example: rag-exp triage "how do I stop autovacuum on one table" '
        '--expected postgresql-15/sql-createtable.html:41200-41650 --context 8')
    p.add_argument("query", help="the question that got a bad answer, as the user asked it")
    p.add_argument("--expected", required=True, metavar="CHUNK_ID_OR_SPAN",
                   help="a chunk id of the configured chunking, or SOURCE_URI:START-END")
    p.add_argument("--context", type=int, default=8, help="chunks the generator sees (default: 8)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="Hydra override for the pipeline to triage (repeatable), e.g. --set retrieval=vector")
    p.add_argument("--add", choices=["ask", "yes", "no"], default="ask",
                   help="append the query as a production case (default: ask when interactive)")
    p.add_argument("--golden", default=None, help="golden set to append to (default: the configured one)")
    p.add_argument("--author", help="who adds the case (default: $USER)")
    p.set_defaults(func=_triage)


def _triage(args) -> int:
    from ..session import open_retriever
    from ..limits import check_query
    from ..triage import parse_expected, triage

    if args.context <= 0:
        from ..errors import UserError

        raise UserError(f"--context must be > 0, got {args.context}")
    check_query(" ".join(args.query.split()), "query")  # before opening the database
    session = open_retriever(args.overrides, progress=False)
    try:
        expected = parse_expected(args.expected, session)
        report = triage(session, args.query, expected, args.context)
        print(report.render())
        golden = args.golden or str(session.settings.golden.file)
        add = args.add
        if add == "ask":
            if sys.stdin.isatty():
                add = "yes" if input(f"append this query to {golden} as a production case? [y/N] ").strip().lower() in ("y", "yes") else "no"
            else:
                add = "no"
        if add == "yes":
            from ..golden.add import add_production_case

            doc = session.document(expected.source_uri)
            quote = doc["text"][expected.start:expected.end]
            res = add_production_case(golden, args.query, source_uri=expected.source_uri, quote=quote,
                                      doc_lookup=session.document, author=args.author,
                                      note=f"triage: {report.verdict}")
            print(f"appended production case {res.record['id']} to {golden}")
        else:
            print(f"to keep it as a permanent case: rag-exp golden add --golden {golden} --query {args.query!r} "
                  f"--source-uri {expected.source_uri} --quote-file PASSAGE.txt "
                  f"(or: rag-exp triage ... --add yes)")
    finally:
        session.close()
    return 0
