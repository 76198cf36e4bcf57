"""A query log as golden cases (issue 47 item 3): normalised, deduplicated, stratified by traffic,
sampled, appended without evidence; labelled by pooling (LLM judge through the API stub, or by
hand); the unanswerable share in golden stats; production-<stratum> segments in evaluation."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from rag_experiments import cli
from rag_experiments.evaluation.evaluate import evaluate
from rag_experiments.golden import GoldenFile
from rag_experiments.golden import import_queries as iq
from rag_experiments.golden import hand_label as hl
from rag_experiments.golden.label import plan_labelling, run_labelling
from rag_experiments.golden.resolve import load_golden
from rag_experiments.types import Hit, RankedList

from .anthropic_stub import client_for, prompt_of, stub, text  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

# 100 occurrences: the head is the first query (its 50 make half the traffic), the torso the next two
# (to 80), the tail the rest
LOG = [("How do I reset my password?", 30), ("how do i  reset my PASSWORD?", 20),  # one query, 50 in all
       ("export to csv", 20), ("slow dashboard", 10),
       ("api rate limit", 8), ("dark mode", 5), ("delete account", 4), ("sso login", 2), ("webhook retries", 1)]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps({"query": q, "count": n, "ts": f"2026-12-0{1 + i % 3}T10:00:00Z"}) + "\n"
                            for i, (q, n) in enumerate(rows)), encoding="utf-8")
    return path


def test_normalise_deduplicate_and_strata(tmp_path):
    queries, fmt = iq.read_log(write_jsonl(tmp_path / "log.jsonl", LOG))
    assert fmt == "jsonl" and len(queries) == 9
    distinct = iq.deduplicate(queries)
    assert len(distinct) == 8
    pw = next(d for d in distinct if d.key == "how do i reset my password?")
    assert pw.count == 50 and pw.text == "How do I reset my password?" and len(pw.forms) == 2
    assert (pw.first_ts, pw.last_ts) == ("2026-12-01T10:00:00Z", "2026-12-02T10:00:00Z")
    ordered = iq.stratify(distinct)
    assert {s: [d.text for d in ordered if d.stratum == s] for s in iq.STRATA} == {
        "head": ["How do I reset my password?"], "torso": ["export to csv", "slow dashboard"],
        "tail": ["api rate limit", "dark mode", "delete account", "sso login", "webhook retries"]}
    assert iq.allocate({"head": 1, "torso": 2, "tail": 5}, 4) == {"head": 1, "torso": 2, "tail": 1}
    assert iq.allocate({"head": 1, "torso": 2, "tail": 5}, 6) == {"head": 1, "torso": 2, "tail": 3}
    assert iq.allocate({"head": 10, "torso": 10, "tail": 10}, 7) == {"head": 3, "torso": 2, "tail": 2}
    # a larger size extends the smaller one's sample (same seed)
    small, _ = iq.sample(ordered, 4, seed=5)
    large, _ = iq.sample(ordered, 6, seed=5)
    assert {d.key for d in small} <= {d.key for d in large}


def test_text_log_counts_repeated_lines(tmp_path):
    log = tmp_path / "q.txt"
    log.write_text("reset password\n\nReset   password\nexport csv\n", encoding="utf-8")
    queries, fmt = iq.read_log(log)
    assert fmt == "text" and [q.line for q in queries] == [1, 3, 4]
    assert sorted((d.text, d.count) for d in iq.deduplicate(queries)) == [("export csv", 1), ("reset password", 2)]


def test_cli_import_appends_once_and_the_set_verifies(tmp_path, capsys):
    golden = tmp_path / "g.jsonl"
    log = write_jsonl(tmp_path / "log.jsonl", LOG)
    assert cli.main(["golden", "import-queries", str(log), "--golden", str(golden), "--size", "4"]) == 0
    out = capsys.readouterr().out
    assert "9 queries read, 100 occurrences, 8 distinct" in out and "appended 4 production case(s)" in out
    recs = GoldenFile(golden).read()
    assert len(recs) == 4 and all(r["kind"] == "production" and r["evidence"] == [] for r in recs)
    assert sorted(r["stratum"] for r in recs) == ["head", "tail", "torso", "torso"]
    head = next(r for r in recs if r["stratum"] == "head")
    assert head["query"] == "How do I reset my password?" and head["provenance"]["count"] == 50
    assert head["provenance"]["method"] == "import" and head["provenance"]["source"] == "log.jsonl"
    assert cli.main(["golden", "verify", "--golden", str(golden)]) == 0
    digest = GoldenFile(golden).digest()
    capsys.readouterr()
    # the same file again: nothing appended
    assert cli.main(["golden", "import-queries", str(log), "--golden", str(golden), "--size", "4"]) == 0
    out = capsys.readouterr().out
    assert "appended 0 production case(s)" in out and "4 already in the set" in out
    assert GoldenFile(golden).digest() == digest
    # a larger sample extends it
    assert cli.main(["golden", "import-queries", str(log), "--golden", str(golden), "--size", "6"]) == 0
    assert len(GoldenFile(golden).read()) == 6


@pytest.mark.parametrize("content, where, words", [
    (b"", "log.jsonl", "no queries (the file is empty)"),
    (b'{"query": "a"}\n{"query": "b"\n', "log.jsonl:2", "not a JSON object"),
    (b'{"query": "a"}\n\n{"query": "bad \\udcff here"}\n', "log.jsonl:3", "lone surrogate"),
    (b'{"query": "a", "count": 0}\n', "log.jsonl:1", "field 'count' must be a whole number >= 1"),
    (b'{"count": 2}\n', "log.jsonl:1", "field 'query' is missing"),
    (b'["a"]\n', "log.jsonl:1", "must be a JSON object"),
    (b'{"query": "a"}\n{"query": "' + b"x" * 70_000 + b'"}\n', "log.jsonl:2", "the line has 70,013 bytes"),
    (b'{"query": "' + b"word " * 1000 + b'"}\n', "log.jsonl:1", "characters; the limit is 4,000"),
])
def test_bad_logs_end_in_one_line_naming_file_and_line(tmp_path, capsys, content, where, words):
    log = tmp_path / "log.jsonl"
    log.write_bytes(content)
    golden = tmp_path / "g.jsonl"
    rc = cli.main(["golden", "import-queries", str(log), "--golden", str(golden)])
    err = capsys.readouterr().err
    assert rc != 0 and "Traceback" not in err
    first = err.splitlines()[0]
    assert first.startswith(f"error: {tmp_path / where}") and words in first, first
    assert not golden.exists()


def test_text_log_not_utf8_names_the_line(tmp_path, capsys):
    log = tmp_path / "q.txt"
    log.write_bytes(b"fine query\ncaf\xe9 menu\n")
    rc = cli.main(["golden", "import-queries", str(log), "--golden", str(tmp_path / "g.jsonl")])
    err = capsys.readouterr().err
    assert rc != 0 and err.splitlines()[0].startswith(f"error: {log}:2: not UTF-8 (byte 0xe9")


DOC = "Passwords are reset from Settings, Account, Reset password. Exports: choose CSV in the menu."


def hit(start: int, end: int, rank: int = 1) -> dict:
    return {"chunk_id": f"k{start}", "doc_id": "help.md", "source_uri": "help.md", "start": start, "end": end,
            "text": DOC[start:end], "doc_hash": "h1", "rank": rank}


def retrieve(query: str) -> list[dict]:
    return [hit(0, 59), hit(60, len(DOC), 2)]


def test_pooled_labelling_then_unanswerable_share_and_segments(stub, tmp_path, capsys):
    golden = tmp_path / "g.jsonl"
    iq.import_queries(golden, write_jsonl(tmp_path / "log.jsonl", LOG), size=4)
    # the LLM judge (through the API stub): the password passage answers the head query, nothing else
    stub.responder = lambda body: text({"verdict": "YES" if "password" in prompt_of(body).lower().split("passage")[0]
                                        and "Passwords" in prompt_of(body) else "NO", "reason": "r"})
    plan = plan_labelling(golden, retrieve, k=2, model="claude-sonnet-4-5")
    assert len(plan.jobs) == 8  # 4 cases x 2 passages: nothing is skipped for lack of evidence
    report = run_labelling(plan, client_for(stub))
    assert report.judgements_appended == 8
    g = load_golden(golden)
    assert [c.stratum for c in g.scorable] == ["head"] and len(g.cases) == 4
    shares = iq.unanswered_share(g)
    assert shares["all"] == {"answered": 1, "unanswerable": 3, "unlabelled": 0, "share": 0.75}
    assert shares["head"]["share"] == 0.0 and shares["torso"]["unanswerable"] == 2

    # evaluation scores the answered case, reports the others, and segments by stratum
    case = g.scorable[0]
    ranked = RankedList(case.query, tuple(Hit(chunk_id=h["chunk_id"], doc_id=h["doc_id"], source_uri=h["source_uri"],
                                              doc_type="help", start=h["start"], end=h["end"], score=1.0 / h["rank"],
                                              rank=h["rank"]) for h in retrieve(case.query)))
    result = evaluate(g, {case.case_id: ranked})
    assert result.n_cases == 1 and len(result.unanswered) == 3
    assert result.metrics["recall_at_5.production-head"] == 1.0

    assert cli.main(["golden", "stats", "--golden", str(golden)]) == 0
    out = capsys.readouterr().out
    assert "does the corpus answer them?" in out and "75%" in out


def test_labelling_by_hand_answers_an_imported_query(tmp_path):
    golden = tmp_path / "g.jsonl"
    iq.import_queries(golden, write_jsonl(tmp_path / "log.jsonl", LOG[:3]), size=1)
    plan = hl.plan_hand_labelling(golden, retrieve, k=2)
    assert len(plan.offers) == 2
    hl.run_terminal(plan, labeller="ana", stdin=io.StringIO("y\nn\n"), console=_quiet())
    g = load_golden(golden)
    assert len(g.scorable) == 1 and g.scorable[0].judge_kinds == {"human"}
    assert iq.unanswered_share(g)["all"]["answered"] == 1


def _quiet():
    from rich.console import Console

    return Console(file=io.StringIO())


def test_only_production_cases_may_lack_evidence(tmp_path):
    from rag_experiments.errors import GoldenSetError

    rec = {"type": "case", "id": "c-1", "query": "q", "kind": "paraphrase", "doc_type": "x", "evidence": [],
           "provenance": {"method": "human"}}
    with pytest.raises(GoldenSetError, match="has no evidence"):
        GoldenFile(tmp_path / "g.jsonl").append([rec])
    with pytest.raises(GoldenSetError, match="'stratum' must be a non-empty string"):
        GoldenFile(tmp_path / "g.jsonl").append([{**rec, "kind": "production", "stratum": 3}])


def test_a_real_run_leaves_unanswered_queries_out_and_logs_their_count(project, mini_golden):
    """A run on a golden set holding imported queries nobody labelled yet: scored on the other
    cases, the count logged (golden.unanswered_queries), the ids in golden_excluded.json."""
    import mlflow
    from mlflow.tracking import MlflowClient

    from rag_experiments.config import settings_from_cfg
    from rag_experiments.experiment import run_experiment
    from rag_experiments.pipeline import log_result

    from ..test_config import _compose
    from ..test_pipeline import _mini_overrides

    before = len(load_golden(mini_golden).scorable)
    log = project / "q.txt"
    log.write_text("what is the meaning of life\nwhere is the cafeteria\n", encoding="utf-8")
    iq.import_queries(mini_golden, log, size=2)
    cfg = _compose(_mini_overrides(mini_golden, "tracking.plots=false"))
    result = run_experiment(settings_from_cfg(cfg))
    assert result.eval.n_cases == before and len(result.eval.unanswered) == 2
    run_id = log_result(result, cfg, "imported")
    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    assert MlflowClient().get_run(run_id).data.metrics["golden.unanswered_queries"] == 2.0
    excluded = mlflow.artifacts.load_dict(f"runs:/{run_id}/golden_excluded.json")
    assert sorted(excluded["unanswered_cases"]) == sorted(result.eval.unanswered)
