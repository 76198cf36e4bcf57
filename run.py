"""The Hydra entry point: one experiment (or one sweep point) per call. Thin on purpose: it is
`rag-exp run` (rag_experiments.hydra_app), kept for the commands the README and CI know.

    python run.py                                  # the default experiment
    python run.py retrieval=vector                 # one override
    python run.py -m fusion.rrf_k=30,60,90         # a sweep: one MLflow parent, one child per point
    python run.py experiment=compare_variants      # the four variants side by side
"""

import sys

from rag_experiments.hydra_app import main
from rag_experiments.startup import before_exit, tune_for_command_line

if __name__ == "__main__":
    tune_for_command_line()
    try:
        main(sys.argv[1:], prog=sys.argv[0])
    finally:
        before_exit()
