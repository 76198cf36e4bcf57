"""The labelling order and the stopping rule of `golden label --decide` (rag_experiments.golden.decide),
on hand-made lists: a decision a remaining passage can still flip is not declared settled, one no
passage can flip is, and the order offers first the passage that moves the paired Δ most. Then the
command end to end: two logged runs, a person's verdicts piped in, the loop stops when settled.

Before this change there was no decide module and no --decide option: every test here fails."""

from __future__ import annotations

import io
import sys

from rag_experiments.evaluation.bounds import CaseView, with_verdict
from rag_experiments.golden.decide import QUIT, outcome, run_loop
from rag_experiments.tracking.decide_tracker import decide_state

from ..tracking.conftest import _template_db, cli, store  # noqa: F401 - fixtures
from ..tracking.golden_runs import log_golden_run


def lists(n_win: int, n_open: int, open_rank: int = 1):
    """``n_win`` cases: A ranks the case's evidence first, B ranks only misses (Δ +1 on recall@5).
    ``n_open`` cases: neither finds the evidence; B ranks an unjudged passage at ``open_rank`` that
    A does not rank (Δ 0 if it is not relevant, -0.5 if it is: it becomes the case's second unit)."""
    a, b = {}, {}
    for i in range(n_win):
        a[f"w{i}"] = CaseView((2, 0, 0, 0, 0), (2,))
        b[f"w{i}"] = CaseView((0, 0, 0, 0, 0), (2,))
    for i in range(n_open):
        slots = [0] * 5
        slots[open_rank - 1] = f"d:{i}-{i + 1}"
        a[f"o{i}"] = CaseView((0, 0, 0, 0, 0), (2,))
        b[f"o{i}"] = CaseView(tuple(slots), (2,))
    return a, b


def replay(a, b, truth: dict[str, int], metric="recall_at_5", budget=None):
    """Label in the decide order against ``truth`` (key -> grade), in memory; return the report."""
    lines: list[str] = []
    views = {"a": dict(a), "b": dict(b)}

    def state():
        return decide_state(metric, views["a"], views["b"], lambda key: key)

    def label(c):
        for side in views.values():
            side[c.case_id] = with_verdict(side[c.case_id], c.key, truth[c.key])
        return 1

    return run_loop(state, label, budget=budget, say=lines.append), lines


def test_a_passage_that_can_flip_the_decision_keeps_it_open():
    a, b = lists(10, 10)
    st = decide_state("recall_at_5", a, b, lambda key: key)
    # as compare shows it (unjudged = miss): A ahead, Δ +0.5
    assert st.settling.now.winner == "A" and abs(st.settling.now.delta - 0.5) < 1e-12
    # every open passage relevant for B: Δ +0.25, not significant: a tie is still possible
    assert st.settling.low.winner == "tie" and not st.settling.settled
    assert len(st.candidates) == 10 and st.candidates[0].rank_b == 1 and st.candidates[0].rank_a is None

    # the truth: none of them relevant. Labelling stops as soon as the low end is significant too
    report, lines = replay(a, b, {f"d:{i}-{i + 1}": 0 for i in range(10)})
    assert report.stopped == "settled" and 0 < report.labels < 10
    assert report.last.settling.low.winner == report.last.settling.high.winner == "A"
    assert lines[0].startswith("labels done 0, left 10 (10 can move Δ); recall@5 Δ(A - B) +0.500, could be "
                               "+0.250 to +0.500 with 10 passages unjudged")
    assert "not settled" in lines[0] and "settled (rule: certain): A ahead" in lines[-2]
    assert lines[-1].startswith(f"stop: the decision is settled after {report.labels} label(s)")

    # the truth: every one relevant. The decision the full pool gives is a tie, and it is not
    # declared before the passages that make it are labelled
    report, _ = replay(a, b, {f"d:{i}-{i + 1}": 2 for i in range(10)})
    full = outcome([1.0] * 10 + [-0.5] * 10)
    assert report.stopped == "settled" and report.last.settling.now.winner == full.winner == "tie"


def test_a_decision_no_passage_can_flip_stops_at_once():
    a, b = lists(20, 0)
    for i in range(20):  # an unjudged passage at B's rank 5 in every case: B's RR could reach 1/5, A's is 1
        b[f"w{i}"] = CaseView((0, 0, 0, 0, f"d:{i}-{i + 1}"), (2,))
    report, lines = replay(a, b, {}, metric="mrr_at_10")
    assert report.stopped == "settled" and report.labels == 0
    assert len(report.last.candidates) == 20
    assert "A ahead whatever they turn out to be (the sign cannot flip)" in lines[0]


