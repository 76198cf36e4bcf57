"""Labelling by a person, no LLM (`rag-exp golden label --by-hand`): the terminal loop driven by
piped keys in a subprocess (Ctrl-C, then a SIGKILL mid-way, then a resume), the blind CSV export
and import, near-duplicate passages labelled once, and the labels counted by judged@10 and by
promote's label-coverage check. Real MLflow store (runs logged with their ranked lists), real
golden file, real CLI; no API key anywhere.

Before this change `golden label` had no --by-hand/--export/--import (argparse exits 2 on them),
and promote's coverage refusal offered only an LLM labelling run or --force: every test here
fails on the old code."""

from __future__ import annotations

import csv
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag_experiments.evaluation.evaluate import evaluate
from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.golden.resolve import EvalCase, load_golden
from rag_experiments.golden.spotcheck import judge_validation, machine_judged_pairs
from rag_experiments.tracking.promote import coverage_reasons
from rag_experiments.tracking.runs import get_run
from rag_experiments.types import Hit

from ..conftest import FIXTURES, ROOT
from ..tracking.conftest import _template_db, cli, store  # noqa: F401 - fixtures
from ..tracking.golden_runs import log_golden_run, ranked

PARAGRAPH = "Sets the amount of memory the database server uses for shared memory buffers."
COPY_URI = "mini/copy-of-resource.html"


@pytest.fixture
def corpus(tmp_path) -> Path:
    """The mini corpus plus a page that repeats a paragraph of runtime-config-resource word for
    word (as git's command pages repeat git-config's text)."""
    folder = tmp_path / "corpus"
    shutil.copytree(FIXTURES / "mini_corpus", folder)
    (folder / "copy-of-resource.md").write_text(
        f"---\nsource_uri: {COPY_URI}\ntitle: Copied settings\ndoc_type: config\n---\n# Copied settings\n\n"
        f"Some words first, about nothing in particular.\n\n{PARAGRAPH}\n\nAnd a closing line.\n")
    return folder


def docs_of(folder: Path):
    from rag_experiments.corpus.loader import load_corpus

    return {d.source_uri: d for d in load_corpus(folder, "mini")}


def span_hit(doc, start: int, end: int, rank: int) -> Hit:
    return Hit(f"{doc.doc_id}:{start}", doc.doc_id, doc.source_uri, doc.doc_type, start, end, 1.0, rank)


def para_hits(docs, rank: int) -> tuple[Hit, Hit]:
    """The repeated paragraph in both pages: two hits, one passage."""
    res, copy = docs["mini/runtime-config-resource.html"], docs[COPY_URI]
    a, b = res.text.index(PARAGRAPH), copy.text.index(PARAGRAPH)
    return span_hit(res, a, a + len(PARAGRAPH), rank), span_hit(copy, b, b + len(PARAGRAPH), rank + 1)


def pool_run(golden: Path, docs, n_cases: int = 3) -> str:
    """Per case: the evidence at rank 1; for the first case, the repeated paragraph in both pages
    (ranks 2 and 3); for the first ``n_cases`` cases, three titles."""
    titles = [docs[u] for u in ("mini/errcodes-appendix.html", "mini/functions-json.html", "mini/tutorial-start.html")]
    order = [c.case_id for c in load_golden(golden).scorable]

    def run(case: EvalCase):
        s = case.relevant[0].span
        hits = [Hit("e", s.doc_id, s.source_uri, case.doc_type, s.start, s.end, 2.0, 1)]
        i = order.index(case.case_id)
        if i == 0:
            hits += para_hits(docs, 2)
        if i < n_cases:
            hits += [span_hit(d, 0, 20, r) for r, d in enumerate(titles, start=4)]
        return tuple(hits)

    return log_golden_run(golden, run, name="pool")


def judgements(golden: Path) -> list[dict]:
    return [r for r in GoldenFile(golden).read() if r["type"] == "judgement"]


