"""`gate --set` without `--run-now` is refused in one line (issue 55 probe 8): the overrides
configure the run --run-now starts, and alone they were silently ignored (the gate then checked
the newest run as if they applied)."""

from __future__ import annotations

from .conftest import cli


def test_set_without_run_now_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    assert cli("gate", "--set", "retrieval=keyword") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == ("error: --set retrieval=keyword: overrides apply to the run --run-now starts; without "
                      "--run-now nothing runs")
    assert len(err) == 2 and "add --run-now" in err[1]
    assert cli("gate", "--run", "abc", "--set", "fusion.rrf_k=30") == 2
    assert "without --run-now nothing runs" in capsys.readouterr().err
