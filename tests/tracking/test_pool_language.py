"""The judge of a pool (`rag-exp golden label --pool/--sweep`) is told the language the pooled runs
were scored in (their corpus.language tag): no session is opened there, so the runs say it (issue 47
item 4). The real anthropic SDK against the local stub."""

from __future__ import annotations

import mlflow
import pytest

from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.golden.resolve import EvalCase
from rag_experiments.types import Hit

from ..golden.anthropic_stub import stub, text  # noqa: F401 - the fixture
from .conftest import cli
from .golden_runs import log_golden_run

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")
GERMAN = "The question and the passage are in German."


def _run(golden, docs, exp, name: str, language: str | None) -> str:
    """A run ranking the evidence first, then ``docs``' title lines (to be judged);
    tagged corpus.language as mlflow_run logs it (None: a run logged before the setting existed)."""
    def ranked(case: EvalCase):
        s = case.relevant[0].span
        return (Hit("e", s.doc_id, s.source_uri, case.doc_type, s.start, s.end, 2.0, 1),
                *(Hit(f"t-{d.doc_id}", d.doc_id, d.source_uri, d.doc_type, 0, 20, 1.0, i)
                  for i, d in enumerate(docs, start=2)))

    run_id = log_golden_run(golden, ranked, name=name, exp_id=exp)
    if language is not None:
        mlflow.tracking.MlflowClient().set_tag(run_id, "corpus.language", language)
    return run_id


def test_the_pool_judge_is_told_the_runs_language(store, mini_golden, mini_docs, stub, monkeypatch, capsys):
    from tests.conftest import FIXTURES

    _, exp = store
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
    stub.responder = lambda body: text('{"verdict": "NO", "reason": "ein Titel"}')
    sets = ["--set", f"corpus.path={FIXTURES / 'mini_corpus'}", "--set", "corpus.name=mini"]
    label = ["golden", "label", "--golden", str(mini_golden), "-k", "3", "--yes", *sets]
    # the english runs rank two documents' titles, the german and french ones two others
    english = _run(mini_golden, mini_docs[:2], exp, "english", "english")
    untagged = _run(mini_golden, mini_docs[:2], exp, "before", None)
    german = _run(mini_golden, mini_docs[2:4], exp, "german", "german")
    french = _run(mini_golden, mini_docs[2:4], exp, "french", "french")

    # english runs (and runs from before the setting): byte for byte the prompt of before (checkpoints and caches
    # are keyed by it)
    assert cli(*label, "--pool", english, untagged) == 0
    before = stub.prompts()
    assert before and all(p.endswith("</passage>\n\nAnswer with the JSON object only.") for p in before)

    # two named languages: one line naming both and their runs, nothing sent
    assert cli(*label, "--pool", german, french) == 2
    err = capsys.readouterr().err
    assert "corpus.language" in err and f"german: {german}" in err and f"french: {french}" in err
    assert "Traceback" not in err and stub.prompts() == before

    # english (and a run from before the setting) on the same corpus give way to german: every new prompt says
    # so (the english runs' titles were judged above: only the german run's are sent)
    assert cli(*label, "--pool", english, german, untagged) == 0
    prompts = stub.prompts()[len(before):]
    judged = [r for r in GoldenFile(mini_golden).read() if r["type"] == "judgement"]
    assert prompts and len(before) + len(prompts) == len(judged) and all(GERMAN in p for p in prompts)

