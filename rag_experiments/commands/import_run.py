"""`rag-exp import-run`: the ranked lists of a system that cannot be called here, as a run."""

from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser(
        "import-run",
        help="evaluate a stored run file (TREC or JSONL) as a normal MLflow run",
        description="Scores the ranked lists of a system that cannot be called from here (offline, another "
        "team's) against the golden set, and logs a normal MLflow run that compare, promote and gate pair with "
        "any other. trec: 'QID Q0 DOCNO RANK SCORE TAG' lines, QID the golden set's case id, DOCNO "
        "DOC:START-END (a span of the corpus document) or a bare document (the whole document). jsonl: "
        '{"case_id": ..., "passages": [...]} per line (or "query" for case_id), passages with source_uri and '
        "start/end or text, placed in the corpus text like a called system's. The same as "
        "`run.py retrieval=stored retrieval.stored.path=FILE`.",
    )
    p.add_argument("file", help="the run file")
    p.add_argument("--format", choices=("trec", "jsonl"), default="trec", help="the file's format (default trec)")
    p.add_argument("--name", required=True, help="the MLflow run name (what compare and the UI show)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="a config override, as run.py takes them (repeat: --set golden.path=... --set corpus.path=...)")
    p.set_defaults(func=cmd_import_run)


def cmd_import_run(args) -> int:
    from ..experiment import run_experiment
    from ..pipeline import label_status, log_result
    from ..report import print_summary
    from ..session import compose_settings

    path = Path(args.file).expanduser().resolve()
    settings, cfg = compose_settings(["retrieval=stored", f"retrieval.stored.path={path}",
                                      f"retrieval.stored.format={args.format}", *args.overrides])
    result = run_experiment(settings)
    run_id = log_result(result, cfg, args.name, label_status(result))
    print_summary(result, run_id)
    missing = int(result.external.get("alignment.missing_queries", 0))
    if missing:
        print(f"WARNING: {missing} of {result.eval.n_cases} cases have no list in {path.name}: scored as empty "
              "lists (the TREC convention), metric alignment.missing_queries")
    return 0
