"""Peak memory of loading one large Markdown file, and the load time of the demo corpus (issue 55).

Writes a Markdown file of --mb MB (front matter, headings, paragraphs of varied words) into a
temporary corpus folder and loads it with ``load_corpus`` in a fresh Python process, printing the
process's peak RSS (``ru_maxrss``) and its ratio to the file; then times ``load_corpus("demo")``
(all Markdown: no converter process starts). ``--tree DIR`` loads with the package in DIR (e.g. an
older checkout made with ``git archive``), to compare before and after.

    python tools/load_memory.py --mb 100
    python tools/load_memory.py --mb 100 --tree /tmp/old-checkout
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import resource, sys, time
from rag_experiments.corpus.loader import load_corpus
t = time.perf_counter()
docs = load_corpus(sys.argv[1])
took = time.perf_counter() - t
print(sum(len(d.text) for d in docs), took, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""
# rag-exp corpus convert: the load, then the text checks (corpus.quality) over every document
CONVERT = """
import contextlib, io, resource, sys, time
from rag_experiments import cli
t = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    cli.main(["corpus", "convert", sys.argv[1]])
took = time.perf_counter() - t
print(0, took, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def write_markdown(path: Path, mb: int) -> None:
    rnd = random.Random(55)
    words = ["planner", "vacuum", "index", "tuple", "buffer", "query", "page", "lock", "heap", "scan", "the", "of"]
    with path.open("w", encoding="utf-8") as f:
        f.write("---\nsource_uri: big.html\ntitle: Big\n---\n")
        written, n = 0, 0
        while written < mb * 10**6:
            n += 1
            block = f"## Section {n}\n\n" + " ".join(rnd.choice(words) for _ in range(120)) + ".\n\n"
            f.write(block)
            written += len(block)


def measure(corpus: str, tree: str | None, code: str = CHILD) -> tuple[int, float, int]:
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = tree
    with tempfile.TemporaryDirectory() as cache:
        env["RAG_EXP_CONVERT_CACHE"] = cache
        # cwd: python -c puts the working folder first on sys.path, before PYTHONPATH's tree
        out = subprocess.run([sys.executable, "-c", code, corpus], capture_output=True, text=True, env=env,
                             check=True, cwd=cache)
    chars, seconds, rss = out.stdout.split()
    return int(chars), float(seconds), int(rss)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--tree", help="load with the package in this folder (PYTHONPATH)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "big"
        folder.mkdir()
        write_markdown(folder / "big.md", args.mb)
        size = (folder / "big.md").stat().st_size
        chars, seconds, rss = measure(str(folder), args.tree)
        print(f"big.md {size / 2**20:,.0f} MiB: {chars:,} chars loaded in {seconds:.1f} s, "
              f"peak RSS {rss / 2**20:,.0f} MiB ({rss / size:.1f}x the file)")
        _, seconds, rss = measure(str(folder), args.tree, CONVERT)
        print(f"rag-exp corpus convert of it: {seconds:.1f} s, peak RSS {rss / 2**20:,.0f} MiB ({rss / size:.1f}x the file)")
    chars, seconds, rss = measure("demo", args.tree)
    print(f"demo corpus: {chars:,} chars loaded in {seconds:.2f} s, peak RSS {rss / 2**20:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
