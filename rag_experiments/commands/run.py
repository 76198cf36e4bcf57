"""`rag-exp run`: one experiment, or a sweep with -m; what `python run.py` does, from any folder."""

from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser(
        "run", help="run an experiment (or a sweep with -m): Hydra overrides, as run.py takes them",
        description="Runs the default experiment with the given Hydra overrides, from any folder: "
        "`rag-exp run retrieval=vector`, `rag-exp run -m fusion.rrf_k=30,60,90`, `rag-exp run "
        "experiment=compare_variants`. The configs ship in the package; a project's own conf/ (what "
        "`rag-exp init` writes) adds or overrides groups and presets. Everything after `run` goes to "
        "Hydra (`rag-exp run --help` there: Hydra's own help, `--cfg job` prints the composed config).",
    )
    p.add_argument("hydra_args", nargs=argparse.REMAINDER, help="Hydra overrides and flags")
    p.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    from ..hydra_app import main

    main(args.hydra_args)
    return 0
