"""Runs scored on sampled labels: recall@k as an estimate with an interval.

When judgements of the golden set carry a sampling design (their ``sample`` field, written by
``rag-exp golden label --sample N`` / ``--budget USD``), the plain metrics of a run stay what they
always were (an unjudged hit is a miss) and these estimates of what recall@k would be with the
whole pool judged are logged beside them: ``ipw_recall_at_<k>`` with ``.ci_low`` / ``.ci_high``
(95%, the label-sampling interval; the cases are taken as given) and ``.se``.

Two designs (:mod:`rag_experiments.stats.ipw` has the formulas):

* ``unit: case`` (the default): whole cases were drawn at random and every pair of a drawn case
  judged. Each case's recall on the labels without the sample (``base``), plus the
  Horvitz-Thompson estimate of the correction the drawn cases show (:func:`.ipw.difference_mean`):
  exactly unbiased, with an unbiased variance and a Student's t interval. Two runs scored on the
  same sample are compared paired (:func:`estimate_recall_difference`: the same estimator on the
  per-case differences; from two runs' logged :func:`case_table` s, :func:`table_difference`, which
  compare, promote and the gate print); an interval of the difference that holds 0 is a tie at this sample size.
  On the demo's pool at 25% of the labels the intervals cover 94-96%, the order every label
  establishes is kept in 99.8% of subsamples, and variants 0.006 apart (a tie even with every
  label) come out as ties, rarely in a wrong order (tools/sampled_labels.py; docs/concepts/statistics.md).
* ``unit: pair``: pairs drawn within rank strata; a relevant pair found stands for ``1 / pi`` pairs
  of its stratum (:func:`.ipw.ratio_mean_bootstrap`). A case's recall is then a ratio of two
  small weighted counts, biased when cases have few relevant passages (one unsampled relevant pair
  changes it a lot), and the interval cannot see pairs that were not drawn: on the demo's pool it
  undercovers (tools/sampled_labels.py). Logged, and the summary says so.

The design is read from the records: per (sample id, stratum), the population ``N_h`` recorded
with the judgements, and ``n_h`` = the distinct units (pairs, or cases) of that stratum judged now
(so a sample extended by a rerun with a larger ``--sample`` and the same seed counts all of its
units). A pair stays sampled when a later judgement supersedes it. Only recall@k is estimated: MRR
and nDCG are reported as scored (unjudged = miss).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..golden.records import Judgement, parse_sample
from ..golden.resolve import EvalCase, GoldenSet, resolve
from ..stats.ipw import Estimate, Stratum, Term, difference_mean, ratio_mean, ratio_mean_bootstrap
from .relevance import credit


@dataclass(frozen=True)
class Design:
    """The sampling design found in a golden set's records."""

    unit: str  # pair | case | mixed (both: not estimated)
    strata: dict[tuple[str, str], Stratum]  # (sample id, stratum) -> N_h, n_h (pairs, or cases)
    stratum_of: dict[str, tuple[str, str]]  # judgement id -> its pair's (sample id, stratum)
    drawn: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)  # unit case: the cases drawn
    pairs: int = 0  # judged pairs drawn by the sample(s)

    @property
    def sampled_units(self) -> int:
        return sum(s.sampled for s in self.strata.values())

    @property
    def population(self) -> int:
        return sum(s.population for s in self.strata.values())


NO_DESIGN = Design("pair", {}, {})


def sampling_design(records: Iterable) -> Design | None:
    """The design of the sampled judgements among ``records`` (None when no judgement has one)."""
    judgements = [r for r in records if isinstance(r, Judgement)]
    pair_stratum: dict[tuple[str, str, int, int], tuple[str, str]] = {}
    population: dict[tuple[str, str], int] = {}
    units: dict[tuple[str, str], str] = {}
    for j in judgements:
        if "sample" not in j.raw:
            continue
        d = parse_sample(j.raw["sample"], f"judgement {j.id}: sample")
        key = (d.id, d.stratum)
        pair_stratum.setdefault((j.case_id, *j.span.key), key)
        population[key] = d.population  # the latest record's (the same pool gives the same N_h)
        units[key] = d.unit
    if not pair_stratum:
        return None
    stratum_of = {j.id: pair_stratum[p] for j in judgements if (p := (j.case_id, *j.span.key)) in pair_stratum}
    kinds = set(units.values())
    unit = kinds.pop() if len(kinds) == 1 else "mixed"
    counts: dict[tuple[str, str], int] = defaultdict(int)
    drawn: dict[tuple[str, str], set[str]] = defaultdict(set)
    for (case_id, *_span), key in pair_stratum.items():
        counts[key] += 1
        drawn[key].add(case_id)
    if unit == "case":
        strata = {key: Stratum(max(population[key], len(drawn[key])), len(drawn[key])) for key in drawn}
    else:
        strata = {key: Stratum(max(population[key], counts[key]), counts[key]) for key in counts}
    return Design(unit, strata, stratum_of, {k: frozenset(v) for k, v in drawn.items()}, len(pair_stratum))


