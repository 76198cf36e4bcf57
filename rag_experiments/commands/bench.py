"""rag-exp bench: the performance benchmark (prints one table; see rag_experiments/bench.py), and
``rag-exp bench --scale``: how cost grows with the corpus and the golden set (rag_experiments/bench_scale.py)."""

from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser("bench", help="measure ingest, latency, evaluation, metric and memory costs",
                       description="Runs in a throwaway database and prints one table with the machine "
                       "described. Arguments after 'bench' go to the benchmark (try: rag-exp bench -- --help). "
                       "--scale: the scale benchmark instead (synthetic corpora of 10k and 100k chunks, "
                       "--million adds 1M; rag-exp bench --scale -- --help).")
    p.add_argument("--scale", action="store_true",
                   help="the scale benchmark: cost per corpus size (10k, 100k chunks) and growth exponents")
    p.add_argument("--sizes", default=None, help="with --scale: corpus sizes in chunks, e.g. 10000,100000")
    p.add_argument("--million", action="store_true", help="with --scale: also 1,000,000 chunks (long)")
    p.add_argument("bench_args", nargs=argparse.REMAINDER, help="e.g. --strategies heading --queries 50 --skip memory")
    p.set_defaults(func=_run)


def _run(a) -> int:
    rest = [x for x in a.bench_args if x != "--"]
    if a.scale:
        from ..bench_scale import main

        return main((["--sizes", a.sizes] if a.sizes is not None else []) + (["--million"] if a.million else []) + rest)
    if a.sizes is not None or a.million:
        from ..errors import UserError

        raise UserError("--sizes and --million belong to the scale benchmark", hint="add --scale")
    from ..bench import main

    return main(rest)
