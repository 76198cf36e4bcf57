"""``rag-exp audit-cache`` re-asks past runs (issue 55, Deliver 1): a run whose logged answers are
not the system's live answers is listed with the case and the first differing rank, whatever made
them differ (here an environment variable no cache key holds); a run whose target can no longer
be imported is listed as not checked, with why, and the summary never claims it was checked.
Real MLflow store, real Hydra composition, real runs."""

from __future__ import annotations

import json
import sys
import uuid

from rag_experiments.cli import main
from rag_experiments.config import free_mapping_overrides, settings_from_cfg
from rag_experiments.experiment import run_experiment
from rag_experiments.pipeline import log_result

from ..test_config import _compose
from .test_external import MINI, golden_env  # noqa: F401 - the fixture

PROBES = "tests.retrieval.changing_targets"


def _logged(golden, target: str, *extra: str) -> str:
    cfg = _compose(free_mapping_overrides([
        f"corpus.path={MINI}", "corpus.name=mini", f"golden.path={golden}", "progress=false",
        "eval.bootstrap_samples=100", "tracking.plots=false", "retrieval=external",
        f"retrieval.external.target={target}", *extra]))
    return log_result(run_experiment(settings_from_cfg(cfg)), cfg, target.rpartition(":")[2])


def test_audit_cache_lists_a_run_whose_system_answers_otherwise_and_one_it_cannot_check(golden_env, monkeypatch,
                                                                                       tmp_path, capsys):
    version = f"retrieval.external.version=audit-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("RAG_EXP_PROBE_RANK", "1")
    same = _logged(golden_env, f"{PROBES}:from_env", version, "retrieval.external.verify=0")
    # a target in a folder that is gone by the time of the audit
    folder = tmp_path / "gone"
    folder.mkdir()
    name = f"rag_gone_{uuid.uuid4().hex[:8]}"
    (folder / f"{name}.py").write_text("from tests.retrieval.external_targets import oracle as search\n")
    monkeypatch.syspath_prepend(str(folder))
    gone = _logged(golden_env, f"{name}:search", version)
    (folder / f"{name}.py").unlink()
    monkeypatch.delitem(sys.modules, name)

    monkeypatch.setenv("RAG_EXP_PROBE_RANK", "7")  # the system changed: the logged run is not its answers
    assert main(["audit-cache"]) == 1
    out = capsys.readouterr().out
    assert "2 external/http run(s) read" in out and "1 re-asked live" in out and "1 not checked" in out
    assert (f"DIFFERS      {same}  from_env: re-asked 10 case(s) live, 10 differ from the logged run.trec (case "
            in out) and "first differing rank 1)" in out
    assert f"NOT CHECKED  {gone}  search: cannot re-ask the system: retrieval.external.target: cannot import" in out
    assert "none was scored" not in out

    monkeypatch.setenv("RAG_EXP_PROBE_RANK", "1")  # as it was: the same answers as logged
    assert main(["audit-cache", "--json"]) == 0
    found = {s["run_id"]: s for s in map(json.loads, capsys.readouterr().out.splitlines())}
    assert found[same]["status"] == "same" and found[gone]["status"] == "not checked"
    assert f"cannot import {name!r}" in found[gone]["detail"]
