"""Seconds the secret redaction takes on long, hostile lines (issue 55 probe 4).

The redaction runs on every line `corpus show` prints and on every command-line argument (a
100,000-character `golden add --query` went through it before its 4,000 limit was checked).
Its patterns once tried a match from every letter of a run and scanned the run each time:
quadratic. Usage:

    .venv/bin/python tools/redaction_time.py [--sizes 10000,40000,300000]

Run it against another checkout with PYTHONPATH=/that/tree to measure before/after.
"""

from __future__ import annotations

import argparse
import time

from rag_experiments import redaction

SHAPES = {
    "letters": lambda n: "a" * n,
    "dotted words": lambda n: "a." * (n // 2),
    "query marks": lambda n: "x://h?" + "?" * n,
    "spaces after password=": lambda n: "password= " + " " * n + "a",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,40000,300000")
    args = parser.parse_args()
    for n in (int(s) for s in args.sizes.split(",")):
        for name, make in SHAPES.items():
            text = make(n)
            start = time.perf_counter()
            redaction.redact_text(text)
            redaction.register_argv([f"x={text}"])
            print(f"{n:>8,} {name:<24} {time.perf_counter() - start:8.3f} s", flush=True)


if __name__ == "__main__":
    main()
