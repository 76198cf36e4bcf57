"""An AI agent writing cases or labels by hand says so: `golden add --by agent` records
``provenance.method: agent`` with the --author it names, and `golden label --by-hand / --import
--judge-kind agent` records ``judge.kind: agent`` with the --labeller's name, so the spot-check
counts those labels as a machine judge's (unvalidated until a person agrees) and `golden stats`
counts the cases as generated.

Before this change `golden add` had no --by and `golden label` no --judge-kind (argparse exits 2 on
them): every case and every by-hand label was recorded as a person's. Both tests fail on the old
code."""

from __future__ import annotations

import csv

import pytest

from rag_experiments.golden import add
from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.golden.spotcheck import machine_judged_pairs
from rag_experiments.errors import UserError

from ..tracking.conftest import _template_db, cli, store  # noqa: F401 - fixtures
from .test_add import _add, doc_lookup, git_docs  # noqa: F401 - fixture
from .test_hand_label import corpus, docs_of, judgements, pool_run  # noqa: F401 - fixture


def test_golden_add_by_agent_records_the_agent(git_docs, capsys):
    folder, golden = git_docs
    assert _add(folder, golden, "--query", "What does --autosquash do?", "--kind", "exact", "--source-uri",
                "git-rebase.html", "--quote", "automatically modify the todo list of rebase -i",
                "--by", "agent") == 0
    assert _add(folder, golden, "--query", "How do I go back after a failed rebase?", "--kind", "paraphrase",
                "--source-uri", "git-rebase.html", "--quote", "returns the branch to where it was") == 0
    recs = GoldenFile(golden).read()
    assert [r["provenance"] for r in recs] == [{"method": "agent", "author": "ana"},  # --author names the agent
                                              {"method": "human", "author": "ana"}]  # the default: a person
    with pytest.raises(SystemExit) as exc:  # argparse: one error line, exit 2
        _add(folder, golden, "--query", "q", "--by", "robot", "--source-uri", "git-rebase.html", "--quote", "x")
    assert exc.value.code == 2 and "argument --by: invalid choice: 'robot'" in capsys.readouterr().err
    with pytest.raises(UserError, match="--by 'robot': expected one of human, agent"):
        add.production_case("q", source_uri="mini/locks.html", quote="one second (1s)", doc_lookup=doc_lookup,
                            method="robot")
    from rag_experiments.commands.golden import ADD_METHODS

    assert ADD_METHODS == add.ADD_METHODS
    assert cli("golden", "stats", "--golden", str(golden)) == 0
    assert "generated" in capsys.readouterr().out  # the agent's case is not counted as a reference


def test_by_hand_import_with_judge_kind_agent_is_a_machine_judgement(store, mini_golden, corpus, tmp_path, capsys):
    run_id = pool_run(mini_golden, docs_of(corpus), n_cases=1)
    sets = ["--set", f"corpus.path={corpus}", "--set", "corpus.name=mini"]
    base = ["golden", "label", "--golden", str(mini_golden), "--labeller", "helper-m", *sets]
    sheet = tmp_path / "pairs.csv"
    assert cli(*base, "--by-hand", "--pool", run_id, "-k", "10", "--export", str(sheet)) == 0
    with sheet.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    with sheet.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({**r, "verdict": "n"})
    assert cli(*base, "--import", str(sheet), "--judge-kind", "agent") == 0
    capsys.readouterr()
    got = judgements(mini_golden)
    assert got and {(j["judge"]["kind"], j["judge"]["name"]) for j in got} == {("agent", "helper-m")}
    # a machine judge's labels: the spot-check offers them for a person to validate
    assert len(machine_judged_pairs(GoldenFile(mini_golden).read_records())) == len(got)
    # --judge-kind belongs to labelling by hand; the LLM judge records judge.kind llm
    assert cli("golden", "label", "--golden", str(mini_golden), "--judge-kind", "agent", *sets) == 2
    assert "--judge-kind goes with --by-hand or --import" in capsys.readouterr().err
