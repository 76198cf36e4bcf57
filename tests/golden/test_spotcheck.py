"""Spot-checking the LLM judge with piped stdin; kappa against scikit-learn."""

from __future__ import annotations

import io
import json
import random

import pytest
from rich.console import Console
from sklearn.metrics import cohen_kappa_score

from rag_experiments import cli
from rag_experiments.golden import GoldenFile
from rag_experiments.golden import spotcheck as sc
from rag_experiments.golden.records import new_id

DOC = "x" * 5000


def _span(start: int, end: int) -> dict:
    return {"doc_id": "d1", "source_uri": "mini/d1.html", "start": start, "end": end,
            "quote": f"passage {start} " + "x" * (end - start - len(f"passage {start} ")), "doc_hash": "h"}


@pytest.fixture
def golden(tmp_path):
    """40 LLM judgements (model m / judge-v1) over 10 cases, plus one human and one superseded."""
    path = tmp_path / "experiments" / "golden" / "g.jsonl"
    records, verdicts = [], ["YES", "PART", "NO", "NO"]
    for c in range(10):
        cid = new_id("c", c)
        records.append({"type": "case", "id": cid, "query": f"question number {c}?", "kind": "paraphrase",
                        "doc_type": "config", "evidence": [{**_span(c * 400, c * 400 + 50), "grade": 2}],
                        "provenance": {"method": "human", "author": "t"}})
        for h in range(4):
            start = c * 400 + 100 + h * 60
            records.append({"type": "judgement", "id": new_id("j", c, h), "case_id": cid,
                            "span": _span(start, start + 50), "verdict": verdicts[(c + h) % 4],
                            "judge": {"kind": "llm", "model": "m", "prompt_version": "judge-v1"}})
    records.append({"type": "judgement", "id": "j-human", "case_id": new_id("c", 0), "span": _span(4500, 4550),
                    "verdict": "YES", "judge": {"kind": "human", "name": "ann"}})
    records.append({"type": "judgement", "id": "j-fix", "case_id": new_id("c", 0), "span": _span(100, 150),
                    "verdict": "NO", "judge": {"kind": "llm", "model": "m", "prompt_version": "judge-v1"},
                    "supersedes": new_id("j", 0, 0), "reason": "re-judged"})
    GoldenFile(path).append(records)
    return path


def _console():
    buf = io.StringIO()
    return Console(file=buf, width=100, force_terminal=False), buf


def test_kappa_matches_sklearn():
    rng = random.Random(3)
    for _ in range(50):
        n = rng.randint(5, 60)
        human = [rng.choice(sc.LABELS) for _ in range(n)]
        judge = [h if rng.random() < 0.7 else rng.choice(sc.LABELS) for h in human]
        pairs = list(zip(human, judge))
        if len(set(human)) == 1 and len(set(judge)) == 1:
            continue
        assert sc.cohen_kappa(pairs) == pytest.approx(cohen_kappa_score(human, judge, labels=list(sc.LABELS)))


def test_kappa_hand_worked_and_degenerate():
    # 10 pairs: 7 agree; human YES 5 / NO 5, judge YES 6 / NO 4 -> p_e = .5*.6 + .5*.4 = .5, kappa = (.7-.5)/.5
    pairs = [("YES", "YES")] * 4 + [("YES", "NO")] + [("NO", "NO")] * 3 + [("NO", "YES")] * 2
    assert sc.cohen_kappa(pairs) == pytest.approx(0.4)
    assert sc.cohen_kappa([("YES", "YES")] * 3) is None  # one label throughout: undefined
    assert sc.cohen_kappa([]) is None
    m = sc.confusion_matrix(pairs)
    assert m["YES"]["NO"] == 1 and m["NO"]["YES"] == 2 and m["PART"] == {"YES": 0, "PART": 0, "NO": 0}


