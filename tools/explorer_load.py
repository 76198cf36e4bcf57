"""How the case explorer holds up at scale: build a page of N synthetic cases (default 10,000)
the way compare builds one (tracking.explorer.explorer_data: two runs' top 5, evidence in
context, verdicts, ranks in the other list), then open it in Debian's Chromium and time the
first page drawn, a filter and the next page.

    .venv/bin/python tools/explorer_load.py [--cases 10000] [--out /tmp/explorer_10k.html]

Prints the build time (explorer_data + render, wall and CPU), the page's size and the browser
timings (ms, median of --repeat loads).
The texts are random words (each passage unique, ~320 characters shown per hit)."""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import pandas as pd

from rag_experiments.golden.records import Span
from rag_experiments.golden.resolve import EvalCase, Evidence, GoldenSet
from rag_experiments.tracking.explorer import Side, explorer_data, render
from rag_experiments.types import Hit, RankedList

WORDS = ("index vacuum planner tuple page buffer replica wal checkpoint lock query join hash sort "
         "memory cost statistics autovacuum column table schema role grant trigger function").split()


def synthetic(n: int, seed: int = 7):
    rng = random.Random(seed)
    texts, cases, lists_a, lists_b, rows_a, rows_b = {}, [], {}, {}, [], []
    for i in range(n):
        doc = f"doc{i % 2000}.html"
        if doc not in texts:
            texts[doc] = " ".join(rng.choice(WORDS) for _ in range(3000))
        text = texts[doc]
        starts = sorted(rng.sample(range(0, len(text) - 600, 37), 12))
        spans = [(s, s + 400) for s in starts]
        ev = spans[0]
        cid = f"c-{i:05d}"
        cases.append(EvalCase(cid, f"question {i}: " + " ".join(rng.choice(WORDS) for _ in range(10)),
                              rng.choice(["exact", "paraphrase"]), rng.choice(["config", "sql", "functions"]),
                              (Evidence(Span(doc, doc, ev[0], ev[1], text[ev[0]:ev[1]], "h"), 2, f"{cid}#0"),)))
        for lists, rows in ((lists_a, rows_a), (lists_b, rows_b)):
            order = spans[:]
            rng.shuffle(order)
            hits = tuple(Hit(f"h{j}", doc, doc, "t", s, e, 1.0 / (j + 1), j + 1) for j, (s, e) in enumerate(order[:10]))
            lists[cid] = RankedList("", hits)
            first = next((j + 1 for j, h in enumerate(hits) if (h.start, h.end) == ev), None)
            rows.append({"case_id": cid, "query": cases[-1].query, "kind": cases[-1].kind,
                         "doc_type": cases[-1].doc_type, "recall_at_5": 1.0 if first and first <= 5 else 0.0,
                         "first_relevant_rank": first})
    golden = GoldenSet(path=Path("synthetic.jsonl"), digest="s", cases=tuple(cases))
    return (Side("baseline", pd.DataFrame(rows_a), lists_a), Side("candidate", pd.DataFrame(rows_b), lists_b),
            golden, texts)


def browser_timings(path: Path, repeat: int) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    out: dict[str, list[float]] = {"first page drawn": [], "filter (outcome=lost)": [], "next page": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                          "--disable-component-update", "--disable-sync"])
        for _ in range(repeat):
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.goto(path.resolve().as_uri(), wait_until="commit")
            page.wait_for_selector("section.case")
            # from the navigation's start to the first page of cases in the DOM
            out["first page drawn"].append(page.evaluate(
                "() => Number(document.body.dataset.drawn) - performance.timeOrigin"))
            for what, act in (("filter (outcome=lost)", "document.getElementById('f-outcome').value='lost';"
                                                        "document.getElementById('f-outcome').dispatchEvent(new Event('change'))"),
                              ("next page", "document.getElementById('next').click()")):
                out[what].append(page.evaluate(f"() => {{ const t = performance.now(); {act}; return performance.now() - t; }}"))
            page.close()
        browser.close()
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--out", default="/tmp/explorer_10k.html")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    a, b, golden, texts = synthetic(args.cases)
    # wall and CPU time: on a shared machine the wall clock says more about the neighbours than the code
    t, cpu = time.perf_counter(), time.process_time()
    data = explorer_data(a, b, golden, texts, "recall_at_5")
    built, built_cpu = time.perf_counter() - t, time.process_time() - cpu
    t, cpu = time.perf_counter(), time.process_time()
    page = render(data)
    rendered, rendered_cpu = time.perf_counter() - t, time.process_time() - cpu
    out = Path(args.out)
    out.write_text(page, encoding="utf-8")
    print(f"{args.cases} cases: build {built + rendered:.2f} s wall, {built_cpu + rendered_cpu:.2f} s CPU "
          f"(data {built:.2f} s / {built_cpu:.2f} s CPU, page rendered {rendered:.2f} s / {rendered_cpu:.2f} s CPU), "
          f"{out.stat().st_size / 1e6:.1f} MB ({len(data['passages'])} passages), {out}")
    print(f"W/T/L {data['counts']['won']}/{data['counts']['tied']}/{data['counts']['lost']}")
    for what, ms in browser_timings(out, args.repeat).items():
        print(f"{what}: {ms:.0f} ms (median of {args.repeat})")


if __name__ == "__main__":
    main()
