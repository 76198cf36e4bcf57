"""The Hydra entry point: one experiment (or one sweep point) per call. Thin on purpose.

    python run.py                                  # the default experiment
    python run.py retrieval=vector                 # one override
    python run.py -m fusion.rrf_k=30,60,90         # a sweep: one MLflow parent, one child per point
    python run.py experiment=compare_variants      # the four variants side by side
"""

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from rag_experiments.config import register_schema
from rag_experiments.redaction import redact_process_output, register_argv

register_schema()
register_argv(sys.argv[1:])  # learn the secrets an override carries before anything can echo it
# (register_schema also silences Hydra's schema-matching warning for our launcher/sweeper configs)


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    from rag_experiments.pipeline import run_from_hydra

    return run_from_hydra(cfg)


if __name__ == "__main__":
    from rag_experiments.config import exit_on_unknown_override_keys, free_mapping_overrides

    redact_process_output()  # Hydra's own error messages quote overrides (and their passwords)
    exit_on_unknown_override_keys(sys.argv[1:], Path(__file__).resolve().parent / "conf")
    sys.argv[1:] = free_mapping_overrides(sys.argv[1:])  # a team's own knobs: retrieval.external.params.*
    main()
