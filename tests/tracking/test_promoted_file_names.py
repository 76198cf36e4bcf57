"""The champion's files are named for its registered model (issue 58 item 5): a project whose
model is rag-retriever-sqlite gets experiments/promoted/sqlite.*, not default.*; files written
before under the old name are still read, and a promotion replaces them."""

from __future__ import annotations

from rag_experiments.tracking.champion import file_stem, legacy_files, model_name, promoted_file, record_path
from rag_experiments.tracking.champion_newest import ranked_path


def test_a_projects_champion_files_carry_the_models_name(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "project.yaml").write_text("defaults:\n  - config\nhydra:\n  job:\n    name: sqlite\n")
    promoted = tmp_path / "experiments" / "promoted"
    assert model_name("default") == "rag-retriever-sqlite" and file_stem("default") == "sqlite"
    assert promoted_file("default", ".yaml") == promoted / "sqlite.yaml"
    assert record_path("default") == promoted / "sqlite.record.json"
    assert ranked_path("default") == promoted / "sqlite.run.trec.gz"
    # promoted before the files were named so: read where they are, replaced by the next promotion
    promoted.mkdir(parents=True)
    (promoted / "default.record.json").write_text("{}")
    assert record_path("default") == promoted / "default.record.json"
    assert record_path("default", for_writing=True) == promoted / "sqlite.record.json"
    assert legacy_files("default", (".yaml", ".record.json")) == [promoted / "default.record.json"]
    # a named champion, and this repository (no project name): as before
    assert record_path("faq") == promoted / "faq.record.json" and legacy_files("faq", (".yaml",)) == []
    (tmp_path / "conf" / "project.yaml").unlink()
    assert promoted_file("default", ".yaml") == promoted / "default.yaml"
