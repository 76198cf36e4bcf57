"""Lines and modules per layer of the package, at any commit (issue 46's "lines per layer").

The layers are the ones `.importlinter` declares at the last commit given, in its order (the contract the build enforces);
a module belongs to the first layer whose name is its own or a prefix of it, else to "(outside
the chain)". Reads the tree through git, so two commits are compared without a checkout:

    python tools/layer_lines.py                    # the working tree's HEAD
    python tools/layer_lines.py 6cd198d HEAD       # before / after, side by side

Lines are physical lines of the .py files (blank and comment lines included: what a reader scrolls).
"""

from __future__ import annotations

import argparse
import configparser
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = "(outside the chain)"


def layers(rev: str) -> list[str]:
    text = _git("show", f"{rev}:.importlinter")
    parser = configparser.ConfigParser()
    parser.read_string(text)
    raw = parser["importlinter:contract:layers"]["layers"]
    return [line.strip() for line in raw.splitlines() if line.strip()]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def module_name(path: str) -> str:
    name = path[: -len(".py")].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def layer_of(module: str, order: list[str]) -> str:
    # the longest declared prefix wins (rag_experiments.cli before rag_experiments)
    for layer in sorted(order, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return layer
    return OUTSIDE


def count(rev: str, order: list[str]) -> dict[str, tuple[int, int]]:
    files = [p for p in _git("ls-tree", "-r", "--name-only", rev, "rag_experiments").splitlines() if p.endswith(".py")]
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for path in files:
        text = _git("show", f"{rev}:{path}")
        entry = out[layer_of(module_name(path), order)]
        entry[0] += 1
        entry[1] += text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    return {k: (v[0], v[1]) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("revs", nargs="*", default=["HEAD"], help="one commit, or two (before, after)")
    args = ap.parse_args(argv)
    if len(args.revs) > 2:
        ap.error("give one commit or two (before, after)")
    # the last commit's layers sort both (a commit before the contract existed has none of its own)
    order = layers(args.revs[-1])
    counts = [count(rev, order) for rev in args.revs]
    names = [n for n in order if any(n in c for c in counts)]
    names += sorted({n for c in counts for n in c} - set(names))
    head = " | ".join(f"modules, lines at {rev}" for rev in args.revs)
    print(f"| layer | {head} |")
    print("|---|" + "---|" * len(args.revs))
    totals = [[0, 0] for _ in counts]
    for name in names:
        cells = []
        for i, c in enumerate(counts):
            m, n = c.get(name, (0, 0))
            totals[i][0] += m
            totals[i][1] += n
            cells.append(f"{m}, {n:,}")
        print(f"| {name.removeprefix('rag_experiments.')} | " + " | ".join(cells) + " |")
    print("| **total** | " + " | ".join(f"{m}, {n:,}" for m, n in totals) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
