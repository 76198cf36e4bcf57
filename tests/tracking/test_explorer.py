"""The case explorer (issue 59 item 1): its data from two runs' lists and the golden set, its
escaping, and compare logging it beside the W/T/L with ``rag-exp explore`` writing the same page.

Runs are real MLflow runs over the mini golden set and the mini corpus (no database): ranked lists
made of spans, evaluated by the real :func:`evaluate` and logged as a run logs them."""

from __future__ import annotations

import json
import re
import warnings
from types import SimpleNamespace

import pytest

from rag_experiments.evaluation.evaluate import evaluate
from rag_experiments.golden.build import span_json
from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.golden.records import new_id
from rag_experiments.golden.resolve import load_golden
from rag_experiments.tracking.explorer import Side, explorer_data, render
from rag_experiments.types import Hit, RankedList

from ..conftest import FIXTURES, build_mini_golden
from .conftest import aggregate, base_config, cli
from .golden_runs import bad, filler, good


def _judge(path, docs, case_id: str, doc_id: str, start: int, end: int, verdict: str, who: str) -> None:
    doc = next(d for d in docs if d.doc_id == doc_id)
    GoldenFile(path).append([{"type": "judgement", "id": new_id("j", case_id, doc_id, start, end, verdict),
                              "case_id": case_id, "span": span_json(doc, start, end), "verdict": verdict,
                              "judge": {"kind": "human", "name": who}, "reason": "test"}])


def _lists(golden, pick):
    """case id -> ranked list; ``pick(case)`` gives its hits."""
    return {c.case_id: RankedList(c.query, tuple(pick(c))) for c in golden.scorable}


def _with_second(case, second: Hit):
    first = good(case)[0]
    return (first, Hit(second.chunk_id, second.doc_id, second.source_uri, second.doc_type, second.start, second.end,
                       1.5, 2), *filler(18, 3))


@pytest.fixture
def labelled(tmp_path, mini_docs):
    """The mini golden set with two extra judgements on the first case: a passage judged PART and
    one judged NO, each by a named person. (golden, first case, the PART hit, the NO hit)."""
    path = build_mini_golden(tmp_path / "mini.jsonl", mini_docs)
    first = load_golden(path).scorable[0]
    ev = first.relevant[0].span
    doc = next(d for d in mini_docs if d.doc_id == ev.doc_id)
    part = (ev.end + 10, min(len(doc.text), ev.end + 200))
    no = (0, min(ev.start, 120)) if ev.start > 60 else (len(doc.text) - 150, len(doc.text))
    _judge(path, mini_docs, first.case_id, ev.doc_id, *part, "PART", "ann")
    _judge(path, mini_docs, first.case_id, ev.doc_id, *no, "NO", "bob")
    golden = load_golden(path)
    hit = lambda s, e, cid: Hit(cid, ev.doc_id, ev.source_uri, first.doc_type, s, e, 1.0, 1)  # noqa: E731
    return path, golden, golden.scorable[0], hit(*part, "part"), hit(*no, "no")


