"""``rag-exp golden power``: what differences this golden set can detect, per metric and segment.

    rag-exp golden power                                  # the champion vs the newest run
    rag-exp golden power --delta 0.02 --metric recall_at_5 --metric mrr_at_10
    rag-exp golden power --runs RUN_A RUN_B               # any two runs (A = baseline)

From the paired per-case differences of two runs (the spread of ``d = b - a`` over the cases), for
each metric on all cases and on each query kind (exact, paraphrase, production): the smallest
difference the paired randomization test would find with power 0.8 at α 0.05 (MDE), the power to
detect ``--delta`` and the cases that would detect it, and the cases that would detect the Δ the two
runs show. Formulas and why: :mod:`rag_experiments.stats.power`.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from ..errors import UserError

#: samples of the simulated power where the normal approximation is coarse (400: a standard error of
#: at most 2.5 points; about a second a row)
SIM_REPS = 400


def register(sub: Any, golden_arg: Any, corpus_arg: Any) -> None:
    sp = sub.add_parser(
        "power", help="the smallest differences this golden set can detect (per metric and query kind)",
        description="From two runs' per-case tables (default: the champion of record vs the newest FINISHED "
        "run; no champion: the two newest runs, the older as baseline): per metric and per query kind, the "
        "observed Δ and the spread of the per-case differences, the minimum detectable effect (MDE: the "
        "smallest |Δ| the paired randomization test finds with the given power at --alpha), the power to "
        "detect --delta, and the cases needed to detect --delta and the Δ observed. The prediction is "
        "checked by simulation: tools/power_simulation.py.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n")[1])
    src = sp.add_mutually_exclusive_group()
    src.add_argument("--runs", nargs=2, metavar=("RUN_A", "RUN_B"), help="the two runs (RUN_A = baseline)")
    src.add_argument("--champion", action="store_true",
                     help="the champion of record vs the newest FINISHED run (the default when a champion exists)")
    sp.add_argument("--name", default="default", help="champion name (default: default)")
    sp.add_argument("--delta", type=float, default=0.02, help="the difference to plan for (default: 0.02)")
    sp.add_argument("--metric", action="append", default=None, metavar="METRIC",
                    help="metric, repeatable (default: the baseline's headline metrics)")
    sp.add_argument("--alpha", type=float, default=0.05, help="significance level (default: 0.05)")
    sp.add_argument("--power", type=float, default=0.8, help="the power asked for (default: 0.8)")
    sp.add_argument("--markdown", action="store_true", help="print a GitHub-flavoured Markdown table")
    sp.set_defaults(func=cmd_power)


def _pair(args: argparse.Namespace, c) -> tuple[Any, Any, str]:
    from ..tracking.champion import current_champion
    from ..tracking.runs import get_run, search

    if args.runs:
        return get_run(args.runs[0], c=c), get_run(args.runs[1], c=c), "the runs given"
    champion = current_champion(args.name, c)
    finished = [r for r in search("attributes.status = 'FINISHED'", per_case=False, order="DESC", max_results=200, c=c)
                if r.tags.get("sweep") != "parent" and r.tags.get("comparison") != "true" and r.tags.get("golden_sha256")]
    if champion is not None:
        newest = next((r for r in finished if r.id != champion.run.id), None)
        if newest is None:
            raise UserError("no FINISHED run besides the champion's to pair with it",
                            hint="run the golden set once (rag-exp run), or give --runs RUN_A RUN_B")
        return champion.run, get_run(newest.id, c=c), (f"the champion of record ({champion.run.id[:12]}) vs the "
                                                        f"newest run ({newest.id[:12]})")
    if args.champion:
        raise UserError(f"no champion named {args.name!r}", hint="promote a run first, or give --runs RUN_A RUN_B")
    if len(finished) < 2:
        raise UserError(f"need two FINISHED runs, found {len(finished)}", hint="give --runs RUN_A RUN_B")
    b, a = finished[0], next((r for r in finished[1:] if r.golden == finished[0].golden), finished[1])
    return get_run(a.id, c=c), get_run(b.id, c=c), f"the two newest runs ({a.id[:12]} vs {b.id[:12]}; no champion)"


def rows(base, other, metrics: list[str], delta: float, alpha: float, power: float) -> list[dict]:
    """One dict per metric and segment (all, then each query kind)."""
    import numpy as np

    from ..evaluation.metric_key import MetricKey, Segment
    from ..stats.power import FEW_DIFFERING, estimate, predicted_power, simulated_power, tilt_weights
    from ..tracking.compare import Pairing

    pairing = Pairing(base.per_case, other.per_case)
    kinds = list(dict.fromkeys(str(k) for k in base.per_case.get("kind", []) if k is not None and k == k))
    out = []
    for m in metrics:
        column = MetricKey.parse(m).column
        for seg in [None, *[Segment("kind", k) for k in sorted(kinds)]]:
            a, b = pairing.values(column, seg)
            if not len(a):
                continue
            est = estimate(a, b, alpha, power)
            simulated = None
            if 0 < est.differing < FEW_DIFFERING:
                # the normal approximation is coarse here: the tool's own test on draws of these very
                # differences, tilted to mean delta (ties kept as ties); None when no tilt reaches delta
                d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
                w = tilt_weights(d, delta)
                simulated = None if w is None else simulated_power(d, est.n, reps=SIM_REPS, seed=0, alpha=alpha,
                                                                   n_resamples=1000, weights=w)
            out.append({"metric": m, "segment": "all" if seg is None else seg.value, "n": est.n,
                        "delta": est.delta, "sd": est.sd, "differing": est.differing, "mde": est.mde,
                        "power_at_delta": predicted_power(delta, est.sd, est.n, alpha, est.step) if est.differing else None,
                        "power_simulated": simulated, "coarse": 0 < est.differing < FEW_DIFFERING,
                        "n_for_delta": est.n_for(delta), "n_for_observed": est.n_for_delta})
    return out


def _n(v: int | None) -> str:
    return "—" if v is None else f"{v:,}"


def _f(v: float | None, fmt: str = ".3f") -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def cmd_power(args: argparse.Namespace) -> int:
    from ..stats.power import FEW_DIFFERING
    from ..tracking.runs import client

    if not 0 < args.alpha < 1:
        raise UserError(f"--alpha must be in (0, 1), got {args.alpha}")
    if not 0 < args.power < 1:
        raise UserError(f"--power must be in (0, 1), got {args.power}")
    if not args.delta > 0 or math.isnan(args.delta) or math.isinf(args.delta):
        raise UserError(f"--delta must be a positive number, got {args.delta}")
    c = client()
    base, other, which = _pair(args, c)
    for r in (base, other):
        if r.per_case is None:
            raise UserError(f"run {r.id} has no per-case table (per_case.json): power needs the per-case differences",
                            hint="run with tracking.log_per_case=true")
    from ..tracking.versioned import align, not_comparable

    unlike = not_comparable([base, other], c)
    if unlike is not None:
        raise UserError(unlike.line, hint=unlike.hint)
    alignment = align([base, other], c)
    if alignment.gap is not None:
        base, other = alignment.runs
    if args.metric:
        metrics = list(dict.fromkeys(args.metric))
    else:
        from ..tracking.configured import comparison_defaults

        metrics = [m for m in comparison_defaults([base, other])[0] if not m.startswith("judged")]
    missing = [m for m in metrics if m not in base.per_case or m not in other.per_case]
    if missing:
        raise UserError(f"--metric: {', '.join(missing)} is not in both runs' per-case tables",
                        hint="e.g. " + ", ".join(c for c in base.per_case.columns if "_at_" in c and not c.startswith("judged")))
    found = rows(base, other, metrics, args.delta, args.alpha, args.power)
    head = ["metric", "segment", "n", "Δ observed", "sd(d)", "cases differ", "MDE",
            f"power at Δ {args.delta:g}", "simulated", f"n for Δ {args.delta:g}", "n for Δ observed"]
    cells = [[r["metric"], r["segment"], str(r["n"]), _f(r["delta"], "+.3f"), _f(r["sd"]),
              str(r["differing"]) + (" !" if r["coarse"] else ""), _f(r["mde"]) + (" !" if r["coarse"] else ""),
              _f(r["power_at_delta"], ".2f"), _f(r["power_simulated"], ".2f"), _n(r["n_for_delta"]),
              _n(r["n_for_observed"])]
             for r in found]
    intro = (f"{which}: baseline {base.id[:12]} ({base.label}), other {other.id[:12]} ({other.label}); "
             f"two-sided paired randomization test, α {args.alpha:g}, power {args.power:g}")
    legend = ("MDE = the smallest |Δ| these cases detect with that power; power at Δ = the chance of finding that "
              "difference significant on these cases; n for Δ = cases needed for it (with this spread of per-case "
              "differences); formulas: rag_experiments/stats/power.py, checked by tools/power_simulation.py")
    if any(r["coarse"] for r in found):
        legend += (f". ! = fewer than {FEW_DIFFERING} cases differ: the normal approximation behind MDE, power "
                   "and n is unreliable there (the test sees only the differing cases and moves in coarse steps; "
                   "it overstated power on 24 mostly tied cases, 0.31 predicted, 0.23 measured), so 'simulated' "
                   f"gives the tool's own test on {SIM_REPS} draws of these per-case differences reweighted to mean "
                   f"Δ {args.delta:g} ('—': no reweighting of them reaches it)")
    if args.markdown:
        print(intro + "\n")
        print("| " + " | ".join(head) + " |")
        print("|---|---|" + "---:|" * (len(head) - 2))
        for row in cells:
            print("| " + " | ".join(row) + " |")
        print(f"\n_{legend}_")
        return 0
    from rich.table import Table

    from ..terminal import console

    out = console()
    out.print(intro, soft_wrap=True)
    table = Table(caption=legend, caption_justify="left")
    for h in head:
        table.add_column(h, justify="left" if h in ("metric", "segment") else "right")
    for row in cells:
        table.add_row(*row)
    out.print(table)
    return 0
