"""How far a machine judge agrees with people on the same (case, span) pairs: agreement, Cohen's
kappa, the confusion matrix and the judge's rates on each human class (:mod:`.spotcheck` reports them).
"""

from __future__ import annotations

from collections import Counter

LABELS = ("YES", "PART", "NO")


def confusion_matrix(pairs: list[tuple[str, str]], labels: tuple[str, ...] = LABELS) -> dict[str, dict[str, int]]:
    """``matrix[human][judge]`` counts over (human, judge) verdict pairs."""
    m = {h: {j: 0 for j in labels} for h in labels}
    for h, j in pairs:
        m[h][j] += 1
    return m


def cohen_kappa(pairs: list[tuple[str, str]], labels: tuple[str, ...] = LABELS) -> float | None:
    """Cohen's kappa = (p_o - p_e) / (1 - p_e), with p_o the observed agreement and
    p_e = sum over labels of (human share x judge share). None when undefined (no pairs, or
    p_e = 1: both raters used one and the same label throughout)."""
    n = len(pairs)
    if n == 0:
        return None
    p_o = sum(h == j for h, j in pairs) / n
    human, judge = Counter(h for h, _ in pairs), Counter(j for _, j in pairs)
    p_e = sum(human[lab] * judge[lab] for lab in labels) / (n * n)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1 - p_e)


MIN_CLASS = 5  # fewer human verdicts than this of a class: the judge's rate on that class says nothing yet


def judge_rates(pairs: list[tuple[str, str]]) -> dict:
    """The judge against the human as rates, relevant = YES or PART: the true-positive rate (of
    the pairs the human called relevant, the share the judge did too), the true-negative rate (of
    the human's NO, the share the judge called NO), the prevalence of YES (and of relevant) in the
    sample, and a warning when the sample holds fewer than MIN_CLASS of one class."""
    pos = [(h, j) for h, j in pairs if h in ("YES", "PART")]
    neg = [(h, j) for h, j in pairs if h == "NO"]
    out = {
        "tpr": sum(j in ("YES", "PART") for _, j in pos) / len(pos) if pos else None,
        "tnr": sum(j == "NO" for _, j in neg) / len(neg) if neg else None,
        "human_relevant": len(pos), "human_no": len(neg),
        "prevalence_yes": sum(h == "YES" for h, _ in pairs) / len(pairs) if pairs else None,
        "prevalence_relevant": len(pos) / len(pairs) if pairs else None,
        "class_warning": None,
    }
    small = [(name, n) for name, n in (("relevant (YES/PART)", len(pos)), ("NO", len(neg))) if n < MIN_CLASS]
    if pairs and small:
        name, n = small[0]
        out["class_warning"] = (f"the spot-check holds only {n} pair(s) checked {name}: the judge's "
                                f"{'true-positive' if name.startswith('relevant') else 'true-negative'} rate says "
                                f"nothing yet (need {MIN_CLASS}); spot-check more pairs (rag-exp golden spotcheck -n ...)")
    return out


def agreement_stats(pairs: list[tuple[str, str]]) -> dict:
    n = len(pairs)
    agreement = sum(h == j for h, j in pairs) / n if n else None
    return {"n": n, "agreement": agreement, "kappa": cohen_kappa(pairs), "confusion": confusion_matrix(pairs),
            **judge_rates(pairs)}