def test_cases_are_lost_first_then_won_with_each_hits_verdict_rank_elsewhere_and_labeller(labelled, mini_docs):
    path, golden, first, part_hit, no_hit = labelled
    cases = golden.scorable
    lost, won = cases[1].case_id, cases[2].case_id
    # A: the evidence first everywhere except `won`; B: misses `lost`; both put a PART passage second on the first case
    a_lists = _lists(golden, lambda c: bad(c) if c.case_id == won else
                     _with_second(c, part_hit) if c.case_id == first.case_id else good(c))
    b_lists = _lists(golden, lambda c: bad(c) if c.case_id == lost else
                     _with_second(c, part_hit) if c.case_id == first.case_id else good(c))
    a = evaluate(golden, a_lists).per_case
    b = evaluate(golden, b_lists).per_case
    texts = {d.doc_id: d.text for d in mini_docs}
    data = explorer_data(Side("hybrid", a, a_lists), Side("vector", b, b_lists), golden, texts, "recall_at_5")

    order = [(c["id"], c["o"]) for c in data["cases"]]
    assert order[0] == (lost, "lost") and order[1] == (won, "won")
    assert {o for _, o in order[2:]} == {"tied"} and len(order) == len(cases)
    assert data["counts"] == {"lost": 1, "won": 1, "tied": len(cases) - 2}
    top = data["cases"][0]
    assert top["q"] == cases[1].query and top["kind"] == cases[1].kind and top["seg"] == cases[1].doc_type
    assert (top["a"], top["b"], top["d"]) == (1.0, 0.0, -1.0)
    # the evidence passage: the labelled span highlighted inside its document's text
    span = cases[1].relevant[0].span
    doc = texts[span.doc_id]
    (ev,) = top["ev"]
    assert ev[5] == doc[span.start:span.end] and doc[:span.start].endswith(ev[4].lstrip("…"))
    # A found it first (relevant, labelled by the case's author); B's list holds nothing judged
    a_hit = top["A"][0]
    assert a_hit[1] == 2 and data["passages"][a_hit[0]][3].startswith(doc[span.start:span.start + 40])
    assert data["provenance"][a_hit[3]] == "the case's evidence (human, tests)"
    assert a_hit[2] is None  # not in B's list
    assert all(h[1] is None and h[3] is None for h in top["B"]) and top["u"]
    # the first case: B's second hit is the passage ann judged PART; A's first hit is at rank 1 in B
    case1 = next(c for c in data["cases"] if c["id"] == first.case_id)
    assert case1["A"][0][2] == 1 and case1["B"][1][1] == 1
    assert data["provenance"][case1["B"][1][3]] == "a judgement by human: ann"
    # a NO judgement reads as 'not'
    b_no = _lists(golden, lambda c: _with_second(c, no_hit))
    data_no = explorer_data(Side("a", a, a_lists), Side("b", evaluate(golden, b_no).per_case, b_no), golden, texts,
                            "recall_at_5")
    first_no = next(c for c in data_no["cases"] if c["id"] == first.case_id)
    assert first_no["B"][1][1] == 0 and data_no["provenance"][first_no["B"][1][3]] == "a judgement by human: bob"


HOSTILE_Q = 'why </script><script>window.__pwned=1</script> <img src=x onerror="window.__pwned=1"> & <!--'
HOSTILE_P = "a passage </SCRIPT><script>window.__pwned=2</script>\u2028 end"


def hostile_page() -> tuple[str, dict]:
    """A page whose question, passage, labels and run names all carry markup that would run if
    written into the page unescaped."""
    per_case = lambda v: __import__("pandas").DataFrame(  # noqa: E731
        {"case_id": ["c-1"], "query": [HOSTILE_Q], "kind": ["<b>exact</b>"], "doc_type": ["</script>"],
         "recall_at_5": [v], "first_relevant_rank": [1 if v else None]})
    from rag_experiments.golden.resolve import EvalCase, Evidence, GoldenSet
    from rag_experiments.golden.records import Span

    end = 2 + len(HOSTILE_P)
    span = Span("d</script>", "d</script>", 2, end, HOSTILE_P, "h")
    case = EvalCase("c-1", HOSTILE_Q, "<b>exact</b>", "</script>", (Evidence(span, 2, "c-1#0"),))
    golden = GoldenSet(path=FIXTURES, digest="x", cases=(case,))
    lists = {"c-1": RankedList(HOSTILE_Q, (Hit("h", "d</script>", "d</script>", "t", 2, end, 1.0, 1),))}
    texts = {"d</script>": "xx" + HOSTILE_P + " and more text after it"}
    data = explorer_data(Side("<script>a</script>", per_case(1.0), lists), Side("b</script>", per_case(0.0), {}),
                         golden, texts, "recall_at_5")
    return render(data), data


def test_every_text_is_escaped_so_passages_cannot_inject_markup():
    page, data = hostile_page()
    # only the page's own two script elements open and close; the title is HTML-escaped
    assert len(re.findall(r"<script", page, re.I)) == 2 and len(re.findall(r"</script", page, re.I)) == 2
    assert "<img" not in page and "<!--" not in page and "\u2028" not in page
    assert "&lt;script&gt;a&lt;/script&gt;" in page  # a run name in the <title> and <h1>
    blob = page.split('<script type="application/json" id="explorer-data">', 1)[1].split("</script>", 1)[0]
    back = json.loads(blob)  # the escapes are JSON: the data reads back unchanged
    assert back["cases"][0]["q"] == HOSTILE_Q and HOSTILE_P in back["passages"][0][3]
    assert back["cases"] == json.loads(json.dumps(data["cases"]))
    assert "innerHTML" not in page and "localStorage" not in page  # textContent only; the iframe has no origin


