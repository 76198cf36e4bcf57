"""Pooled labelling (`rag-exp golden label --pool RUN... / --sweep`): the union of the runs' top k
from their stored ranked lists, deduplicated by span, judged once (the real anthropic SDK against
the local stub), each judgement recording the pool it came from; a second call sends nothing."""

from __future__ import annotations

import pytest

from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.golden.resolve import EvalCase
from rag_experiments.types import Hit

from ..golden.anthropic_stub import stub, text  # noqa: F401 - the fixture
from .conftest import cli
from .golden_runs import log_golden_run

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


def title_span(doc, i: int) -> Hit:
    """The first 20 characters of a document (its title line: no case's evidence is there)."""
    return Hit(f"t-{doc.doc_id}", doc.doc_id, doc.source_uri, doc.doc_type, 0, 20, 1.0, i)


def test_a_pool_of_two_runs_is_judged_once_per_span(store, mini_golden, mini_docs, stub, monkeypatch, capsys):
    _, exp = store
    d1, d2, d3 = mini_docs[:3]

    def run_a(case: EvalCase):
        s = case.relevant[0].span
        return (Hit("e", s.doc_id, s.source_uri, case.doc_type, s.start, s.end, 2.0, 1), title_span(d1, 2),
                title_span(d2, 3), title_span(d3, 4))  # d3 is at rank 4: outside the pool of top 3

    def run_b(case: EvalCase):
        s = case.relevant[0].span
        return (title_span(d1, 1), title_span(d3, 2), Hit("e", s.doc_id, s.source_uri, case.doc_type, s.start,
                                                            s.end, 2.0, 3))

    a = log_golden_run(mini_golden, run_a, name="a", exp_id=exp)
    b = log_golden_run(mini_golden, run_b, name="b", exp_id=exp)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
    stub.responder = lambda body: text('{"verdict": "NO", "reason": "a title"}')
    from tests.conftest import FIXTURES

    sets = ["--set", f"corpus.path={FIXTURES / 'mini_corpus'}", "--set", "corpus.name=mini"]
    assert cli("golden", "label", "--golden", str(mini_golden), "--pool", a, b, "-k", "3", "--yes", *sets) == 0
    # per case: the evidence is credited (not judged); d1's title twice (once judged), d2's, d3's (from b)
    judged = [r for r in GoldenFile(mini_golden).read() if r["type"] == "judgement"]
    assert len(stub.prompts()) == len(judged) == 30
    assert {(j["span"]["doc_id"], j["span"]["start"], j["span"]["end"]) for j in judged} == {
        (d.doc_id, 0, 20) for d in (d1, d2, d3)}
    assert all(j["provenance"]["pool"] == {"runs": [a, b], "k": 3} for j in judged)
    capsys.readouterr()
    assert cli("golden", "label", "--golden", str(mini_golden), "--pool", a, b, "-k", "3", "--yes", *sets) == 0
    assert "to send: 0" in capsys.readouterr().out and len(stub.prompts()) == 30  # never paid twice


def test_per_run_depth_pools_each_run_to_its_own_depth(store, mini_golden, mini_docs, stub, monkeypatch, capsys):
    """TREC's depth per run: run a pooled to depth 1 (its evidence only: nothing to judge), run b
    to depth 2 (d1's and d3's titles); without it both would be pooled to -k 3."""
    _, exp = store
    d1, d2, d3 = mini_docs[:3]

    def run_a(case: EvalCase):
        s = case.relevant[0].span
        return (Hit("e", s.doc_id, s.source_uri, case.doc_type, s.start, s.end, 2.0, 1), title_span(d2, 2))

    def run_b(case: EvalCase):
        return (title_span(d1, 1), title_span(d3, 2), title_span(d2, 3))

    a = log_golden_run(mini_golden, run_a, name="a", exp_id=exp)
    b = log_golden_run(mini_golden, run_b, name="b", exp_id=exp)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
    stub.responder = lambda body: text('{"verdict": "NO", "reason": "a title"}')
    from tests.conftest import FIXTURES

    sets = ["--set", f"corpus.path={FIXTURES / 'mini_corpus'}", "--set", "corpus.name=mini"]
    base = ["golden", "label", "--golden", str(mini_golden), "--pool", a, b, "-k", "3", "--yes", *sets]
    assert cli(*base, "--per-run-depth", f"{a}=1", "nothing=2") == 2
    assert "run nothing is not in the pool" in capsys.readouterr().err
    assert cli(*base, "--per-run-depth", f"{a}=0") == 2
    assert cli(*base, "--per-run-depth", f"{a}=1", f"{b}=2") == 0
    judged = [r for r in GoldenFile(mini_golden).read() if r["type"] == "judgement"]
    assert {(j["span"]["doc_id"], j["span"]["start"], j["span"]["end"]) for j in judged} == {
        (d.doc_id, 0, 20) for d in (d1, d3)}  # d2 sat below both runs' own depths
    assert all(j["provenance"]["pool"] == {"runs": [a, b], "k": 3, "per_run_depth": {a: 1, b: 2}} for j in judged)
    assert cli("golden", "label", "--golden", str(mini_golden), "--per-run-depth", f"{a}=1", *sets) == 2
    assert "--per-run-depth needs a pool" in capsys.readouterr().err
