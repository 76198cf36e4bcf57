"""A sampled_labels.json edited by hand, with the right shape, is caught against the run's own
per_case.json (issue 55 probe 6): before, every ``base`` set to 1.0 moved compare's paired
estimate (the probe: Δ+0.217 "excludes 0" where the truth was Δ+0.003). Real MLflow; the runs of
tests/tracking/test_sampled_compare.py."""

from __future__ import annotations

import json

from mlflow.tracking import MlflowClient

from rag_experiments.tracking.mlflow_run import log_files
from rag_experiments.tracking.runs import runs_by_ids
from rag_experiments.tracking.sampled_log import read_sampled, sampled_lines

from ..evaluation.test_sampled_difference import tiny  # noqa: F401 - fixture
from .test_sampled_compare import _logged_run, _no_ci_noise  # noqa: F401 - fixture


def test_a_table_edited_to_the_right_shape_is_one_line_naming_the_file(store, make_run, tiny):  # noqa: F811
    g, ids, run_a, run_b = tiny
    a = _logged_run(make_run, g, ids, run_a, "baseline")
    b = _logged_run(make_run, g, ids, run_b, "candidate")
    honest = sampled_lines(runs_by_ids([a, b]), ["baseline", "candidate"])
    assert honest[0].startswith("sampled labels candidate vs baseline: recall@5 Δ-0.250")

    table = read_sampled(b)
    edited = {**table, "cases": {cid: {**row, "base": [1.0] * len(row["base"])} for cid, row in table["cases"].items()}}
    changed = next(cid for cid, row in table["cases"].items() if row["base"] != [1.0])
    log_files(MlflowClient(), b, {"sampled_labels.json": json.dumps(edited)})  # same shape, other numbers
    lines = sampled_lines(runs_by_ids([a, b]), ["baseline", "candidate"])
    assert lines[0].startswith("sampled labels: candidate's sampled_labels.json disagrees with its own per_case.json "
                               f"(case {changed}: recall@5 ")
    assert lines[0].endswith("in the run's per_case.json): no paired estimate against the baseline")
    assert not any(line.startswith("sampled labels candidate vs") for line in lines)