def test_spotcheck_with_piped_stdin_saves_each_answer_and_resumes(golden):
    digest = GoldenFile(golden).digest()
    spot = sc.spotcheck_path(golden)
    assert spot == golden.parent.parent / "spotcheck" / "g.jsonl"
    console, buf = _console()
    result = sc.run_spotcheck(golden, n=30, seed=1, author="tester",
                              stdin=io.StringIO("y\nmaybe\np\nn\ns\nq\nn\n"), console=console)
    out = buf.getvalue()
    assert "not understood: 'maybe'" in out and "question number" in out
    assert "judge-v1" not in out.split("Judge m")[0]  # the verdict and judge are not shown before answering
    lines = [json.loads(x) for x in spot.read_text().splitlines()]
    assert [r["human_verdict"] for r in lines] == ["YES", "PART", "NO", "SKIP"]
    assert all(r["author"] == "tester" and r["judge"] == {"kind": "llm", "model": "m", "prompt_version": "judge-v1"}
               for r in lines)
    assert result["n"] == 3 and result["asked"] == 4 and result["skipped"] == 1 and not result["validated"]
    assert GoldenFile(golden).digest() == digest  # verdicts never go into the golden set

    # the order is seeded: a rerun continues with new pairs, never the answered or skipped ones
    first_ids = [r["judgement_id"] for r in lines]
    records = GoldenFile(golden).read_records()
    order = [j.id for j in sc.order_pairs(sc.machine_judged_pairs(records), 1)]
    assert first_ids == order[:4]
    assert new_id("j", 0, 0) not in order and "j-fix" in order and "j-human" not in order
    truth = {j.id: j.verdict for j in sc.machine_judged_pairs(records)}
    # answer the remaining 27 exactly as the judge did, except 3 disagreements -> 30 pairs, 90% agreement
    remaining = [i for i in order if i not in first_ids][:27]
    wrong_so_far = sum(r["human_verdict"] != r["llm_verdict"] for r in lines if r["human_verdict"] != "SKIP")
    answers = []
    for k, jid in enumerate(remaining):
        v = truth[jid]
        if k < 3 - wrong_so_far:
            v = "PART" if v != "PART" else "NO"
        answers.append({"YES": "yes", "PART": "part", "NO": "no"}[v])
    console, buf = _console()
    result = sc.run_spotcheck(golden, n=30, seed=1, author="tester", stdin=io.StringIO("\n".join(answers) + "\n"),
                              console=console)
    lines2 = [json.loads(x) for x in spot.read_text().splitlines()]
    assert len(lines2) == 4 + 27 and len({r["judgement_id"] for r in lines2}) == 31
    assert result["n"] == 30 and result["answered"] == 27
    human = [r["human_verdict"] for r in lines2 if r["human_verdict"] != "SKIP"]
    judge = [r["llm_verdict"] for r in lines2 if r["human_verdict"] != "SKIP"]
    assert result["agreement"] == pytest.approx(sum(h == j for h, j in zip(human, judge)) / 30)
    assert result["kappa"] == pytest.approx(cohen_kappa_score(human, judge))
    assert result["disagreement"] <= 0.1 + 1e-9 and result["validated"]
    assert "validated" in buf.getvalue() and "rows: human" in buf.getvalue()

    v = sc.judge_validation(golden)
    assert v["validated"] and v["n"] == 30 and v["judge_model"] == "m" and v["judge_prompt_version"] == "judge-v1"

    # nothing left to ask: a further session asks nothing
    console, buf = _console()
    again = sc.run_spotcheck(golden, n=30, seed=1, author="x", stdin=io.StringIO("y\n"), console=console)
    assert again["asked"] == 0 and len(spot.read_text().splitlines()) == 31


def test_validation_needs_30_pairs_and_at_most_10_percent_disagreement(golden):
    records = GoldenFile(golden).read_records()
    pairs = sc.order_pairs(sc.machine_judged_pairs(records), 5)
    spot = sc.spotcheck_path(golden)

    def write(n: int, wrong: int) -> dict:
        spot.unlink(missing_ok=True)
        for i, j in enumerate(pairs[:n]):
            human = j.verdict if i >= wrong else ("NO" if j.verdict != "NO" else "YES")
            sc.append_spotcheck(spot, {"type": "spotcheck", "id": f"s{i}", "judgement_id": j.id,
                                       "case_id": j.case_id, "human_verdict": human, "llm_verdict": j.verdict,
                                       "judge": {"model": "m", "prompt_version": "judge-v1"}, "author": "t"})
        return sc.judge_validation(golden)

    assert write(30, 3)["validated"]
    assert not write(30, 4)["validated"]
    assert not write(29, 0)["validated"]
    assert write(40, 4)["validated"]


def test_cli_spotcheck_reads_piped_stdin(golden, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("y\nn\nq\n"))
    monkeypatch.setenv("USER", "piped")
    assert cli.main(["golden", "spotcheck", "--golden", str(golden), "--seed", "2"]) == 0
    lines = [json.loads(x) for x in sc.spotcheck_path(golden).read_text().splitlines()]
    assert [r["human_verdict"] for r in lines] == ["YES", "NO"] and lines[0]["author"] == "piped"
    assert cli.main(["golden", "spotcheck", "--golden", str(golden), "--report"]) == 0
    assert "n=2" in capsys.readouterr().out
    assert cli.main(["golden", "stats", "--golden", str(golden)]) == 0
    out = capsys.readouterr().out
    assert "not validated" in out and "2 spot-checked pairs" in out


def test_judge_rates_by_hand_and_the_warning_for_a_thin_class():
    from rag_experiments.golden.spotcheck import agreement_stats

    # human x judge: 6 relevant (judge agrees on 5), 4 NO (judge agrees on 3)
    pairs = ([("YES", "YES")] * 3 + [("PART", "YES"), ("PART", "PART"), ("YES", "NO")]
             + [("NO", "NO")] * 3 + [("NO", "PART")])
    s = agreement_stats(pairs)
    assert s["tpr"] == 5 / 6 and s["tnr"] == 3 / 4
    assert s["prevalence_yes"] == 4 / 10 and s["prevalence_relevant"] == 6 / 10
    assert "only 4 pair(s) checked NO" in s["class_warning"]  # < 5: the TNR says nothing yet
    assert agreement_stats(pairs + [("NO", "NO")])["class_warning"] is None


