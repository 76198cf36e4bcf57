"""The typed passage a team's system returns (``from rag_experiments import Passage``): scored exactly
as the same passages given as mappings, and its rules enforced in one line naming the field or the
target."""

from __future__ import annotations

import pytest

from rag_experiments.errors import UserError
from rag_experiments.experiment import run_experiment
from rag_experiments.retrieval.passages import ExternalResultError

from .test_external import golden_env, settings  # noqa: F401 - the fixture

TYPED = "tests.retrieval.typed_targets"


def _typed(golden, target, *extra):
    return settings(golden, "oracle", f"retrieval.external.target={TYPED}:{target}", *extra)


@pytest.mark.parametrize("mode", ["offsets", "text"])
def test_typed_passages_score_exactly_as_mappings(golden_env, mode):
    extra = ("retrieval.external.params.rank=3", f"retrieval.external.params.mode={mode}",
             "retrieval.external.cache=false")
    as_dicts = run_experiment(settings(golden_env, "oracle", *extra))
    typed = run_experiment(_typed(golden_env, "typed_oracle", *extra))
    timing = ("latency", "harness_ms")  # wall-clock values differ between any two runs
    assert ({k: v for k, v in typed.eval.metrics.items() if not k.startswith(timing)}
            == pytest.approx({k: v for k, v in as_dicts.eval.metrics.items() if not k.startswith(timing)}, nan_ok=True))
    assert ({k: v for k, v in typed.external.items() if "harness_ms" not in k and "latency" not in k}
            == {k: v for k, v in as_dicts.external.items() if "harness_ms" not in k and "latency" not in k})
    for cid, ranked in as_dicts.results.items():
        assert [(h.doc_id, h.start, h.end) for h in typed.results[cid].hits] == [
            (h.doc_id, h.start, h.end) for h in ranked.hits]


def test_a_typed_passage_without_offsets_or_text_is_refused_naming_the_target(golden_env):
    with pytest.raises(UserError) as exc:
        run_experiment(_typed(golden_env, "bare", "retrieval.external.cache=false"))
    assert "neither start/end offsets nor text" in exc.value.message and f"{TYPED}:bare" in exc.value.message


def test_the_passage_rules_name_the_field():
    from rag_experiments import Passage

    assert Passage("a.html", 0, 5, score=2).score == 2.0 and isinstance(Passage("a.html", score=2).score, float)
    for kwargs, message in [
        (dict(document=""), "Passage.document: must be a non-empty string"),
        (dict(document="a.html", start=3), "give both start and end"),
        (dict(document="a.html", start=True, end=4), "Passage.start: must be an integer character offset"),
        (dict(document="a.html", text=b"bytes"), "Passage.text: must be a string"),
        (dict(document="a.html", text="t", score=float("inf")), "Passage.score: must be a finite number"),
    ]:
        with pytest.raises(ExternalResultError, match=message):
            Passage(**kwargs)
