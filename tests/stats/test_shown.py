"""p-values as shown beside a decision (rag_experiments.stats.shown)."""

from __future__ import annotations

from rag_experiments.stats.shown import p_digits


def test_a_p_near_alpha_is_shown_with_four_places():
    """p=0.0503 beside "no significant difference" was shown as 0.050, which read as a contradiction."""
    assert p_digits(0.0503) == "0.0503" and p_digits(0.0497) == "0.0497"
    assert p_digits(0.052) == "0.052" and p_digits(0.2) == "0.200" and p_digits(0.0004) == "<0.001"
    assert p_digits(0.0103, alpha=0.01) == "0.0103"


def test_a_verdict_line_says_below_a_thousandth_as_its_table_does():
    from rag_experiments.stats.shown import p_eq

    assert p_eq(0.0) == "p<0.001" and p_eq(0.0503) == "p=0.0503" and p_eq(0.31) == "p=0.310"
