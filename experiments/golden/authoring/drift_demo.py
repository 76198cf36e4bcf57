"""Corpus-drift demo: edit a copy of the demo corpus, re-anchor a copy of the demo golden set.

    .venv/bin/python experiments/golden/authoring/drift_demo.py [--keep]

Never writes experiments/golden/demo.jsonl (its sha256 is checked before and after): the corpus
and the golden file are copied to a temp folder and everything happens there (``--keep`` keeps
the folder and prints its path, e.g. to run ``rag-exp golden check --golden TMP/demo.jsonl
--corpus TMP/corpus`` by hand).

The edits (5 pages, each holding labelled passages), as a documentation update might make them:

1. sql-reindex: two paragraphs inserted above "## Parameters" (spans below shift: ``moved``;
   spans above stay in place: no record).
2. runtime-config-replication: the labelled sentence about ``wal_retrieve_retry_interval``
   reworded ("should wait when WAL data is not available" -> "waits when no WAL data is
   available"): ``fuzzy``.
3. sql-vacuum: the labelled sentence "An index can participate in parallel vacuum ..." deleted:
   ``stale``; the next labelled sentence of the same paragraph only shifts: ``moved``.
4. sql-createview: the `security_barrier` paragraph moved to the end of the page under a new
   heading: its two labelled sentences ``moved``; a judgement whose span covered it and the
   paragraph before is split apart: ``stale`` (it was judged on text that no longer exists
   together).
5. functions-enum: the whole page deleted: its 2 spans ``stale`` (both cases become all-stale,
   excluded from metrics).

Then the whole-set timing (550 spans, corpus edited in memory, dry runs): unchanged corpus;
every page edited above its passages (every span ``moved``); one word replaced in every labelled
passage (the fuzzy search for nearly every span: the worst case).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import re
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from rag_experiments.corpus.loader import demo_corpus_dir, load_corpus  # noqa: E402
from rag_experiments.commands.golden import fix_command  # noqa: E402
from rag_experiments.golden.anchoring import check, drift_status, reanchor  # noqa: E402
from rag_experiments.golden.resolve import current, load_golden  # noqa: E402
from rag_experiments.golden.golden_file import GoldenFile  # noqa: E402

DEMO_GOLDEN = ROOT / "experiments" / "golden" / "demo.jsonl"


def replace_once(path: Path, old: str, new: str) -> None:
    raw = path.read_text(encoding="utf-8")
    n = raw.count(old)
    if n != 1:
        raise SystemExit(f"{path.name}: expected the edited text once, found it {n} times: {old[:60]!r}")
    path.write_text(raw.replace(old, new), encoding="utf-8")


def apply_edits(corpus: Path) -> dict[str, str]:
    """The 5 documented edits; returns doc id -> what was done."""
    replace_once(corpus / "sql-reindex.md", "\n## Parameters\n",
                 "\nReindexing is also useful after changing the collation version of the operating "
                 "system's C library, since indexes on text columns may then be ordered incorrectly.\n\n"
                 "Routine reindexing is seldom needed: check index bloat first.\n\n## Parameters\n")
    replace_once(corpus / "runtime-config-replication.md",
                 "Specifies how long the standby server should wait when WAL data is not available from any sources",
                 "Specifies how long the standby server waits when no WAL data is available from any sources")
    replace_once(corpus / "sql-vacuum.md",
                 "An index can participate in parallel vacuum if and only if the size of the index is more than "
                 "min_parallel_index_scan_size. ", "")
    para = ("If an automatically updatable view is marked with the `security_barrier` property then all the view's "
            "`WHERE` conditions")
    page = corpus / "sql-createview.md"
    raw = page.read_text(encoding="utf-8")
    start = raw.index(para)
    end = raw.index("\n\n", start)
    moved = raw[start:end]
    page.write_text(raw[:start].rstrip("\n") + "\n\n" + raw[end:].lstrip("\n").rstrip("\n")
                    + "\n\n## Security barrier views\n\n" + moved + "\n", encoding="utf-8")
    (corpus / "functions-enum.md").unlink()
    return {
        "postgresql-15/sql-reindex.html": "2 paragraphs inserted above ## Parameters",
        "postgresql-15/runtime-config-replication.html": "labelled sentence reworded",
        "postgresql-15/sql-vacuum.html": "labelled sentence deleted",
        "postgresql-15/sql-createview.html": "labelled paragraph moved to the end of the page",
        "postgresql-15/functions-enum.html": "page deleted",
    }


def reword_every_passage(docs, records):
    """One word replaced in every labelled passage that no other span overlaps, and a line
    inserted at the top of every page (the fuzzy-search worst case)."""
    texts = {d.doc_id: d.text for d in docs}
    keys: dict[str, set] = defaultdict(set)
    for sr in current(records).spans:
        keys[sr.original.doc_id].add(sr.original.key)
    for did, ks in keys.items():
        alone = [k for k in ks if not any(k2 != k and k2[1] < k[2] and k[1] < k2[2] for k2 in ks)]
        t = texts[did]
        for _, s, e in sorted(alone, key=lambda k: -k[1]):
            words = list(re.finditer(r"[A-Za-z]{4,}", t[s:e]))
            if words:
                w = words[len(words) // 2]
                t = t[:s + w.start()] + "changed" + t[s + w.end():]
        texts[did] = t
    return [dataclasses.replace(d, text="Edited page.\n\n" + texts[d.doc_id]) for d in docs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", action="store_true", help="keep the temp folder")
    args = ap.parse_args()
    demo_sha = hashlib.sha256(DEMO_GOLDEN.read_bytes()).hexdigest()
    tmp = Path(tempfile.mkdtemp(prefix="drift-demo-"))
    try:
        corpus = tmp / "corpus"
        shutil.copytree(demo_corpus_dir(), corpus)
        golden = tmp / "demo.jsonl"
        shutil.copy(DEMO_GOLDEN, golden)
        shutil.copy(DEMO_GOLDEN.with_name("demo.manifest.json"), tmp / "demo.manifest.json")
        edits = apply_edits(corpus)
        t = time.perf_counter()
        docs = load_corpus(corpus, "demo")
        load_s = time.perf_counter() - t

        print("== 5 edited pages")
        drift = drift_status(golden, docs)
        print(f"drift_status before reanchor: {drift}")
        rep = reanchor(golden, docs)
        print(f"reanchor: {rep.summary()}  (+ corpus load {load_s:.2f} s)")
        per_doc: dict[str, Counter] = defaultdict(Counter)
        for o in rep.outcomes:
            per_doc[o.old.doc_id][o.outcome] += 1
        for did, what in edits.items():
            print(f"  {did.split('/')[-1]:38} {what:48} {dict(per_doc.get(did, {})) or '-'}")
        for o in rep.outcomes:
            if o.outcome in ("fuzzy", "stale"):
                print(f"  {o.outcome:5} {o.ref:18} {o.similarity if o.similarity is not None else '-'}  {o.note}")
        again = reanchor(golden, docs)
        print(f"second run: {again.summary()}")
        gs = load_golden(golden)
        excluded = [c.case_id for c in gs.cases if c.all_stale]
        print(f"after: drift_status {drift_status(golden, docs)}")
        print(f"cases all-stale (excluded from metrics, reported): {len(excluded)} {excluded}; "
              f"anchor counts {gs.anchor_counts()}")
        chk = check(golden, docs)
        print(f"check: {len(chk.stale)} stale relevant spans, {chk.stale_not_relevant} stale NO judgements, "
              f"{len(chk.review)} fuzzy anchors to review; e.g.:")
        for item in chk.stale[:2]:
            print("  " + fix_command(item, golden, corpus)[:220] + " ...")

        print("\n== whole demo golden set (550 spans), dry runs, corpus edited in memory")
        base = load_corpus("demo")
        records = GoldenFile(DEMO_GOLDEN).read_records()
        scenarios = [
            ("corpus unchanged", base),
            ("every page edited above its passages", [dataclasses.replace(d, text="Edited page.\n\n" + d.text)
                                                      for d in base]),
            ("one word replaced in every labelled passage", reword_every_passage(base, records)),
        ]
        for name, variant in scenarios:
            r = reanchor(DEMO_GOLDEN, variant, dry_run=True)
            print(f"  {name:45} {r.summary()}")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    after = hashlib.sha256(DEMO_GOLDEN.read_bytes()).hexdigest()
    assert after == demo_sha, "experiments/golden/demo.jsonl changed!"
    print(f"\nexperiments/golden/demo.jsonl unchanged (sha256 {after[:12]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