def test_the_lines_give_the_interval_and_say_what_a_recall_decision_leaves_out():
    """A new user on nginx's documentation found no command printing Δ's interval, and a recall@5 decision
    settled "whatever the unjudged passages turn out to be" later read another Δ: labels of a third run's
    passages joined the cases' relevant units. The step line gives the test's interval; the stop line says,
    for recall (not MRR, which reads no denominator), that labels outside both cut-offs can move Δ."""
    a, b = lists(10, 10)
    report, lines = replay(a, b, {f"d:{i}-{i + 1}": 0 for i in range(10)})
    assert report.stopped == "settled"
    # 20 cases: ten at +1, ten at 0: mean 0.5, sd 0.513, t(0.975, 19) 2.093: half-width 0.240
    assert "decision now: A ahead (Δ+0.500 [+0.260, +0.740], p<0.001)" in lines[-2]
    assert "recall@5 reads every relevant passage of a question, so labels on passages outside both top 5" in lines[-1]
    _, mrr_lines = replay(a, b, {f"d:{i}-{i + 1}": 0 for i in range(10)}, metric="mrr_at_10")
    assert mrr_lines[-1].startswith("stop: the decision is settled") and "reads every relevant" not in mrr_lines[-1]


def test_order_puts_the_passage_one_side_ranks_high_first_and_a_budget_stops():
    a = {"c": CaseView(("same", 0, "a3", 0, 0), (2,))}
    b = {"c": CaseView(("same", "b2", 0, 0, 0), (2,))}
    st = decide_state("mrr_at_10", a, b, lambda key: key)
    assert [c.key for c in st.candidates] == ["b2", "a3", "same"]  # weights 1/2, 1/3, 0
    assert st.candidates[-1].weight == 0.0
    report, lines = replay(a, b, {"same": 0, "b2": 0, "a3": 0}, metric="mrr_at_10", budget=1)
    assert report.stopped in ("budget", "settled") and report.labels <= 1
    quit_report = run_loop(lambda: st, lambda c: QUIT, budget=None, say=lambda _t: None)
    assert quit_report.stopped == "quit" and quit_report.labels == 0