def log_mini_run(golden_path, pick, name: str) -> str:
    """A run over the mini golden set and the mini corpus, logged as a run logs itself."""
    import mlflow
    import yaml

    from rag_experiments.tracking.mlflow_run import (flatten, golden_lines_artifact, golden_version_tags, log_files,
                                                     run_file_artifact)

    golden = load_golden(golden_path)
    results = _lists(golden, pick)
    per_case = evaluate(golden, results).per_case
    cfg = base_config(**{"golden.path": str(golden_path), "corpus.path": str(FIXTURES / "mini_corpus"),
                         "corpus.name": "mini", "retrieval.variant": name})
    tags = {"variant": name, "corpus_digest": "c" * 64, "golden_set": golden_path.name, **golden_version_tags(golden)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mlflow.start_run(run_name=name, tags=tags) as run:
            mlflow.log_params(flatten(cfg))
            mlflow.log_text(yaml.safe_dump(cfg, sort_keys=False), "config.yaml")
            mlflow.log_metrics(aggregate(per_case))
            mlflow.log_table(per_case, artifact_file="per_case.json")
            files = golden_lines_artifact(golden)
            files.update(run_file_artifact(SimpleNamespace(results=results), name))
            log_files(mlflow.tracking.MlflowClient(), run.info.run_id, files)
    return run.info.run_id


def pair_of_runs(root, mini_docs) -> tuple[str, str, str, str]:
    """(hybrid run, vector run, the case vector lost, the case it won) over the mini set in ``root``."""
    path = build_mini_golden(root / "mini.jsonl", mini_docs)
    cases = load_golden(path).scorable
    lost, won = cases[0].case_id, cases[1].case_id
    a = log_mini_run(path, lambda c: bad(c) if c.case_id == won else good(c), "hybrid")
    b = log_mini_run(path, lambda c: bad(c) if c.case_id == lost else good(c), "vector")
    return a, b, lost, won


def test_compare_logs_the_explorer_to_the_candidate_and_links_it_beside_wtl(store, mini_docs, capsys, tmp_path):
    from mlflow.tracking import MlflowClient

    root, exp_id = store
    a, b, lost, _ = pair_of_runs(root, mini_docs)
    assert cli("compare", a, b) == 0
    out = capsys.readouterr().out
    name = f"explorer/cases_vs_{a[:8]}.html"
    link = next(ln for ln in out.splitlines() if ln.startswith("MLflow UI, the cases behind W/T/L"))
    n = len(load_golden(root / "mini.jsonl").scorable)
    assert f"W/T/L 1/{n - 2}/1 of retrieval=vector vs retrieval=hybrid (lost first)" in link
    assert f"#/experiments/{exp_id}/runs/{b}/artifacts/{name}?workflowType=machine_learning" in link
    logged = MlflowClient().download_artifacts(b, name, str(tmp_path))
    page = open(logged, encoding="utf-8").read()
    assert lost in page
    # rag-exp explore writes the same page
    assert cli("explore", a, b, "--out", str(tmp_path / "local.html")) == 0
    assert (tmp_path / "local.html").read_text(encoding="utf-8") == page
    assert "W/T/L 1/" in capsys.readouterr().out
    assert cli("compare", a, b, "--no-explorer") == 0
    assert "the cases behind" not in capsys.readouterr().out


def test_a_sweeps_best_point_against_each_point_is_logged_to_the_parent_and_linked(store, mini_docs, tmp_path):
    """The sweep parent's pages (tracking.explorer.sweep_lines, called by the sweep callback): the
    best point against each other point, logged to the parent, one Markdown line linking them."""
    from mlflow.tracking import MlflowClient

    from rag_experiments.tracking.compare import build_comparison
    from rag_experiments.tracking.explorer import sweep_lines
    from rag_experiments.tracking.runs import get_run

    root, exp_id = store
    a, b, lost, _ = pair_of_runs(root, mini_docs)
    c = MlflowClient()
    parent = c.create_run(exp_id, run_name="sweep").info.run_id
    runs = [get_run(a), get_run(b)]
    cmp = build_comparison(runs, primary="recall_at_5", labels=["hybrid", "vector"])
    (line,) = sweep_lines(cmp, runs[0], parent, c)
    name = f"explorer/best_vs_{b[:8]}.html"
    assert line.startswith("Cases side by side, `hybrid` against each point (the cases each lost first): ")
    assert f"[`vector`](#/experiments/{exp_id}/runs/{parent}/artifacts/{name}?workflowType=machine_learning)" in line
    assert "(W/T/L 1/" in line
    assert lost in open(c.download_artifacts(parent, name, str(tmp_path)), encoding="utf-8").read()
