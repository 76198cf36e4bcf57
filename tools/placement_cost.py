"""Placement cost per method on two real stacks' own chunks over a corpus folder (issue 49, B3/B5).

The stacks are the libraries' own loaders and splitters, as their docs write them:

* ``langchain``: ``TextLoader`` per file + ``RecursiveCharacterTextSplitter(chunk_size=800,
  chunk_overlap=100, add_start_index=True)``; a passage is the LangChain ``Document`` as it comes
  (``metadata["source"]`` the file path, ``metadata["start_index"]`` counted in the raw file, front
  matter included);
* ``llamaindex``: ``SimpleDirectoryReader`` + ``SentenceSplitter(chunk_size=256, chunk_overlap=32,
  tokenizer=str.split)``; a passage is ``{file_path, start_char_idx, end_char_idx,
  text=node.get_content(metadata_mode="all")}`` (metadata lines in front of the text).

Each stack's chunks are placed as variants (``--variants``): with its offsets (``offsets+text``),
with the text alone (``text``), and two that reach the fuzzy matcher: ``altered`` (text alone,
every 10th plain word replaced: what a system that rewrites its chunks returns) and ``elsewhere`` (text
alone, named as the next document: a passage that is in no place of the document it names, the
worst case). Every chunk of the corpus (or every n-th, ``--every``; the fuzzy variants take every
``--fuzzy-every``-th), one :class:`Placer` per variant (its per-document indexes are built on first
use, inside the timed calls, as in a run). Prints, per stack, variant and method: passages, p50 /
p95 / max ms per passage, and passages that would have aborted the run (an ExternalResultError
raised by the placer).

    .venv/bin/python tools/placement_cost.py                       # demo corpus, every chunk
    .venv/bin/python tools/placement_cost.py --warm                # per-document indexes built first
    PYTHONPATH=/tmp/old .venv/bin/python tools/placement_cost.py   # an older rag_experiments
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path


def langchain_passages(folder: Path) -> list:
    from langchain_community.document_loaders import TextLoader
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    docs = []
    for f in sorted(folder.rglob("*.md")):
        docs += TextLoader(str(f), encoding="utf-8").load()
    splitter = RecursiveCharacterTextSplitter(chunk_size=800, chunk_overlap=100, add_start_index=True)
    return splitter.split_documents(docs)


def llamaindex_passages(folder: Path) -> list:
    from llama_index.core import SimpleDirectoryReader
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.schema import MetadataMode

    docs = SimpleDirectoryReader(str(folder), required_exts=[".md"], recursive=True).load_data()
    nodes = SentenceSplitter(chunk_size=256, chunk_overlap=32, tokenizer=str.split).get_nodes_from_documents(docs)
    return [{"file_path": n.metadata["file_path"], "start": n.start_char_idx, "end": n.end_char_idx,
             "text": n.get_content(metadata_mode=MetadataMode.ALL)} for n in nodes]


def text_only(p):
    from rag_experiments.retrieval.passages import Passage

    return Passage(p.document, text=p.text)


def altered(p, stack: str):
    """Every 10th plain word (letters only) replaced; LlamaIndex's metadata lines (up to the template's blank line) kept."""
    from rag_experiments.retrieval.passages import Passage

    keep = p.text.index("\n\n") + 2 if stack == "llamaindex" and "\n\n" in p.text else 0
    n, out = 0, []
    for line in p.text[keep:].split("\n"):
        words = line.split(" ")
        for i, w in enumerate(words):
            if w.isalpha():  # a plain word: an identifier or code changed is another passage
                n += 1
                words[i] = w if n % 10 else "xyzzy"
        out.append(" ".join(words))
    return Passage(p.document, text=p.text[:keep] + "\n".join(out))


def elsewhere(p, names: list[str]):
    from rag_experiments.retrieval.passages import Passage

    stem = Path(p.document).stem
    i = next((k for k, n in enumerate(names) if Path(n).stem == stem), 0)
    return Passage(names[(i + 1) % len(names)], text=p.text)


def measure(placer_cls, docs, passages, where: str, warm: bool = False) -> tuple[dict[str, list[float]], int]:
    from rag_experiments.retrieval.passages import ExternalResultError

    placer = placer_cls(docs)
    if warm:  # build every per-document index first: the search alone is timed
        for i, p in enumerate(passages):
            try:
                placer.place(p, f"{where} #{i}")
            except ExternalResultError:
                pass
    times: dict[str, list[float]] = defaultdict(list)
    aborts = 0
    for i, p in enumerate(passages):
        t = time.perf_counter()
        try:
            method = placer.place(p, f"{where} #{i}").method
        except ExternalResultError:
            method, aborts = "abort", aborts + 1
        times[method].append((time.perf_counter() - t) * 1000)
    return times, aborts


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=None, help="a folder of Markdown files (default: the demo corpus)")
    ap.add_argument("--every", type=int, default=1, help="place every n-th chunk only")
    ap.add_argument("--fuzzy-every", type=int, default=5, help="place every n-th chunk in the fuzzy variants")
    ap.add_argument("--stacks", default="langchain,llamaindex")
    ap.add_argument("--variants", default="offsets+text,text,altered,elsewhere")
    ap.add_argument("--warm", action="store_true", help="place each variant once untimed first (indexes built)")
    args = ap.parse_args()

    from rag_experiments.corpus.loader import demo_corpus_dir, load_corpus
    from rag_experiments.retrieval import placement
    from rag_experiments.retrieval.passages import read_passage

    folder = Path(args.corpus) if args.corpus else demo_corpus_dir()
    docs = load_corpus(str(folder))
    print(f"rag_experiments from {Path(placement.__file__).parent.parent}; corpus {folder} ({len(docs)} documents); "
          f"Placer{inspect.signature(placement.Placer)}")
    print("| stack | variant | method | passages | p50 ms | p95 ms | max ms | total s |")
    print("|---|---|---|--:|--:|--:|--:|--:|")
    builders = {"langchain": langchain_passages, "llamaindex": llamaindex_passages}
    for stack in args.stacks.split(","):
        every = [read_passage(p, stack) for p in builders[stack](folder)]
        with_offsets, sample = every[:: args.every], every[:: args.fuzzy_every]
        names = sorted(d.source_uri for d in docs)
        variants = {"offsets+text": lambda: with_offsets, "text": lambda: [text_only(p) for p in with_offsets],
                    "altered": lambda: [altered(p, stack) for p in sample],
                    "elsewhere": lambda: [elsewhere(p, names) for p in sample]}
        for variant in args.variants.split(","):
            passages = variants[variant]()
            times, _ = measure(placement.Placer, docs, passages, stack, args.warm)
            order = [m for m in (*placement.METHODS, "abort") if m in times]
            for m in order:
                xs = times[m]
                print(f"| {stack} | {variant} | {m} | {len(xs)} | {statistics.median(xs):.2f} | {pct(xs, 0.95):.2f} | "
                      f"{max(xs):.1f} | {sum(xs) / 1000:.2f} |")
            xs = [x for ms in times.values() for x in ms]
            print(f"| {stack} | {variant} | **all** | {len(xs)} | {statistics.median(xs):.2f} | "
                  f"{pct(xs, 0.95):.2f} | {max(xs):.1f} | {sum(xs) / 1000:.2f} |")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