def case_terms(case: EvalCase, refs, k: int, design: Design) -> list[Term]:
    """recall@k's terms of one case: each relevant unit, x = 1 when a hit in the top k is credited
    with it (``refs``: :func:`.relevance.credit`'s, the rule evaluation uses), and its stratum
    (None: certain)."""
    top = set(r for r in refs[:k] if r is not None)
    return [Term(1.0 if e.ref in top else 0.0, 1.0, design.stratum_of.get(e.ref)) for e in case.relevant]


def _recall(case: EvalCase, refs, k: int) -> float:
    top = set(r for r in refs[:k] if r is not None)
    return sum(1 for e in case.relevant if e.ref in top) / len(case.relevant)


def estimate_recall(golden: GoldenSet, hits_of: Mapping[str, list], case_ids: Iterable[str], ks: Iterable[int],
                    design: Design, min_coverage: float = 0.5, depth: int | None = None,
                    method: str = "basic", samples: int = 500, seed: int = 13,
                    interval: str = "t") -> dict[int, Estimate]:
    """recall@k for each k over ``case_ids``: ``hits_of[case_id]`` the case's ranked hits (Hit-like).
    ``interval`` (unit case): ``t`` or ``normal`` (:func:`.ipw.difference_mean`)."""
    cases = {c.case_id: c for c in golden.cases}
    ks, case_ids = list(ks), list(case_ids)
    depth = depth or max(ks)
    if design.unit == "case":
        return _estimate_by_case(golden, cases, hits_of, case_ids, ks, design, min_coverage, depth, interval)
    per_k: dict[int, list[list[Term]]] = {k: [] for k in ks}
    for cid in case_ids:
        case = cases[cid]
        refs = credit(case, list(hits_of[cid])[:depth], min_coverage).refs
        for k in ks:
            per_k[k].append(case_terms(case, refs, k, design))
    if method == "linear":
        return {k: ratio_mean(per_k[k], design.strata) for k in ks}
    return {k: ratio_mean_bootstrap(per_k[k], design.strata, samples=samples, seed=seed, method=method)[0] for k in ks}


def _estimate_by_case(golden: GoldenSet, cases: dict, hits_of, case_ids: list[str], ks: list[int], design: Design,
                      min_coverage: float, depth: int, interval: str = "t") -> dict[int, Estimate]:
    parts = _case_parts(golden, cases, hits_of, case_ids, ks, design, min_coverage, depth)
    return {k: difference_mean(base, deltas, design.strata, interval=interval) for k, (base, deltas) in parts.items()}


def _case_values(golden: GoldenSet, cases: dict, hits_of, case_ids: list[str], ks: list[int], design: Design,
                 min_coverage: float, depth: int) -> dict[str, tuple[list[float], list[float]]]:
    """Per case (``case_ids``): its recall@k for each k on the labels without the sample (base) and
    with them (full). Only a drawn case's full value can differ from its base."""
    sampled_ids = set(design.stratum_of)
    base_set = resolve(tuple(r for r in golden.records if r.id not in sampled_ids), golden.path, golden.digest,
                       golden.head)
    base_cases = {c.case_id: c for c in base_set.cases}
    out = {}
    for cid in case_ids:
        hits = list(hits_of[cid])[:depth]
        full_case, base_case = cases[cid], base_cases.get(cid)
        full_refs = credit(full_case, hits, min_coverage).refs
        if base_case is None or not base_case.relevant:  # no evidence without the sample: cannot happen (cases
            base_case, base_refs = full_case, full_refs  # have their own), kept as its full value
        else:
            base_refs = credit(base_case, hits, min_coverage).refs
        out[cid] = ([_recall(base_case, base_refs, k) for k in ks], [_recall(full_case, full_refs, k) for k in ks])
    return out


def _case_parts(golden: GoldenSet, cases: dict, hits_of, case_ids: list[str], ks: list[int], design: Design,
                min_coverage: float, depth: int) -> dict[int, tuple[list[float], dict]]:
    """Per k: each case's recall on the labels without the sample (``base``, in ``case_ids`` order)
    and, per stratum, the corrections (recall with the sample's labels minus base) of its drawn cases."""
    values = _case_values(golden, cases, hits_of, case_ids, ks, design, min_coverage, depth)
    stratum_of_case = {cid: key for key, ids in design.drawn.items() for cid in ids}
    base: dict[int, list[float]] = {k: [] for k in ks}
    deltas: dict[int, dict] = {k: defaultdict(list) for k in ks}
    for cid in case_ids:
        b, f = values[cid]
        for i, k in enumerate(ks):
            base[k].append(b[i])
            if cid in stratum_of_case:
                deltas[k][stratum_of_case[cid]].append(f[i] - b[i])
    return {k: (base[k], deltas[k]) for k in ks}


