"""Like with like (issue 44, item 6): compare, promote and the gate refuse to pair runs evaluated at two
levels (``eval.level``: chunk / document) or scored on golden versions that are not on one chain, in
one line naming both runs; in a sweep, promote picks its candidate among the champion's level.

Before: ``promote --sweep ... --dry-run`` took a document-level run as the candidate against the
chunk-level champion and called it +0.292, significant; compare and the gate paired such runs too.
Real MLflow store (tests/tracking/conftest.py), real golden file and evaluation (golden_runs.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.tracking.champion import current_champion
from rag_experiments.tracking.runs import get_run

from .conftest import cli, per_case_frame
from .golden_runs import log_golden_run

KINDS = ["paraphrase"] * 40 + ["exact"] * 20
DOCUMENT = {"eval_level": "document"}
CHUNK = {"eval_level": "chunk"}


def _run(make_run, paraphrase_hits: int, exact_hits: int, name: str, **kw) -> str:
    v = np.zeros(60)
    v[:paraphrase_hits] = 1
    v[40:40 + exact_hits] = 1
    return make_run(per_case_frame(v, kinds=KINDS), name=name, **kw)


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def chunk_champion(store, make_run, capsys) -> str:
    champ = _run(make_run, 10, 20, "champion", tags=CHUNK)
    assert cli("promote") == 0
    capsys.readouterr()
    return champ


def test_compare_refuses_runs_of_two_levels_in_one_line(make_run, capsys):
    a = _run(make_run, 10, 20, "chunk run", tags=CHUNK)
    b = _run(make_run, 30, 20, "document run", tags=DOCUMENT)
    assert cli("compare", a, b) == 2  # before: 0, a table pairing the two levels
    err = capsys.readouterr().err
    line = err.splitlines()[0]
    assert line == (f"error: NOT COMPARABLE: run {a[:12]} (chunk run) was evaluated at chunk level and run "
                    f"{b[:12]} (document run) at document level (eval.level): scores at two levels do not pair")
    assert "hint: pair runs of one level: select them with --tag eval_level=chunk" in err
    # a run logged before the tag existed: its eval.level param, else chunk (the default)
    old = _run(make_run, 10, 20, "untagged")
    assert cli("compare", old, a) == 0


def test_promote_in_a_sweep_picks_its_candidate_at_the_champions_level(chunk_champion, make_run, make_parent,
                                                                       capsys):
    parent = make_parent()
    _run(make_run, 40, 20, "document level, best", tags=DOCUMENT, parent=parent)
    chunk = _run(make_run, 30, 20, "chunk level", tags=CHUNK, parent=parent)
    assert cli("promote", "--sweep", parent, "--dry-run") == 0
    out = capsys.readouterr()
    assert f"run {chunk}" in out.out and "would promote" in out.out  # before: the document-level run
    assert "left out 1 run(s) evaluated at document level" in flat(out.err)


def test_promote_refuses_a_sweep_of_another_level_naming_both_runs(chunk_champion, make_run, make_parent, capsys):
    parent = make_parent()
    doc = _run(make_run, 40, 20, "document level", tags=DOCUMENT, parent=parent)
    assert cli("promote", "--sweep", parent, "--dry-run") == 1  # before: 0, "would promote" (+0.5)
    out = flat(capsys.readouterr().out)
    assert "REFUSED" in out and "would promote" not in out, out
    # the champion's run is named so in the runs list (tracking.champion_mark): "champion: <its name>"
    assert (f"NOT COMPARABLE: run {chunk_champion[:12]} (champion: champion) was evaluated at chunk level and run "
            f"{doc[:12]} (document level) at document level (eval.level)") in out
    assert "| check |" not in out  # no paired table between unlike runs
    assert cli("promote", "--sweep", parent) == 1 and current_champion().run.id == chunk_champion


def test_gate_fails_on_a_run_of_another_level(chunk_champion, make_run, tmp_path, capsys):
    now = _run(make_run, 10, 20, "nightly", tags=DOCUMENT)  # the same scores: before, gate PASS
    summary = tmp_path / "summary.md"
    assert cli("gate", "--run", now, "--markdown-summary", str(summary)) == 1
    out = flat(capsys.readouterr().out)
    from rag_experiments.tracking.versioned import not_comparable

    expected = not_comparable([get_run(chunk_champion), get_run(now)]).line
    assert f"gate FAIL: {expected}" in out and "hint: pair runs of one level" in out
    md = summary.read_text()
    assert f"**Why:** {expected}" in md and "<details>" not in md  # no side-by-side table of unlike runs
    from mlflow.tracking import MlflowClient

    assert MlflowClient().get_run(now).data.tags["gate"] == "fail"


def test_golden_versions_on_no_one_chain_the_same_line_in_all_three_commands(store, mini_golden, capsys):
    path, exp = mini_golden, store[1]
    champ = log_golden_run(path, name="champion", exp_id=exp)
    assert cli("promote") == 0
    records = GoldenFile(path).read()
    path.unlink()
    path.with_name(path.stem + ".manifest.json").unlink()
    GoldenFile(path).append([{k: v for k, v in r.items() if k != "prev"} for r in reversed(records)])  # rewritten
    now = log_golden_run(path, name="nightly", exp_id=exp)
    capsys.readouterr()
    assert cli("compare", champ, now) == 2  # before: 0, a table with a warning
    err = flat(capsys.readouterr().err)
    from rag_experiments.tracking.versioned import not_comparable

    expected = flat(not_comparable([get_run(champ), get_run(now)]).line)
    assert err.startswith(f"error: {expected} hint:")
    assert expected.startswith(f"NOT COMPARABLE: run {champ[:12]} (champion: champion) was scored on golden version 10 "
                               "records") and f"and run {now[:12]} (nightly) on 10 records" in expected
    assert "not on one chain" in expected and "not an ancestor" in expected

    assert cli("promote", "--dry-run") == 1
    assert f"- {expected}" in flat(capsys.readouterr().out)
    assert cli("gate", "--run", now) == 1
    assert f"gate FAIL: {expected}" in flat(capsys.readouterr().out)
