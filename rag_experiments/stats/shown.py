"""Numbers of the tests as shown beside a decision. No imports: the renderers that show them (compare's
table, history) load no numerical package for a string (tools/deferred_imports.py)."""

from __future__ import annotations


def p_digits(p: float, alpha: float = 0.05) -> str:
    """A p-value as shown beside a decision: "<0.001", else three places, four within 0.0005 of α, where
    three read as a contradiction ("no significant difference (p=0.050)" for p=0.0503: a new user on
    nginx's documentation, 2026-12-07)."""
    if p < 0.001:
        return "<0.001"
    return f"{p:.4f}" if abs(p - alpha) < 0.0005 else f"{p:.3f}"


def p_eq(p: float, alpha: float = 0.05) -> str:
    """"p<0.001" or "p=0.031" (:func:`p_digits`): a verdict line said "p=0.000" where its table said <0.001."""
    shown = p_digits(p, alpha)
    return "p" + shown if shown.startswith("<") else "p=" + shown
