"""The Hydra entry point: one experiment (or one sweep point) per call. Thin on purpose.

    python run.py                                  # the default experiment
    python run.py retrieval=vector                 # one override
    python run.py -m fusion.rrf_k=30,60,90         # a sweep: one MLflow parent, one child per point
    python run.py experiment=compare_variants      # the four variants side by side
"""

import warnings

import hydra
from omegaconf import DictConfig

from rag_experiments.config import register_schema

register_schema()
# conf/hydra/sweeper/basic.yaml replaces Hydra's basic sweeper on purpose (it composes each sweep
# point once); Hydra warns on every run that the file shares the name of its structured config
warnings.filterwarnings("ignore", message=r"(?s).*'hydra/sweeper/basic' is validated against ConfigStore schema")


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    from rag_experiments.pipeline import run_from_hydra

    return run_from_hydra(cfg)


if __name__ == "__main__":
    main()