def _cli_env(store_root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "ANTHROPIC_API_KEY")}
    env.update(RAG_EXP_HOME=str(store_root), PYTHONPATH=str(ROOT), COLUMNS="120")
    return env


def _wait_for(golden: Path, n: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if golden.exists() and len(judgements(golden)) >= n:
            return
        assert proc.poll() is None, "the labelling process ended early"
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} judgements after {timeout} s")


def test_terminal_loop_piped_ctrl_c_kill_and_resume(store, mini_golden, corpus, tmp_path, capsys):
    """10 passages to offer (3 titles x 3 cases, and the paragraph the copy page repeats, once for
    both pages). Session 1: two verdicts, then Ctrl-C (exit 130, both kept). Session 2: two more,
    then SIGKILL while it waits for the next key: nothing lost, the chain and manifest intact.
    Session 3 offers only the 6 left, and prints the time per label."""
    root, _ = store
    docs = docs_of(corpus)
    run_id = pool_run(mini_golden, docs)
    argv = [sys.executable, "-m", "rag_experiments.cli", "golden", "label", "--by-hand", "--golden", str(mini_golden),
            "--pool", run_id, "-k", "10", "--labeller", "ann", "--set", f"corpus.path={corpus}",
            "--set", "corpus.name=mini"]
    env = _cli_env(root)

    def start(log: str) -> tuple[subprocess.Popen, Path]:
        out = tmp_path / log
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out.open("w"), stderr=subprocess.STDOUT,
                                text=True, env=env, cwd=root)
        return proc, out

    def answer(proc, key: str) -> None:
        proc.stdin.write(key + "\n")
        proc.stdin.flush()

    # session 1: the paragraph (offered once: its copy is written too), then one title; Ctrl-C
    proc, out = start("s1.log")
    answer(proc, "y")
    _wait_for(mini_golden, 2, proc)
    answer(proc, "n")
    _wait_for(mini_golden, 3, proc)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 130, out.read_text()
    text = out.read_text()
    assert "10 passage(s) to label by hand (11 (case, passage) pairs" in text
    assert "labelled 2 passage(s) this session (YES 1, PART 0, NO 1)" in text and "left to label: 8" in text
    got = judgements(mini_golden)
    assert len(got) == 3 and {j["judge"]["kind"] for j in got} == {"human"}
    assert {j["judge"]["name"] for j in got} == {"ann"}
    para, copy = [j for j in got if j["span"]["quote"] == PARAGRAPH]
    assert para["verdict"] == copy["verdict"] == "YES" and "applied_from" not in para
    assert copy["applied_from"] == para["id"] and copy["similarity"] == 1.0
    assert copy["span"]["source_uri"] == COPY_URI and para["provenance"]["pool"]["runs"] == [run_id]

    # session 2: a skip, two verdicts, then SIGKILL while it waits for the next key
    proc, out = start("s2.log")
    answer(proc, "s")
    answer(proc, "p")
    _wait_for(mini_golden, 4, proc)
    answer(proc, "nope")  # not understood: asked again
    answer(proc, "n")
    _wait_for(mini_golden, 5, proc)
    proc.kill()
    proc.wait(60)
    assert "not understood: 'nope'" in out.read_text()
    assert len(judgements(mini_golden)) == 5  # read() verifies the hash chain and the manifest

    # session 3: only what is left (the skipped title again, then the rest); end of input quits
    proc, out = start("s3.log")
    proc.communicate("y\n" + "n\n" * 5, timeout=120)
    assert proc.returncode == 0, out.read_text()
    text = out.read_text()
    assert "6 passage(s) to label by hand" in text, text
    assert "labelled 6 passage(s) this session" in text and "left to label: 0" in text
    assert "time per label:" in text and "s median over 6 label(s)" in text
    got = judgements(mini_golden)
    assert len(got) == 11 and len({(j["case_id"], j["span"]["doc_id"], j["span"]["start"]) for j in got}) == 11
    assert all(isinstance(j["provenance"]["seconds"], float) for j in got if "applied_from" not in j)

    # nothing is left: a fourth session (in this process: a subprocess costs seconds of start-up) writes nothing
    assert cli(*argv[3:]) == 0
    assert "0 passage(s) to label by hand" in capsys.readouterr().out and len(judgements(mini_golden)) == 11


