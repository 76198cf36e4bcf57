"""``rag-exp export-run``: write a logged run as TREC files (run + qrels) for trec_eval,
ir_measures or pytrec_eval. Logic: :mod:`rag_experiments.tracking.export`."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    sp = subparsers.add_parser(
        "export-run", help="export a document-level run as a TREC run file plus qrels",
        description="Write run.trec (qid Q0 docid rank score tag, from the run's per-case table), qrels.trec "
        "(the run's golden set with its golden grades: what our nDCG uses) and, for an imported benchmark, "
        "qrels.original.trec (the collection's own gains). The golden file is located through the run's "
        "config.yaml and must have the sha256 the run logged. Example: rag-exp export-run 3f2a... "
        "&& trec_eval -c -m ndcg_cut.10 exports/3f2a.../qrels.trec exports/3f2a.../run.trec")
    sp.add_argument("run_id", help="MLflow run id (32 hex characters)")
    sp.add_argument("--format", dest="fmt", default="trec", choices=("trec",), help="output format (default: trec)")
    sp.add_argument("--out", type=Path, metavar="DIR", help="output folder (default: exports/<run id> under the "
                    "project root)")
    sp.add_argument("--tag", help="run tag, the 6th column (default: the run's name, else rag-exp-<id>)")
    sp.add_argument("--scores", default="rank", choices=("rank", "logged"),
                    help="score column: rank = n - rank + 1, strictly decreasing so every evaluator keeps our "
                    "order (default); logged = the retrieval scores (ties may reorder)")
    sp.set_defaults(func=cmd_export_run)


def cmd_export_run(args) -> int:
    from ..tracking.export import export_run

    report = export_run(args.run_id, args.out, args.fmt, tag=args.tag, scores=args.scores)
    print(report.summary())
    return 0
