"""Where a `golden label --decide A B` decision stands, under both stopping rules at once.

The transcript (docs/examples/gitdoc-decide-transcript.md) labelled through the CSV route, where each
`--decide ... --export` prints only the rule it runs with. This prints, for a golden file (any prefix of
one, to replay a labelling), the verdicts recorded, the passages left (and how many can still move Δ),
the paired Δ with a 95% t interval over the cases, the bounds line, and the decision under
`--stop confident` and `--stop certain`. Run it from the project folder:

    python decide_status.py RUN_A RUN_B experiments/golden/gitdoc.jsonl [--brief]
"""

from __future__ import annotations

import argparse
import json
import math

import scipy.stats as sps

from rag_experiments.commands.decide_labels import Decision
from rag_experiments.commands.llm_job import configured_corpus
from rag_experiments.corpus.loader import load_corpus
from rag_experiments.evaluation import bounds as B
from rag_experiments.golden.decide import said_as
from rag_experiments.golden.decide_stop import LEVEL
from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.golden.records import Judgement
from rag_experiments.golden.resolve import load_golden


def t_interval(diffs: list[float]) -> tuple[float, float, float]:
    """The mean of the per-case differences and its two-sided 95% t interval."""
    n = len(diffs)
    mean = math.fsum(diffs) / n
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = float(sps.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def status(a: str, b: str, golden: str, docs, stop: str) -> dict:
    args = argparse.Namespace(sweep=None, decide=[a, b], decide_metric=None, golden=golden, stop=stop,
                              stop_level=LEVEL, overrides=[])
    d = Decision(args, docs)
    tracker = d.tracker(d.a, d.b, d.views(load_golden(golden), d.runs), d.views(d.start, d.runs))
    state = tracker.state()
    rows = list(tracker.cases.values())
    delta = B.delta_of(tracker.metric, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                       sum(r[3] for r in rows))
    mean, lo, hi = t_interval(delta.per_case)
    s = state.settling
    return {"left": len(state.candidates), "moving": sum(1 for c in state.candidates if c.weight > 0),
            "delta": mean, "ci95": (lo, hi), "bounds": state.bounds_line, "settled": s.settled,
            "declared": said_as(s.declared, *d.names), "text": s.text(*d.names),
            "p_same": s.confidence.probability if s.confidence else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_a")
    ap.add_argument("run_b")
    ap.add_argument("golden")
    ap.add_argument("--brief", action="store_true", help="one line: both rules' decisions")
    args = ap.parse_args()
    records = [r for r in GoldenFile(args.golden).read_records() if isinstance(r, Judgement)]
    given = sum(1 for r in records if "applied_from" not in r.raw)
    docs = load_corpus(configured_corpus([]))
    both = {stop: status(args.run_a, args.run_b, args.golden, docs, stop) for stop in ("confident", "certain")}
    c = both["confident"]
    head = (f"verdicts {given} (+{len(records) - given} applied to copies), left {c['left']} ({c['moving']} can "
            f"move Δ), Δ {c['delta']:+.3f} [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}]")
    if args.brief:
        rules = "; ".join(f"{stop}: {'settled, ' + s['declared'] if s['settled'] else 'open'}"
                          + (f" (P={s['p_same']:.3f})" if s["p_same"] is not None else "")
                          for stop, s in both.items())
        print(f"{head}; {rules}")
        return
    print(head)
    print(c["bounds"])
    for stop, s in both.items():
        print(json.dumps({"stop": stop, "settled": s["settled"], "declared": s["declared"]}), s["text"])


if __name__ == "__main__":
    main()