def test_blind_csv_export_and_import(store, mini_golden, corpus, tmp_path, capsys):
    root, _ = store
    run_id = pool_run(mini_golden, docs_of(corpus), n_cases=2)
    sets = ["--set", f"corpus.path={corpus}", "--set", "corpus.name=mini"]
    base = ["golden", "label", "--golden", str(mini_golden), "--labeller", "bob", *sets]
    sheet = tmp_path / "pairs.csv"
    assert cli(*base, "--by-hand", "--pool", run_id, "-k", "10", "--export", str(sheet)) == 0
    assert f"--import {sheet}" in capsys.readouterr().out
    with sheet.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 7  # 3 titles x 2 cases + the paragraph once
    assert set(rows[0]) == {"pair_id", "case_id", "question", "document", "start", "end", "context_before", "passage",
                            "context_after", "same_text_also_in", "verdict"}  # blind: no run, rank or score
    (para,) = [r for r in rows if r["passage"] == PARAGRAPH]
    assert para["same_text_also_in"].startswith(COPY_URI + " ")
    assert cli(*base, "--export", str(sheet), "--pool", run_id) == 2  # never overwritten
    assert "exists; not overwritten" in capsys.readouterr().err

    def write(verdicts: list[str]) -> None:
        with sheet.open("w", encoding="utf-8", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            for r, v in zip(rows, verdicts):
                w.writerow({**r, "verdict": v})

    write(["y", "NO", "maybe", "", "p", "n", "n"])  # the sheet's row 4 (row 1: the header) is bad
    assert cli(*base, "--import", str(sheet)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == (f"error: --import {sheet}, row 4: verdict 'maybe' is not YES, PART or NO (y / p / n), or "
                      "empty to skip")
    assert judgements(mini_golden) == []  # every row is checked before anything is written

    verdicts = {r["pair_id"]: v for r, v in zip(rows, ["y", "NO", "", "Part", "p", "n", "n"])}
    write(list(verdicts.values()))
    assert cli(*base, "--import", str(sheet)) == 0
    assert "recorded 6 verdict(s)" in capsys.readouterr().out
    got = judgements(mini_golden)
    assert len(got) == 7 and {j["judge"]["name"] for j in got} == {"bob"}
    assert {j["provenance"]["via"] for j in got} == {"csv"}
    copies = [j for j in got if "applied_from" in j]
    assert len(copies) == 1 and copies[0]["span"]["source_uri"] == COPY_URI
    (shown,) = [j for j in got if j["id"] == copies[0]["applied_from"]]
    assert shown["span"]["quote"] == PARAGRAPH and copies[0]["verdict"] == shown["verdict"]

    # importing twice labels nothing twice; the left-out row can be labelled in the terminal
    assert cli(*base, "--import", str(sheet)) == 0
    assert "recorded 0 verdict(s)" in capsys.readouterr().out and len(judgements(mini_golden)) == 7
    import io
    import sys as _sys

    _sys_stdin = _sys.stdin
    _sys.stdin = io.StringIO("y\n")
    try:
        assert cli(*base, "--by-hand", "--pool", run_id, "-k", "10") == 0
    finally:
        _sys.stdin = _sys_stdin
    out = capsys.readouterr().out
    assert "1 passage(s) to label by hand" in out and "labelled 1 passage(s)" in out
    assert len(judgements(mini_golden)) == 8

    # to the spot-check and the stats these are a person's labels: nothing for a machine judge to validate
    assert machine_judged_pairs(GoldenFile(mini_golden).read_records()) == []
    assert judge_validation(mini_golden)["judges"] == []
    assert cli("golden", "stats", "--golden", str(mini_golden)) == 0
    assert "bob" in capsys.readouterr().out


def nine_spans(docs) -> list[tuple]:
    """Nine short spans no case's evidence is near: each document's title line and a line after it."""
    out = []
    for d in sorted(docs.values(), key=lambda d: d.doc_id):
        if d.source_uri == COPY_URI:
            continue
        out += [(d, 0, 12), (d, 13, 25)]
    return out[:9]


def test_hand_labels_raise_judged_at_10_and_lift_the_promote_coverage_refusal(store, mini_golden, corpus):
    """The champion's top 10 holds 9 unjudged spans (judged@10 0.1), the candidate's top 10 is all
    judged (1.0): promote refuses, and its hint now offers --by-hand. After the champion's pool is
    labelled by hand (piped keys), the same lists score judged@10 1.0 and the refusal is gone."""
    docs = docs_of(corpus)
    spans = nine_spans(docs)

    def champion(case: EvalCase):
        s = case.relevant[0].span
        return (Hit("e", s.doc_id, s.source_uri, case.doc_type, s.start, s.end, 2.0, 1),
                *[span_hit(d, a, b, r) for r, (d, a, b) in enumerate(spans, start=2)])

    def candidate(case: EvalCase):  # the evidence span at all ten ranks: all judged
        s = case.relevant[0].span
        return tuple(Hit(f"e{i}", s.doc_id, s.source_uri, case.doc_type, s.start, s.end, 2.0, i + 1)
                     for i in range(10))

    champ = log_golden_run(mini_golden, champion, name="champion")
    cand = log_golden_run(mini_golden, candidate, name="candidate")
    (reason,) = coverage_reasons(get_run(champ), get_run(cand), alpha=0.05, n_resamples=2000)
    assert f"label them yourself with rag-exp golden label --pool {champ} {cand} -k 10 --by-hand" in reason

    golden, results = ranked(mini_golden, champion)
    assert evaluate(golden, results).per_case["judged_at_10"].mean() == pytest.approx(0.1)
    sets = ["--set", f"corpus.path={corpus}", "--set", "corpus.name=mini"]
    import io
    import sys as _sys

    _sys_stdin = _sys.stdin
    _sys.stdin = io.StringIO("n\n" * 90)
    try:
        assert cli("golden", "label", "--by-hand", "--golden", str(mini_golden), "--pool", champ, cand, "-k", "10",
                   *sets) == 0
    finally:
        _sys.stdin = _sys_stdin
    assert len(judgements(mini_golden)) == 90
    golden, results = ranked(mini_golden, champion)
    assert evaluate(golden, results).per_case["judged_at_10"].mean() == pytest.approx(1.0)
    champ2 = log_golden_run(mini_golden, champion, name="champion, labelled")
    cand2 = log_golden_run(mini_golden, candidate, name="candidate, labelled")
    assert get_run(champ2).per_case["judged_at_10"].mean() == pytest.approx(1.0)  # as logged
    assert coverage_reasons(get_run(champ2), get_run(cand2), alpha=0.05, n_resamples=2000) == []


def test_a_ctrl_c_during_the_write_is_counted_with_the_verdict():
    """append_held holds SIGINT while the records are written; the mask lifting delivers it. The
    session's count of the verdict must run inside the hold: the terminal loop counted after the call,
    so a Ctrl-C that came during the write left a verdict in the file and out of "labelled N" (CI saw
    "labelled 1" with 2 written). In a fresh interpreter (its main thread gets the signal; an xdist
    worker's may not)."""
    script = """
import os, signal
from rag_experiments.golden.hand_label import append_held

class Slow:  # a golden file whose write takes a Ctrl-C midway (a real signal to this process)
    written = []
    def append(self, records):
        os.kill(os.getpid(), signal.SIGINT)  # blocked now: pending until the mask lifts
        self.written.extend(records)

counted = []
try:
    append_held(Slow(), [{"id": "j1"}], then=lambda: counted.append(1))
    print("no interrupt")
except KeyboardInterrupt:
    print("interrupted", len(Slow.written), len(counted))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "interrupted 1 1", proc.stdout + proc.stderr[-2000:]


def test_a_changed_verdict_is_listed_not_dropped_and_supersede_records_it(store, mini_golden, corpus, tmp_path,
                                                                           capsys):
    """A sheet imported again with a verdict changed: before, the row was counted as "already labelled" and
    nothing said the correction was not recorded. Now each such row is named with the verdict it differs
    from, and --supersede REASON records it as judgements superseding the recorded ones (the copies too)."""
    run_id = pool_run(mini_golden, docs_of(corpus), n_cases=2)
    base = ["golden", "label", "--golden", str(mini_golden), "--labeller", "bob", "--set", f"corpus.path={corpus}",
            "--set", "corpus.name=mini"]
    sheet = tmp_path / "pairs.csv"
    assert cli(*base, "--by-hand", "--pool", run_id, "-k", "10", "--export", str(sheet)) == 0
    with sheet.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    para = next(i for i, r in enumerate(rows) if r["passage"] == PARAGRAPH)
    title = next(i for i in range(len(rows)) if i != para)

    def write(verdicts: dict[int, str]) -> None:
        with sheet.open("w", encoding="utf-8", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            for i, r in enumerate(rows):
                w.writerow({**r, "verdict": verdicts.get(i, "")})

    write({para: "YES", title: "NO"})
    assert cli(*base, "--import", str(sheet)) == 0
    capsys.readouterr()
    assert len(judgements(mini_golden)) == 3  # the paragraph, its copy, the title

    write({para: "NO", title: "NO"})  # the paragraph's verdict changed
    assert cli(*base, "--import", str(sheet)) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "1 pair(s) already labelled, 1 differing from the recorded verdict (not recorded)" in out
    assert f"row {para + 2}: NO on mini/runtime-config-resource.html" in out and "recorded YES by bob (human)" in out
    assert "--supersede 'REASON'" in out
    assert len(judgements(mini_golden)) == 3  # nothing written

    assert cli(*base, "--supersede", "misread", "--by-hand", "--pool", run_id) == 2  # only with --import
    assert "--supersede REASON goes with --import" in capsys.readouterr().err
    assert cli(*base, "--import", str(sheet), "--supersede", " ") == 2  # a reason is recorded: not blank
    capsys.readouterr()

    assert cli(*base, "--import", str(sheet), "--supersede", "misread the passage") == 0
    assert "1 verdict(s) changed (2 record(s) superseding the recorded ones)" in " ".join(capsys.readouterr().out.split())
    got = judgements(mini_golden)
    new = [j for j in got if j.get("supersedes")]
    assert len(new) == 2 and {j["verdict"] for j in new} == {"NO"} and {j["reason"] for j in new} == {"misread the passage"}
    old_ids = {j["id"] for j in got if j["verdict"] == "YES"}
    assert {j["supersedes"] for j in new} == old_ids  # the paragraph's verdict and its copy's
    (copy,) = [j for j in new if "applied_from" in j]
    assert copy["span"]["source_uri"] == COPY_URI and copy["applied_from"] in {j["id"] for j in new}
    golden = load_golden(mini_golden)  # what evaluation reads: both copies NO now
    grades = [e.grade for c in golden.cases for e in c.evidence if e.span.quote == PARAGRAPH]
    assert grades == [0, 0]

    assert cli(*base, "--import", str(sheet)) == 0  # the same sheet again: nothing differs, nothing written
    assert "3 pair(s) already labelled" in capsys.readouterr().out and len(judgements(mini_golden)) == 5