def two_runs(mini_golden):
    """alpha ranks each case's evidence first; beta ranks a passage nobody judged first and the
    evidence second (MRR@10 1.0 against 0.5 until beta's first passages are judged)."""
    from rag_experiments.corpus.loader import load_corpus
    from rag_experiments.golden.resolve import load_golden
    from rag_experiments.types import Hit

    from ..conftest import FIXTURES

    cases = load_golden(mini_golden).scorable
    assert len(cases) >= 4
    docs = {d.doc_id: d for d in load_corpus(FIXTURES / "mini_corpus", "mini")}
    cited = {e.span.doc_id for c in cases for e in c.relevant}
    spare = [d for d in docs.values() if d.doc_id not in cited] or list(docs.values())
    order = [c.case_id for c in cases]

    def first(case):
        s = case.relevant[0].span
        return (Hit("e", s.doc_id, s.source_uri, case.doc_type, s.start, s.end, 2.0, 1),)

    def second(case):
        s = case.relevant[0].span
        i = order.index(case.case_id)
        d = spare[i % len(spare)]
        lo = 40 * (i // len(spare))
        other = Hit("x", d.doc_id, d.source_uri, d.doc_type, lo, lo + 30, 3.0, 1)
        return (other, Hit("e", s.doc_id, s.source_uri, case.doc_type, s.start, s.end, 2.0, 2))

    sets = ["--set", f"corpus.path={FIXTURES / 'mini_corpus'}", "--set", "corpus.name=mini"]
    return log_golden_run(mini_golden, first, name="alpha"), log_golden_run(mini_golden, second, name="beta"), \
        cases, sets


def test_decide_by_hand_end_to_end(store, mini_golden, tmp_path, capsys, monkeypatch):
    """--decide --by-hand on MRR@10 offers beta's unjudged passages first; NO verdicts piped in
    settle it (alpha ahead) before the pool is exhausted; the verdicts are a person's with the
    decision in their provenance."""
    from rag_experiments.golden.golden_file import GoldenFile

    run_a, run_b, cases, sets = two_runs(mini_golden)
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n" * len(cases)))
    code = cli("golden", "label", "--golden", str(mini_golden), "--decide", "alpha", run_b, "--decide-metric",
               "mrr_at_10", "--by-hand", "--labeller", "ann", *sets)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "deciding alpha" in out and "labels done 0 (0 before this session), left" in out
    assert "stop: the decision is settled after" in out
    got = [r for r in GoldenFile(mini_golden).read() if r["type"] == "judgement"]
    assert got and {j["verdict"] for j in got} == {"NO"} and {j["judge"]["name"] for j in got} == {"ann"}
    assert got[0]["provenance"]["pool"]["decide"] == [run_a, run_b]
    assert len(got) < len(cases)  # settled before every passage was labelled


def test_decide_export_in_order_with_why_then_import_settles(store, mini_golden, tmp_path, capsys, monkeypatch):
    import csv

    _run_a, run_b, cases, sets = two_runs(mini_golden)
    sheet = tmp_path / "next.csv"
    base = ["golden", "label", "--golden", str(mini_golden), *sets]
    assert cli(*base, "--decide", "alpha", run_b, "--decide-metric", "mrr_at_10", "--export", str(sheet),
               "--labeller", "bob", "--judge-kind", "agent") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "in the order that settles the decision (column why)" in out
    # the state, as the terminal loop prints it (the export printed Δ's range only), and an import command
    # that records the verdicts to the same golden file, corpus and labeller (it gave --import FILE alone)
    assert f"labels done 0 (0 before this session), left {len(cases)}" in out and "decision now:" in out
    assert f"rag-exp golden label --golden {mini_golden} --set " in out
    assert f"--labeller bob --judge-kind agent --import {sheet}" in out
    with sheet.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(cases) and list(rows[0])[-2:] == ["why", "verdict"]
    assert rows[0]["why"].startswith("not in alpha's cut-off, rank 1 in beta: its verdict moves mrr@10 Δ by up to")
    with sheet.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({**r, "verdict": "n"})
    assert cli(*base, "--import", str(sheet), "--labeller", "bob") == 0
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # nothing to ask: it must stop before reading
    assert cli(*base, "--decide", "alpha", run_b, "--decide-metric", "mrr_at_10", "--by-hand") == 0
    out = " ".join(capsys.readouterr().out.split())
    # the labels the CSV gave count for the decision (it said "labels done 0" and "after 0 label(s)")
    n = len(rows)
    assert f"labels done {n} ({n} before this session), left 0" in out and "every hit in both cut-offs judged" in out
    assert f"stop: the decision is settled after {n} label(s), 0 of them this session (rule" in out


def test_decide_by_hand_dry_run_prints_the_state_and_asks_nothing(store, mini_golden, capsys, monkeypatch):
    """--dry-run with --decide --by-hand shows where the decision stands and the pool, and neither
    offers a passage nor records a verdict (it used to start the terminal loop)."""
    from rag_experiments.golden.golden_file import GoldenFile

    _run_a, run_b, cases, sets = two_runs(mini_golden)
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n" * len(cases)))
    code = cli("golden", "label", "--golden", str(mini_golden), "--decide", "alpha", run_b, "--decide-metric",
               "mrr_at_10", "--by-hand", "--dry-run", *sets)
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0, out
    assert "labels done 0 (0 before this session), left" in out and "dry run: nothing offered, nothing recorded" in out
    assert "Verdict?" not in out
    assert not [r for r in GoldenFile(mini_golden).read() if r["type"] == "judgement"]


NEAR = ("The checkout command switches branches or restores working tree files, updating the index and the files "
        "in the working tree to match the version in the index or the named tree, and it also updates HEAD to set "
        "the specified branch as the current branch for later commits made by you in this repository today.")


def test_near_duplicates_are_one_passage_left_as_in_the_export():
    """"left" counts what labelling offers: the export and the terminal loop group a case's passages
    whose texts are near-duplicates (similarity >= 0.95, hand_label.plan_hand_labelling), so the decide
    order does too. On the git-doc transcript the export wrote 160 rows where "left" said 164 (the order
    grouped exact texts only)."""
    from rag_experiments.golden.same_text import near_duplicate

    texts = {"html:0-300": NEAR, "txt:0-300": NEAR.replace("later", "future"), "other:0-40": "A passage about "
             "something else entirely, nothing alike."}
    assert 0.95 <= near_duplicate(texts["html:0-300"], texts["txt:0-300"]) < 1.0  # not the same text
    a = {"c": CaseView(("html:0-300", 0, "other:0-40", 0, 0), (2,))}
    b = {"c": CaseView(("txt:0-300", 0, 0, 0, 0), (2,))}
    st = decide_state("recall_at_5", a, b, texts.get)
    assert len(st.candidates) == 2  # the two near-duplicates are one offer; it said 3
    first = next(c for c in st.candidates if c.key in ("html:0-300", "txt:0-300"))
    assert set((first.key, *first.copies)) == {"html:0-300", "txt:0-300"}


def test_decide_left_counts_the_rows_the_export_writes(store, mini_golden, tmp_path, capsys):
    """End to end: a page and its reworded copy (one word changed, similarity 0.98) ranked by one run
    each in every case. --dry-run's "left" and the --export's rows are the same number (it said
    "left" twice the rows: the order grouped exact texts, the export near-duplicates)."""
    import csv
    import shutil

    from rag_experiments.corpus.loader import load_corpus
    from rag_experiments.golden.resolve import load_golden
    from rag_experiments.types import Hit

    from ..conftest import FIXTURES

    folder = tmp_path / "corpus"
    shutil.copytree(FIXTURES / "mini_corpus", folder)
    for name, text in (("near-a", NEAR), ("near-b", NEAR.replace("later", "future"))):
        (folder / f"{name}.md").write_text(f"---\nsource_uri: mini/{name}.html\ntitle: {name}\ndoc_type: guide\n---\n"
                                           f"# {name}\n\n{text}\n")
    docs = {d.source_uri: d for d in load_corpus(folder, "mini")}

    def near(uri: str, rank: int) -> Hit:
        d = docs[uri]
        at = d.text.index(NEAR[:40])
        return Hit(f"n{rank}", d.doc_id, d.source_uri, d.doc_type, at, at + len(d.text[at:].rstrip()), 1.0, rank)

    def side(uri: str):
        def run(case):
            s = case.relevant[0].span
            return (Hit("e", s.doc_id, s.source_uri, case.doc_type, s.start, s.end, 2.0, 1), near(uri, 2))
        return run

    a = log_golden_run(mini_golden, side("mini/near-a.html"), name="alpha")
    b = log_golden_run(mini_golden, side("mini/near-b.html"), name="beta")
    n = len(load_golden(mini_golden).scorable)
    sets = ["--set", f"corpus.path={folder}", "--set", "corpus.name=mini"]
    # --stop certain: the confident rule draws one verdict for a near-duplicate group, so with the copies
    # at one rank on both sides Δ is 0 in every draw and it settles before any label
    base = ["golden", "label", "--golden", str(mini_golden), "--decide", a, b, "--by-hand", *sets]
    assert cli(*base, "--dry-run") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "settled (rule: confident" in out and "no significant difference, P(no significant difference) = 1.000" in out
    base += ["--stop", "certain"]
    assert cli(*base, "--dry-run") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"left {n} (" in out, out  # one passage a case: it said left {2 * n}
    sheet = tmp_path / "next.csv"
    assert cli(*base, "--export", str(sheet)) == 0
    with sheet.open(encoding="utf-8") as f:
        assert len(list(csv.DictReader(f))) == n


def test_decide_names_the_runs_as_compare_does(store, mini_golden, capsys):
    """The runs are named by the params that differ (as compare's table), not by run names that carry
    every override: the git-doc transcript's lines read 'retrieval=hybrid db.pgdata=/tmp/transcript/pg'."""
    from mlflow.tracking import MlflowClient

    run_a, run_b, _cases, sets = two_runs(mini_golden)
    client = MlflowClient()
    for rid, value in ((run_a, "first"), (run_b, "second")):
        client.log_param(rid, "extra.setting", value)
        client.set_tag(rid, "mlflow.runName", f"setting={value} db.pgdata=/tmp/elsewhere/pg")
    assert cli("golden", "label", "--golden", str(mini_golden), "--decide", run_a, run_b, "--decide-metric",
               "mrr_at_10", "--by-hand", "--dry-run", *sets) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"deciding setting=first ({run_a[:12]}) vs setting=second ({run_b[:12]})" in out
    assert "mrr@10 Δ(setting=first - setting=second)" in out and "db.pgdata" not in out