def estimate_recall_difference(golden: GoldenSet, hits_a: Mapping[str, list], hits_b: Mapping[str, list],
                               case_ids: Iterable[str], ks: Iterable[int], design: Design, min_coverage: float = 0.5,
                               depth: int | None = None) -> dict[int, Estimate]:
    """recall@k of run A minus run B on the same cases and the same whole-case sample (unit case),
    for each k: the paired estimate (:func:`.ipw.difference_mean` of the per-case differences of base
    recall and of corrections). Its value is the difference of the two :func:`estimate_recall`
    values; its interval is that of the difference, far narrower than two separate intervals when
    the two runs find the same passages. An interval that holds 0 is a tie at this sample size.
    Pair samples have no paired estimate (ValueError)."""
    if design.unit != "case" or len(design.strata) > 1:
        raise ValueError("a paired difference needs one whole-case sample (--sample-unit case)")
    cases = {c.case_id: c for c in golden.cases}
    ks, case_ids = list(ks), list(case_ids)
    depth = depth or max(ks)
    pa = _case_parts(golden, cases, hits_a, case_ids, ks, design, min_coverage, depth)
    pb = _case_parts(golden, cases, hits_b, case_ids, ks, design, min_coverage, depth)
    out = {}
    for k in ks:
        (base_a, d_a), (base_b, d_b) = pa[k], pb[k]
        base = [x - y for x, y in zip(base_a, base_b)]
        deltas = {key: [x - y for x, y in zip(d_a.get(key, ()), d_b.get(key, ()))] for key in design.strata}
        out[k] = difference_mean(base, deltas, design.strata)
    return out


def sampled_metrics(result) -> tuple[dict[str, float], list[str], dict | None]:
    """(MLflow metrics, summary lines, :func:`case_table`) of a run (an ExperimentResult) scored on
    sampled labels; ``({}, [], None)`` when no label carries a sampling design or the run is scored per
    document. A whole-case sample's estimates come from its case table, so the per-case values are
    computed once for both (the base golden set is resolved once)."""
    design = sampling_design(result.golden.records)
    p = result.settings.eval
    per_case = result.eval.per_case
    if design is None or p.level != "chunk" or per_case.empty:
        return {}, [], None
    if design.unit == "mixed" or (design.unit == "case" and len(design.strata) > 1):
        return {}, [f"sampled labels: {design.pairs} judgements drawn by several samples of different kinds; "
                    "not estimated (one case sample, or pair samples only)"], None
    hits_of = {cid: ranked.hits for cid, ranked in result.results.items()}
    case_ids = list(per_case["case_id"])
    table = case_table(result.golden, hits_of, case_ids, p.ks, design, p.min_coverage, p.depth_needed)
    if table is not None:
        ests = {k: table_estimate(table, k) for k in p.ks}
    else:
        ests = estimate_recall(result.golden, hits_of, case_ids, p.ks, design, p.min_coverage, p.depth_needed)
    what = "cases" if design.unit == "case" else "pairs"
    lines = [f"sampled labels: {design.sampled_units} of {design.population} {what} drawn ({design.pairs} judgements); "
             "recall@k with the whole pool judged, estimated (95% label-sampling interval):"]
    if design.unit == "pair":
        lines[0] += " [pair sampling: biased on cases with few relevant passages, the interval may not hold]"
    metrics: dict[str, float] = {}
    for k, e in ests.items():
        name = f"ipw_recall_at_{k}"
        metrics.update({name: e.value, f"{name}.ci_low": e.low, f"{name}.ci_high": e.high, f"{name}.se": e.se})
        plain = result.eval.metrics.get(f"recall_at_{k}")
        lines.append(f"  recall@{k} {e.describe()}" + (f" (scored with unjudged = miss: {plain:.3f})"
                                                        if plain is not None else ""))
    metrics["ipw.sampled_units"] = float(design.sampled_units)
    metrics["ipw.population"] = float(design.population)
    return metrics, lines, table


# A run scored on a whole-case sample keeps each case's base and full recall@k in this artifact, so two
# runs can be compared paired on the same sample later (rag-exp compare, promote, the gate) without
# their ranked lists: the paired estimator needs only these per-case values and the design.
ARTIFACT = "sampled_labels.json"


