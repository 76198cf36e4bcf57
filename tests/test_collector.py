"""The cyclic garbage collector is paused while a run retrieves, and restored after it
(rag_experiments/collector.py says why: its cost grew with cases x the search memo)."""

from __future__ import annotations

import gc

import pytest

from rag_experiments.collector import collector_paused
from rag_experiments.experiment import run_experiment

from .retrieval import external_targets
from .retrieval.test_external import settings


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_inside_and_restored_after_even_on_error(collector_on):
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_caller_that_switched_it_off_keeps_it_off(collector_on):
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_a_run_retrieves_with_the_collector_paused_and_gives_it_back(collector_on, project, mini_golden, monkeypatch):
    monkeypatch.setenv("RAG_EXP_TEST_GOLDEN", str(mini_golden))
    external_targets.COLLECTOR_STATES.clear()
    result = run_experiment(settings(mini_golden, "collector_watch", "retrieval.external.cache=false"))
    assert result.eval.metrics["mrr_at_10"] == 1.0  # the oracle at rank 1: the run really scored
    states = external_targets.COLLECTOR_STATES
    assert len(states) == 10 and not any(states), states  # one call per case, each with it paused
    assert gc.isenabled()
