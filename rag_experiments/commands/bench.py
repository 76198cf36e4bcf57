"""rag-exp bench: the performance benchmark (prints one table; see rag_experiments/bench.py)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("bench", help="measure ingest, latency, evaluation, metric and memory costs",
                       description="Runs in a throwaway database and prints one table with the machine "
                       "described. Arguments after 'bench' go to the benchmark (try: rag-exp bench -- --help).")
    p.add_argument("bench_args", nargs="*", help="e.g. --strategies heading --queries 50 --skip memory")
    p.set_defaults(func=lambda a: __import__("rag_experiments.bench", fromlist=["main"]).main(a.bench_args))
