"""Runs over a real golden file without a database: ranked lists made of spans.

A "good" config ranks each case's evidence span first; a "bad" one ranks only spans of a
document no case cites. The lists are then evaluated by the real :func:`evaluate` and logged the
way :func:`rag_experiments.tracking.mlflow_run.log_experiment` logs them (version tags, per-case
table, the ``run.trec`` ranked lists through the real ``run_file_artifact``/``log_files``), so comparison, the gate,
promotion and history see what a real run leaves behind.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

from rag_experiments.evaluation.evaluate import evaluate
from rag_experiments.golden.resolve import EvalCase, load_golden
from rag_experiments.types import Hit, RankedList

from .conftest import CORPUS, aggregate, base_config


def filler(n: int = 20, start_rank: int = 1) -> list[Hit]:
    return [Hit(f"f{i}", "unrelated/doc.html", "unrelated/doc.html", "misc", 100 * i, 100 * i + 80, 1.0 / (i + 1),
                start_rank + i) for i in range(n)]


def good(case: EvalCase) -> tuple[Hit, ...]:
    span = case.relevant[0].span
    first = Hit("e", span.doc_id, span.source_uri, case.doc_type, span.start, span.end, 2.0, 1)
    return (first, *filler(19, 2))


def third(case: EvalCase) -> tuple[Hit, ...]:
    """The evidence at rank 3: reciprocal rank 1/3, a value JSON does not keep exactly."""
    span = case.relevant[0].span
    hits = filler(19, 1)
    evidence = Hit("e", span.doc_id, span.source_uri, case.doc_type, span.start, span.end, 2.0, 3)
    return (*hits[:2], evidence, *[Hit(h.chunk_id, h.doc_id, h.source_uri, h.doc_type, h.start, h.end, h.score,
                                       h.rank + 1) for h in hits[2:]])


def bad(case: EvalCase) -> tuple[Hit, ...]:
    return tuple(filler(20))


def ranked(golden_path: Path, config: Callable[[EvalCase], tuple[Hit, ...]], miss: set[str] = frozenset()):
    golden = load_golden(golden_path)
    return golden, {c.case_id: RankedList(c.query, bad(c) if c.case_id in miss else config(c))
                    for c in golden.scorable}


def log_golden_run(golden_path: Path, config=good, *, name: str = "run", miss: set[str] = frozenset(),
                   exp_id: str | None = None, corpus: str = CORPUS, run_file: bool = True) -> str:
    """Evaluate ``config``'s lists on the golden file as it is now and log the run; return its id."""
    import mlflow
    import yaml

    from rag_experiments.tracking.mlflow_run import (flatten, golden_lines_artifact, golden_version_tags, log_files,
                                                     run_file_artifact)

    golden, results = ranked(golden_path, config, miss)
    ev = evaluate(golden, results)
    cfg = base_config(**{"golden.path": str(golden_path)})
    tags = {"variant": "hybrid", "corpus_digest": corpus, "golden_set": golden_path.name,
            **golden_version_tags(golden)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mlflow.start_run(experiment_id=exp_id, run_name=name, tags=tags) as run:
            mlflow.log_params(flatten(cfg))
            mlflow.log_text(yaml.safe_dump(cfg, sort_keys=False), "config.yaml")
            mlflow.log_metrics(aggregate(ev.per_case))
            mlflow.log_table(ev.per_case, artifact_file="per_case.json")
            files = golden_lines_artifact(golden)
            if run_file:
                files.update(run_file_artifact(SimpleNamespace(results=results), name))
            log_files(mlflow.tracking.MlflowClient(), run.info.run_id, files)
    return run.info.run_id