def case_table(golden: GoldenSet, hits_of: Mapping[str, list], case_ids: Iterable[str], ks: Iterable[int],
               design: Design, min_coverage: float = 0.5, depth: int | None = None) -> dict | None:
    """The run's side of a paired sampled comparison, as JSON: the design (sample id, stratum,
    population ``N``, drawn ``n``), ``ks``, and per case its base recall@k (labels without the sample)
    and, for a drawn case, its correction (with them, minus base). None unless one whole-case sample."""
    if design.unit != "case" or len(design.strata) != 1:
        return None
    ks, case_ids = list(ks), list(case_ids)
    cases = {c.case_id: c for c in golden.cases}
    values = _case_values(golden, cases, hits_of, case_ids, ks, design, min_coverage, depth or max(ks))
    ((sample_id, stratum), st), = design.strata.items()
    drawn = design.drawn.get((sample_id, stratum), frozenset())
    return {"sample": sample_id, "stratum": stratum, "population": st.population, "sampled": st.sampled,
            "golden": golden.digest, "ks": ks,
            "cases": {cid: {"base": b, **({"delta": [x - y for x, y in zip(f, b)]} if cid in drawn else {})}
                      for cid, (b, f) in values.items()}}


def table_problem(table) -> str:
    """Why ``table`` (a logged :func:`case_table`, read back) cannot be used, or "" when it can: an
    artifact edited by hand or cut short must not end compare in a traceback."""
    if not isinstance(table, Mapping):
        return "not a JSON object"
    missing = [key for key in ("sample", "stratum", "population", "sampled", "ks", "cases") if key not in table]
    if missing:
        return f"no {', '.join(missing)}"
    ks, cases = table["ks"], table["cases"]
    if not isinstance(ks, list) or not isinstance(cases, Mapping):
        return "ks is not a list or cases is not an object"
    n, big_n = table["sampled"], table["population"]
    if not (isinstance(n, int) and isinstance(big_n, int) and 0 < n <= big_n):
        return f"sampled {n!r} of population {big_n!r}"

    def per_k(values) -> bool:
        return isinstance(values, list) and len(values) == len(ks) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)

    for cid, row in cases.items():
        if not isinstance(row, Mapping) or not per_k(row.get("base")) or ("delta" in row and not per_k(row["delta"])):
            return f"case {cid}: base / delta do not hold one number per k"
    return ""


def table_disagreement(table: Mapping, scored: Mapping[str, Mapping[int, float]], tol: float = 1e-9) -> str:
    """Where a readable ``table`` contradicts the run's own per-case values (``scored``: case id ->
    {k: recall@k}, the run's ``per_case.json``), or "": a case's recall with every label (base, plus
    its correction when drawn) is what the run scored it. A table edited by hand (every ``base`` set
    to 1.0) then names the first case that gives it away instead of moving the estimate."""
    if not scored:  # the run was read without its per-case table: nothing to check against
        return ""
    for cid, row in table["cases"].items():
        values = scored.get(cid)
        if values is None:
            return f"case {cid} is not in the run's per_case.json"
        for i, k in enumerate(table["ks"]):
            full = row["base"][i] + (row["delta"][i] if "delta" in row else 0.0)
            if k in values and abs(full - values[k]) > tol:
                return f"case {cid}: recall@{k} {full:.3f} here, {values[k]:.3f} in the run's per_case.json"
    return ""


def _design_of(table: Mapping) -> tuple:
    return table["sample"], table["stratum"], table["population"], table["sampled"]


def table_estimate(table: Mapping, k: int) -> Estimate:
    """recall@k of one run from its :func:`case_table` (the value :func:`estimate_recall` gives)."""
    i = table["ks"].index(k)
    rows = table["cases"].values()
    st = Stratum(table["population"], table["sampled"])
    return difference_mean([r["base"][i] for r in rows], {"s": [r["delta"][i] for r in rows if "delta" in r]},
                           {"s": st})


def table_difference(a: Mapping, b: Mapping, k: int) -> tuple[Estimate | None, str]:
    """recall@k of run B minus run A, paired over the cases both scored, from their :func:`case_table`
    s: (the estimate, "") or (None, why not). Both must hold the same sample of the same golden set:
    otherwise the two estimates answer different questions and no pairing is valid."""
    if _design_of(a) != _design_of(b) or a.get("golden") != b.get("golden"):
        return None, "the two runs were not scored on the same case sample of the same golden set"
    if k not in a["ks"] or k not in b["ks"]:
        return None, f"recall@{k} is not in both runs' sampled estimates"
    ia, ib = a["ks"].index(k), b["ks"].index(k)
    common = [cid for cid in a["cases"] if cid in b["cases"]]
    if not common:
        return None, "no case scored by both runs"
    base = [b["cases"][c]["base"][ib] - a["cases"][c]["base"][ia] for c in common]
    deltas = [b["cases"][c]["delta"][ib] - a["cases"][c]["delta"][ia] for c in common
              if "delta" in a["cases"][c] and "delta" in b["cases"][c]]
    return difference_mean(base, {"s": deltas}, {"s": Stratum(a["population"], a["sampled"])}), ""

