"""Run export to TREC files, and the agreement of our document-level metrics with ir_measures
(pytrec_eval underneath) on the exported run + qrels.

Which qrels: our nDCG uses the golden grades (2 = highly relevant, 1 = partially; for Cranfield
grades 1-2 -> 2, grades 3-4 -> 1), so the agreement check scores ``qrels.trec`` (written with
those grades). ``qrels.original.trec`` carries the collection's own gains (Cranfield
``5 - grade``: 4, 3, 2, 1): on it recall@100 and RR@10 are *identical* (the same documents are
relevant, and both measures ignore grades), while nDCG@10 differs (it weights the four Cranfield
levels instead of two); that is the number to compare with published graded trec_eval results.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path

import pandas as pd
import pytest

from rag_experiments.benchmarks.beir import import_beir
from rag_experiments.benchmarks.trec import import_trec
from rag_experiments.errors import GoldenSetError, UserError
from rag_experiments.golden.resolve import load_golden
from rag_experiments.tracking.export import RANKED_DOCS, export_run, write_trec

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "benchmarks"
MEASURES = {"ndcg_at_10": "nDCG@10", "recall_at_100": "R@100", "mrr_at_10": "RR@10"}


def cranfield_dir() -> Path | None:
    for p in (ROOT / ".." / "shared" / "data" / "cranfield", Path("/work/shared/data/cranfield")):
        if (p / "cran.all.1400").is_file():
            return p.resolve()
    return None


@pytest.fixture
def tiny_beir(tmp_path) -> Path:
    import_beir(FIXTURES / "beir_tiny", tmp_path / "bench" / "corpus", tmp_path / "bench" / "golden.jsonl", name="tiny")
    return tmp_path / "bench" / "golden.jsonl"


def _per_case(golden_path: Path, ranked: dict[str, list[str]]) -> pd.DataFrame:
    golden = load_golden(golden_path)
    qid = {r.id: r.raw["benchmark"]["query_id"] for r in golden.records}
    rows = [{"case_id": c.case_id, "kind": c.kind, RANKED_DOCS: ranked.get(qid[c.case_id], []),
             "ranked_scores": [0.5] * len(ranked.get(qid[c.case_id], []))} for c in golden.scorable]
    return pd.DataFrame(rows)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_write_trec_run_and_qrels(tmp_path, tiny_beir):
    golden = load_golden(tiny_beir)
    per_case = _per_case(tiny_beir, {"q1": ["d2", "d1", "8"], "q2": ["d4"], "q3": ["d6", "d5"]})
    report = write_trec(per_case, golden, tmp_path / "x", run_id="r" * 32, tag="mytag")
    assert _lines(report.files["run"]) == [
        "q1 Q0 d2 1 3 mytag", "q1 Q0 d1 2 2 mytag", "q1 Q0 8 3 1 mytag",  # scores strictly decrease
        "q2 Q0 d4 1 1 mytag", "q3 Q0 d6 1 2 mytag", "q3 Q0 d5 2 1 mytag",
    ]
    assert _lines(report.files["qrels"]) == [
        "q1 0 d1 2", "q1 0 d2 1", "q2 0 d3 1", "q2 0 d4 2", "q3 0 d5 2", "q3 0 d6 2", "q4 0 d7 1"]
    assert report.files["qrels_original"].exists()  # BEIR scores 1/2: the same gains here
    assert any("retrieved nothing" in w and "q4" in w for w in report.warnings)
    assert "trec_eval -c" in report.summary()
    logged = write_trec(per_case, golden, tmp_path / "y", run_id="r" * 32, tag="t", scores="logged")
    assert _lines(logged.files["run"])[0] == "q1 Q0 d2 1 0.500000 t"


def test_original_qrels_keep_the_collection_gains(tmp_path):
    import_trec(FIXTURES / "smart_tiny", tmp_path / "c", tmp_path / "g.jsonl", name="tiny")
    golden = load_golden(tmp_path / "g.jsonl")
    report = write_trec(_per_case(tmp_path / "g.jsonl", {"1": ["1"]}), golden, tmp_path / "x", run_id="r" * 32, tag="t")
    # Cranfield grade 1 -> gain 4 (golden 2), grade 3 -> gain 2 (golden 1), grade 4 -> gain 1 (golden 1)
    assert _lines(report.files["qrels"]) == ["1 0 1 2", "1 0 5 1", "2 0 2 2", "3 0 3 2", "3 0 1 1"]
    assert _lines(report.files["qrels_original"]) == ["1 0 1 4", "1 0 5 2", "2 0 2 3", "3 0 3 4", "3 0 1 1"]


def test_chunk_level_tables_and_missing_columns_are_refused(tmp_path, tiny_beir):
    golden = load_golden(tiny_beir)
    with pytest.raises(UserError, match="only document-level runs"):
        write_trec(_per_case(tiny_beir, {"q1": ["d1", "d1"]}), golden, tmp_path, run_id="r" * 32, tag="t")
    with pytest.raises(UserError, match="no 'ranked_docs' column"):
        write_trec(_per_case(tiny_beir, {}).drop(columns=[RANKED_DOCS]), golden, tmp_path, run_id="r" * 32, tag="t")


# -- reading runs back from MLflow ------------------------------------------------------------------
@pytest.fixture
def mlflow_home(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    from rag_experiments.tracking.mlflow_run import setup

    return setup(None, "rag-experiments")


def _log_run(exp_id: str, per_case: pd.DataFrame, golden_path: str, sha: str, level: str = "document") -> str:
    import mlflow
    import yaml

    tags = {"golden_sha256": sha, "eval_level": level, "variant": "hybrid"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mlflow.start_run(experiment_id=exp_id, run_name="tiny hybrid", tags=tags) as run:
            mlflow.log_text(yaml.safe_dump({"golden": {"path": golden_path}, "eval": {"level": level}}), "config.yaml")
            mlflow.log_table(per_case, artifact_file="per_case.json")
    return run.info.run_id


def test_export_run_from_mlflow_checks_the_golden_version(tmp_path, tiny_beir, mlflow_home, capsys):
    from rag_experiments.cli import main

    sha = hashlib.sha256(tiny_beir.read_bytes()).hexdigest()
    per_case = _per_case(tiny_beir, {"q1": ["d1"], "q2": ["d4", "d3"], "q3": ["d5"], "q4": ["d7"]})
    run_id = _log_run(mlflow_home, per_case, "bench/golden.jsonl", sha)  # relative to the project root
    report = export_run(run_id)
    assert report.out == tmp_path / "exports" / run_id
    assert _lines(report.files["run"])[:2] == ["q1 Q0 d1 1 1 tiny_hybrid", "q2 Q0 d4 1 2 tiny_hybrid"]
    assert main(["export-run", run_id, "--format", "trec", "--out", str(tmp_path / "cli"), "--tag", "T"]) == 0
    assert (tmp_path / "cli" / "qrels.trec").exists() and "run.trec" in capsys.readouterr().out

    stale = _log_run(mlflow_home, per_case, "bench/golden.jsonl", "0" * 64)
    with pytest.raises(GoldenSetError, match="refusing to export qrels"):
        export_run(stale)
    assert main(["export-run", stale]) == 2
    chunk = _log_run(mlflow_home, per_case, str(tiny_beir), sha, level="chunk")
    with pytest.raises(UserError, match="evaluated at chunk level"):
        export_run(chunk)
    no_column = _log_run(mlflow_home, per_case.drop(columns=[RANKED_DOCS]), str(tiny_beir), sha)
    with pytest.raises(UserError, match="ranked_docs"):
        export_run(no_column)
    with pytest.raises(UserError, match="not an MLflow run id"):
        export_run("nope")


# -- our metrics = ir_measures on the exported files ----------------------------------------------------
def run_and_check(overrides: list[str]) -> dict[str, dict[str, float]]:
    """Run an experiment, log it, export it, score the files with ir_measures; assert agreement
    (aggregates and every query) and return {qrels file: {our metric: value}}."""
    import ir_measures  # a test dependency: missing means the cross-check fails, never skips
    from mlflow.tracking import MlflowClient

    from rag_experiments.config import settings_from_cfg
    from rag_experiments.experiment import run_experiment
    from rag_experiments.pipeline import log_result
    from rag_experiments.paths import tracking_uri

    from ..test_config import _compose

    cfg = _compose(overrides)
    result = run_experiment(settings_from_cfg(cfg))
    assert RANKED_DOCS in result.eval.per_case.columns  # logged by evaluate.py (top 100 doc ids)
    run_id = log_result(result, cfg, "export-check")
    report = export_run(run_id)
    logged = MlflowClient(tracking_uri=tracking_uri()).get_run(run_id).data.metrics
    measures = [ir_measures.parse_measure(m) for m in MEASURES.values()]
    run = list(ir_measures.read_trec_run(str(report.files["run"])))
    out: dict[str, dict[str, float]] = {}
    for role in ("qrels", "qrels_original"):
        qrels = list(ir_measures.read_trec_qrels(str(report.files[role])))
        agg = ir_measures.calc_aggregate(measures, qrels, run)
        out[role] = {ours: agg[ir_measures.parse_measure(theirs)] for ours, theirs in MEASURES.items()}
        if role == "qrels":
            for ours in MEASURES:
                assert logged[ours] == pytest.approx(out[role][ours], abs=1e-9), ours
            per_query = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures, qrels, run)}
            golden = load_golden(result.settings.golden.file)
            qid = {r.id: r.raw["benchmark"]["query_id"] for r in golden.records}
            for row in result.eval.per_case.itertuples():
                for ours, theirs in MEASURES.items():
                    assert getattr(row, ours) == pytest.approx(per_query[(qid[row.case_id], theirs)], abs=1e-9)
    # the same documents are relevant in both files: only nDCG depends on the gains
    assert out["qrels_original"]["recall_at_100"] == pytest.approx(out["qrels"]["recall_at_100"], abs=1e-12)
    assert out["qrels_original"]["mrr_at_10"] == pytest.approx(out["qrels"]["mrr_at_10"], abs=1e-12)
    return out


@pytest.mark.parametrize("variant", ["hybrid", "keyword"])
def test_tiny_benchmark_metrics_equal_ir_measures(project, variant):
    golden = project / "benchmarks" / "tiny" / "golden.jsonl"
    import_beir(FIXTURES / "beir_tiny", golden.parent / "corpus", golden, name="tiny")
    out = run_and_check([
        "experiment=beir", f"corpus.path={golden.parent / 'corpus'}", "corpus.name=tiny", f"golden.path={golden}",
        f"retrieval={variant}", "chunking.max_tokens=32", "chunking.overlap=8", "progress=false",
        "eval.bootstrap_samples=50", "tracking.plots=false",
    ])
    assert 0 < out["qrels"]["ndcg_at_10"] <= 1


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("RAG_EXP_SLOW") != "1", reason="slow (2-5 min: embeds 1838 chunks): set RAG_EXP_SLOW=1")
@pytest.mark.skipif(cranfield_dir() is None, reason="Cranfield collection not found (../shared/data/cranfield)")
def test_cranfield_metrics_equal_ir_measures(project):
    bench = project / "benchmarks" / "cranfield"
    import_trec(cranfield_dir(), bench / "corpus", bench / "golden.jsonl", name="cranfield")
    out = run_and_check(["experiment=cranfield", "retrieval=hybrid", "progress=false",
                         "eval.bootstrap_samples=100", "tracking.plots=false"])  # preset paths, under RAG_EXP_HOME
    # sanity against the collection's reference figures (BM25: MRR@10 ~0.53, recall@100 ~0.74)
    assert out["qrels"]["mrr_at_10"] > 0.4 and out["qrels"]["recall_at_100"] > 0.6
    print({k: {m: round(v, 4) for m, v in d.items()} for k, d in out.items()})


def test_export_after_the_golden_set_grew_uses_the_runs_version(tmp_path, tiny_beir, mlflow_home):
    """The run's version is a prefix of the grown file: its labels are exported, not the newer ones."""
    from rag_experiments.golden.golden_file import GoldenFile
    from rag_experiments.golden.versions import current_version

    version = current_version(tiny_beir)
    per_case = _per_case(tiny_beir, {"q1": ["d1"], "q2": ["d4", "d3"], "q3": ["d5"], "q4": ["d7"]})
    run_id = _log_run(mlflow_home, per_case, str(tiny_beir), version.sha256)
    before = _lines(export_run(run_id, tmp_path / "before").files["qrels"])
    case = load_golden(tiny_beir).cases[0]
    GoldenFile(tiny_beir).append([{"type": "judgement", "id": "j-late", "case_id": case.case_id,
                                   "span": case.relevant[0].span.to_json(), "verdict": "PART",
                                   "judge": {"kind": "human", "name": "qa"}}])  # a later re-grade
    after = _lines(export_run(run_id, tmp_path / "after").files["qrels"])
    assert after == before


def test_export_refuses_a_killed_run(tmp_path, tiny_beir, mlflow_home):
    """Sibling of the stuck-RUNNING class: a run whose process died is not exported as if complete."""
    from mlflow.tracking import MlflowClient

    sha = hashlib.sha256(tiny_beir.read_bytes()).hexdigest()
    per_case = _per_case(tiny_beir, {"q1": ["d1"], "q2": ["d4", "d3"], "q3": ["d5"], "q4": ["d7"]})
    run_id = _log_run(mlflow_home, per_case, "bench/golden.jsonl", sha)
    MlflowClient().set_terminated(run_id, status="KILLED")
    with pytest.raises(UserError, match="is KILLED, not FINISHED"):
        export_run(run_id)
