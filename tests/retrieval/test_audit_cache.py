"""``rag-exp audit-cache`` lists the runs scored on another init's cached answers (issue 49, B1).

The old answer-cache key (no init, no code digests) is put back for one sweep to fill a real
store the way the old code did; the new key's sweep is then never listed."""

from __future__ import annotations

import json
import uuid

from rag_experiments.cache_key import cache_key
from rag_experiments.cli import main
from rag_experiments.config import free_mapping_overrides
from rag_experiments.experiment import run_experiment
from rag_experiments.pipeline import log_result
from rag_experiments.retrieval import external

from ..test_config import _compose
from .test_external import MINI, TARGETS, golden_env, settings  # noqa: F401 - the fixture


def _old_key(self) -> str:
    """The system key before issue 49: the target and its version, params; no init, no code."""
    return cache_key("external-system", target=self.identity["target"], version=self.identity["version"],
                     params=self.params, code="1")


def _sweep(golden, version: str, *extra: str) -> list[str]:
    ids = []
    for good in ("false", "true"):
        overrides = [f"retrieval.external.init.good={good}", f"retrieval.external.version={version}",
                     "tracking.plots=false", *extra]
        result = run_experiment(settings(golden, "Toy", *overrides))
        cfg = _compose(free_mapping_overrides([f"corpus.path={MINI}", "corpus.name=mini", f"golden.path={golden}",
                                               "retrieval=external", f"retrieval.external.target={TARGETS}:Toy",
                                               *overrides]))
        ids.append(log_result(result, cfg, f"good={good}"))
    return ids


def test_runs_scored_on_another_inits_cached_answers_are_listed(golden_env, monkeypatch, capsys):
    version = f"audit-{uuid.uuid4().hex[:8]}"  # the session's database is shared: a key of this test's own
    with monkeypatch.context() as m:
        m.setattr(external.System, "key", property(_old_key))
        # the old code had no live check of cached answers either (issue 55)
        bad_false, bad_true = _sweep(golden_env, version, "retrieval.external.verify=0")
    good_ids = _sweep(golden_env, version)  # today's key: each init its own answers

    assert main(["audit-cache", "--json"]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    listed = [s for s in lines if s["how"].startswith("old cache key")]
    assert [s["run_id"] for s in listed] == [bad_true]  # the good=true run of the old key, nothing else
    assert listed[0]["filled_by"] == bad_false and listed[0]["cached"] == 10 and listed[0]["calls"] == 0
    assert listed[0]["config"] == {"retrieval.external.init.good": "True"}
    assert not set(good_ids) & {s["run_id"] for s in listed}
    # re-asked live (issue 55), the same run is found without knowing how the key was built
    reasked = {s["run_id"]: s for s in lines if s["how"] == "re-asked"}
    assert [r for r, s in reasked.items() if s["status"] == "differs"] == [bad_true]
    assert reasked[bad_true]["detail"].startswith("re-asked 10 case(s) live, 10 differ from the logged run.trec")

    assert main(["audit-cache"]) == 1
    out = capsys.readouterr().out
    assert "4 external/http run(s) read" in out and "4 re-asked live" in out and bad_true in out
    assert "good=True" in out and f"DIFFERS      {bad_true}" in out


def test_a_store_without_such_runs_says_so(golden_env, capsys):
    _sweep(golden_env, f"audit-{uuid.uuid4().hex[:8]}")
    assert main(["audit-cache"]) == 0
    out = capsys.readouterr().out
    assert "2 external/http run(s) read" in out and "every run re-asked gives the ranked lists it logged" in out
