"""The champion's value on the newest golden version, next to its value of record (issue 48 item 1).

Real golden file (the mini corpus's cases) that grows by a version (a label added to a case the
champion scored, a production case appended), real MLflow store, real evaluation; the champion's
ranked lists are rescored, from its run in the store or, in a store that never saw it, from the
``experiments/promoted/default.run.trec.gz`` promote committed beside its record.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.golden.resolve import load_golden
from rag_experiments.tracking.champion_newest import PREFIX, TAG, ranked_path

from .conftest import cli
from .golden_runs import log_golden_run
from .test_golden_versions import golden, golden_add  # noqa: F401 - fixtures


def _second_label(path: Path) -> str:
    """A second relevant passage for the first case, in its document but away from its evidence:
    a run that ranks only the evidence now finds half of what is relevant (recall@5 1 -> 0.5)."""
    case = load_golden(path).cases[0]
    span = case.relevant[0].span
    start = span.end + 400
    text = (Path(__file__).resolve().parents[1] / "fixtures" / "mini_corpus"
            / Path(span.source_uri).with_suffix(".md").name).read_text(encoding="utf-8")
    assert len(text) > start + 200, "the fixture document is too short for a second span"
    second = {**span.to_json(), "start": start, "end": start + 200, "quote": text[start:start + 200]}
    GoldenFile(path).append([{"type": "judgement", "id": "j-second", "case_id": case.case_id, "span": second,
                              "verdict": "YES", "judge": {"kind": "human", "name": "qa"}}])
    return case.case_id


def _grow(path: Path, golden_add) -> int:
    """The golden set's next version: one label added to a shared case, one production case appended."""
    _second_label(path)
    golden_add(path)
    return len(load_golden(path).records)


@pytest.fixture
def champion_then_growth(golden, golden_add):  # noqa: F811
    path, exp = golden
    champ = log_golden_run(path, name="champion", exp_id=exp)  # recall@5 1.0 on the 10 cases
    assert cli("promote") == 0
    records = _grow(path, golden_add)
    return path, exp, champ, records


def test_promote_and_the_gate_show_the_champion_rescored_on_the_newest_version(champion_then_growth, tmp_path,
                                                                               capsys):
    path, exp, champ, records = champion_then_growth
    now = log_golden_run(path, name="nightly", exp_id=exp)
    capsys.readouterr()
    assert cli("promote", "--dry-run") == 1  # a tie on the shared cases: refused
    raw = capsys.readouterr().out
    out = " ".join(raw.split())
    newest = load_golden(path).digest[:12]
    head = [line for line in raw.splitlines() if line.startswith("┃")]  # the column's header on two lines
    assert "┃ champion, ┃" in " ".join(head[0].split()) and "┃ newest golden ┃" in " ".join(head[1].split()), raw
    assert "recall@5 │ 1.000 │ 0.950 │" in out, out  # of record, on the newest version, ...
    assert ("the champion's recall@5 of record, 1.0000, was measured on golden" in out
            and f"on the newest version, golden {newest} ({records} records), it is 0.9500 on the 10 cases the "
                "versions share (newest labels; rescored from run" in out), out
    assert "1 case(s) added since were never retrieved by it" in out
    summary = tmp_path / "summary.md"
    assert cli("gate", "--run", now, "--markdown-summary", str(summary)) == 0
    md = summary.read_text(encoding="utf-8")
    assert "| check | champion | champion, newest golden | current |" in md, md
    assert "| recall@5 | 1.000 | 0.950 | 1.000 |" in md, md


def test_the_champions_row_says_its_value_on_the_newest_version(champion_then_growth, capsys):
    path, exp, champ, records = champion_then_growth
    from rag_experiments.serving.model_logging import ensure_registered

    ensure_registered("default")  # what every single run does after logging
    c = MlflowClient()
    tags = c.get_run(champ).data.tags
    newest = load_golden(path).digest
    assert tags[TAG] == f"0.9500 = recall@5 on golden {newest[:12]} ({records} records), 10 shared cases", tags
    assert tags[PREFIX + "golden_sha256"] == newest and tags[PREFIX + "cases"] == "10"
    assert tags[PREFIX + "rescored_from"] == f"run {champ[:12]} run.trec"
    assert tags[PREFIX + "recall_at_5"] == "0.950000"
    mv = c.get_model_version_by_alias("rag-retriever-default", "champion")
    assert mv.tags[TAG] == tags[TAG]
    assert c.get_run(champ).info.run_name == f"champion (older golden {champ_sha(champ)[:8]}; 0.9500 on the newest): champion"
    now = log_golden_run(path, name="nightly", exp_id=exp)
    capsys.readouterr()
    for args in ((), ("--markdown",)):  # compare's tables say it too, under the table
        assert cli("compare", champ, now, *args) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert f"is the champion; on the newest golden version: {tags[TAG]}" in out, out


def test_a_fresh_store_rescores_the_champion_of_record_from_its_committed_ranked_lists(champion_then_growth,
                                                                                      monkeypatch, tmp_path):
    """A fresh clone's store never saw the champion's run: its stand-in is rescored from the ranked
    lists promote committed beside the record, and says so."""
    path, exp, champ, records = champion_then_growth
    import mlflow

    from rag_experiments.serving.model_logging import ensure_registered

    assert ranked_path("default").is_file()  # written by promote, beside default.record.json
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(_template(), fresh / "mlflow.db")
    uri = f"sqlite:///{fresh / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    ensure_registered("default")
    c = MlflowClient(uri)
    mv = c.get_model_version_by_alias("rag-retriever-default", "champion")
    assert mv.run_id != champ  # the stand-in
    tags = c.get_run(mv.run_id).data.tags
    assert tags[TAG].startswith("0.9500 = recall@5 on golden "), tags
    assert tags[PREFIX + "rescored_from"] == "experiments/promoted/default.run.trec.gz"
    from rag_experiments.tracking.champion import read_record

    assert tags["measured_on"].startswith(f"golden {read_record('default').run.golden[:12]}")  # the value of record's


def test_a_champion_without_ranked_lists_says_it_is_not_rescored(champion_then_growth, monkeypatch, tmp_path):
    path, exp, champ, records = champion_then_growth
    import mlflow

    from rag_experiments.serving.model_logging import ensure_registered

    ranked_path("default").unlink()
    uri = f"sqlite:///{tmp_path / 'fresh.db'}"
    shutil.copy(_template(), tmp_path / "fresh.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    ensure_registered("default")
    c = MlflowClient(uri)
    mv = c.get_model_version_by_alias("rag-retriever-default", "champion")
    text = c.get_run(mv.run_id).data.tags[TAG]
    assert text.startswith(f"not rescored on golden {load_golden(path).digest[:12]}") and "no ranked lists" in text
    # the runs list's first column says it first (issue 59): not the last, cut-off tag columns
    from rag_experiments.tracking.champion import read_record

    name = c.get_run(mv.run_id).info.run_name
    older = read_record("default").run.golden[:8]
    assert name.startswith(f"champion (older golden {older}, not rescored): hybrid, heading-200, "), name


def champ_sha(run_id: str) -> str:
    return MlflowClient().get_run(run_id).data.tags["golden_sha256"]


_TEMPLATE: list[Path] = []


@pytest.fixture(autouse=True)
def _keep_template(_template_db):
    _TEMPLATE[:] = [_template_db]


def _template() -> Path:
    return _TEMPLATE[0]
