"""`rag-exp golden power`: per metric and query kind, what two runs' cases could detect."""

from __future__ import annotations

from .conftest import cli, per_case_frame
from .test_promote import KINDS, _cases


def test_power_table_for_two_runs(store, make_run, capsys):
    a = make_run(per_case_frame(_cases(30, 18), kinds=KINDS), name="a")
    b = make_run(per_case_frame(_cases(33, 18), kinds=KINDS), name="b")  # 3 paraphrase wins
    capsys.readouterr()
    assert cli("golden", "power", "--runs", a, b, "--metric", "recall_at_5", "--markdown") == 0
    out = capsys.readouterr().out
    # all 60 cases: d = three +1, 57 zeros: mean 0.05, sd = sqrt((3 (0.95)^2 + 57 (0.05)^2) / 59) = 0.219784;
    # a sign test (step 1): MDE = 2.801585 * 0.219784 / sqrt(60) + 1 / 60 = 0.079492 + 0.016667 = 0.096159
    # 3 cases differ, fewer than 30: flagged (!), and the simulated power shown beside the normal one: at Δ 0.02,
    # s = 0.02 sqrt(60) / 0.219784 = 0.704835, c = 1 / (sqrt(60) 0.219784) = 0.587362:
    # Phi(0.704835 - 0.587362 - 1.959964) = Phi(-1.842491) = 0.0327 (+ Phi(-3.25) = 0.0006): 0.03; simulated: the
    # tilted draw has 2% wins, and the test needs 6 of 6 differing cases to win to reach p < 0.05: 0.00
    assert "| recall_at_5 | all | 60 | +0.050 | 0.220 | 3 ! | 0.096 ! | 0.03 | 0.00 |" in out
    assert "! = fewer than 30 cases differ: the normal approximation behind MDE, power and n is unreliable" in out
    # exact: nothing differs, nothing to estimate
    assert "| recall_at_5 | exact | 20 | +0.000 | 0.000 | 0 | — | — | — | — | — |" in out
    assert "| recall_at_5 | paraphrase | 40 |" in out


def test_power_bad_input_is_one_line(store, make_run, capsys):
    a = make_run(per_case_frame(_cases(30, 18), kinds=KINDS), name="a")
    b = make_run(per_case_frame(_cases(33, 18), kinds=KINDS), name="b")
    assert cli("golden", "power", "--runs", a, b, "--delta", "-0.1") == 2
    assert "--delta must be a positive number, got -0.1" in capsys.readouterr().err
    assert cli("golden", "power", "--runs", a, b, "--metric", "recall_at_7") == 2
    assert "--metric: recall_at_7 is not in both runs' per-case tables" in capsys.readouterr().err