def test_export_then_answers_keyed_by_judgement_id(golden, tmp_path, monkeypatch, capsys):
    """Offline answers: the exported CSV is blind (no machine verdict), its rows may come back in
    any order, bad rows are refused before anything is saved, and the judge is validated by them."""
    import csv

    out = tmp_path / "pairs.csv"
    assert cli.main(["golden", "spotcheck", "--golden", str(golden), "--export", str(out)]) == 0
    rows = list(csv.DictReader(out.open(encoding="utf-8", newline="")))
    assert len(rows) == 30 and set(rows[0]) == set(sc.EXPORT_COLUMNS) and all(r["verdict"] == "" for r in rows)
    assert "passage" in rows[0]["passage"] and rows[0]["question"].startswith("question number")
    records = {r["id"]: r for r in GoldenFile(golden).read()}
    order = [j.id for j in sc.order_pairs(sc.machine_judged_pairs(GoldenFile(golden).read_records()), sc.DEFAULT_SEED)]
    assert [r["judgement_id"] for r in rows] == order[:30]  # the interactive order
    assert cli.main(["golden", "spotcheck", "--golden", str(golden), "--export", str(out)]) == 2  # never overwritten

    def write(rows, name):
        path = tmp_path / name
        with path.open("w", encoding="utf-8", newline="") as f:
            w = csv.DictWriter(f, fieldnames=sc.EXPORT_COLUMNS)
            w.writeheader()
            w.writerows(rows)
        return path

    # the machine's verdict on 29 rows, one disagreement, one left empty; reversed order
    answered = [dict(r, verdict=records[r["judgement_id"]]["verdict"]) for r in rows]
    answered[0]["verdict"] = "NO" if answered[0]["verdict"] != "NO" else "YES"
    answered[1]["verdict"] = ""
    bad = write([*answered[:3], dict(answered[3], verdict="maybe")], "bad.csv")
    assert cli.main(["golden", "spotcheck", "--golden", str(golden), "--answers", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.csv:5" in err and "'maybe'" in err
    assert not sc.read_spotchecks(sc.spotcheck_path(golden))  # nothing saved from a bad file
    unknown = write([dict(answered[0], judgement_id="j-nope")], "unknown.csv")
    assert cli.main(["golden", "spotcheck", "--golden", str(golden), "--answers", str(unknown)]) == 2
    assert "'j-nope' is not a live machine judgement" in capsys.readouterr().err

    good = write(list(reversed(answered)), "good.csv")
    assert cli.main(["golden", "spotcheck", "--golden", str(golden), "--answers", str(good), "--author", "ann"]) == 0
    text = capsys.readouterr().out
    assert "recorded 29 verdict(s)" in text and "skipped 1 empty" in text
    result = sc.judge_validation(golden)
    assert result["n"] == 29 and not result["validated"]  # 29 < 30: the empty row counts for nothing
    checks = sc.read_spotchecks(sc.spotcheck_path(golden))
    assert all(c["author"] == "ann" and c["llm_verdict"] == records[c["judgement_id"]]["verdict"] for c in checks)
    # answering the left-over pair (the same file again: answered rows are kept, not doubled)
    answered[1]["verdict"] = records[answered[1]["judgement_id"]]["verdict"]
    again = write(answered, "again.csv")
    assert cli.main(["golden", "spotcheck", "--golden", str(golden), "--answers", str(again)]) == 0
    assert "recorded 1 verdict(s)" in capsys.readouterr().out
    result = sc.judge_validation(golden)
    assert result["n"] == 30 and result["validated"] and abs(result["agreement"] - 29 / 30) < 1e-9


def test_a_judge_served_by_another_provider_is_another_judge(golden):
    """The same model name behind an OpenAI-compatible server is not Anthropic's judge; a record
    without a provider (written before providers existed) is Anthropic's."""
    from dataclasses import replace

    j = sc.machine_judged_pairs(GoldenFile(golden).read_records())[0]
    assert sc.judge_id(j) == ("m", "judge-v1")

    def served_by(provider):
        return replace(j, raw={**j.raw, "judge": {**j.raw["judge"], "provider": provider}})

    assert sc.judge_id(served_by("openai")) == ("openai:m", "judge-v1")
    assert sc.judge_id(served_by("anthropic")) == ("m", "judge-v1")


def test_export_and_answers_files_that_cannot_be_used_are_one_line(golden, tmp_path, capsys):
    assert cli.main(["golden", "spotcheck", "--golden", str(golden), "--export", str(tmp_path / "no" / "x.csv")]) == 2
    assert "cannot write: No such file or directory" in capsys.readouterr().err
    huge = tmp_path / "huge.csv"
    huge.write_text('judgement_id,verdict\n"' + "x" * 200_000 + '",YES\n', encoding="utf-8")
    assert cli.main(["golden", "spotcheck", "--golden", str(golden), "--answers", str(huge)]) == 2
    assert "not readable as CSV near line 2" in capsys.readouterr().err
    assert not sc.spotcheck_path(golden).exists()
