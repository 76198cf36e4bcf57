"""The scale benchmark: how cost grows with the corpus and the golden set. Prints numbers, not a test.

    rag-exp bench --scale                      # or: make bench-scale; sizes 10k and 100k chunks
    rag-exp bench --scale --sizes 2000,20000   # other sizes
    rag-exp bench --scale --million            # adds 1M chunks (long: run it once, under nice)

Each size is built and measured in a throwaway PostgreSQL (an embedded server in a temporary
folder, stopped and removed afterwards; or, when ``DATABASE_URL`` is set, a throwaway database on
that server, dropped afterwards) and a throwaway MLflow store (sqlite in a temporary folder).

* The corpus is synthetic but made of real text: sentences of the shipped demo corpus (and of
  Cranfield's abstracts when ``--cranfield DIR`` or ``$RAG_EXP_CRANFIELD`` points at
  ``cran.all.1400``; users' machines do not have it, so by default the pool is the demo
  corpus alone) recombined with a fixed seed into documents of 20 sections; each section (a
  heading and a paragraph of 100-185 tokens) is one chunk of the default ``heading`` strategy.
  The vocabulary and its Zipf tail are those of real prose; a common word's posting list grows
  linearly with the corpus, as it does in a real one.
* Vectors come from :class:`HashEmbedder`, a deterministic bag-of-words feature-hashing
  embedder (384 dimensions): lexical, cheap, and not the real model, whose speed is a row of
  ``rag-exp bench`` (all-MiniLM-L6-v2: ~45 passages/s on 2 cores). So ingest here measures
  chunking, writes, BM25 statistics, the HNSW build and settling, not the model.
* The golden set is known by construction: a case quotes two adjacent sentences of one section
  (the evidence span), and its query is three content words of each, in their order. The
  section's chunk covers the span; with sentences drawn from a pool, the sentence pair is what
  makes the evidence unique, so a good leg finds it near the top.

Rows per size: ingest chunks/s (and its parts), HNSW build time, table and index sizes (MB per
10k chunks), p50/p95 of the vector leg (its ef_search and ANN recall against exact search), the
BM25 leg and hybrid, evaluation time of 1,000 and 10,000 cases cold and warm (split into
retrieval and the rest), the MLflow logging time and per-case artifact size, compare of two
runs and the summary of a 20-point sweep, peak RSS of ingest and of a run (child processes).
Then the growth exponent of every row between consecutive sizes: log(v2 / v1) / log(n2 / n1)
(1 = linear in the corpus, 0 = flat).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

SEED = 20261203
SECTIONS_PER_DOC = 20
DIM = 384
_WORD = re.compile(r"[a-z0-9]+")
_TOKEN = re.compile(r"\w+|[^\w\s]")
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_CONTENT = re.compile(r"[A-Za-z][A-Za-z]{3,}")
STOP = frozenset("""a an and are as at be been but by can could do does for from has have how if in into is it
its may might more most must not of on or other over such than that the their them then there these they this
those through to under use used uses using was were what when where which while will with would you your also
each only some same very much many both either after before about above below between without within""".split())


# -- the embedder ------------------------------------------------------------------------------
class HashEmbedder:
    """Deterministic bag-of-words vectors: each lower-cased word adds +-1 to one of ``dim``
    coordinates (chosen by its crc32), then the vector is unit-normalised. Lexical, like a
    very weak dense model: chunks sharing words with a query are its neighbours. Tokens (for
    chunk sizes) are words and punctuation marks. Satisfies the ``Embedder`` protocol."""

    provider = "bench"
    paid = False
    max_tokens = 10**9

    def __init__(self, dim: int = DIM) -> None:
        self.dim = dim
        self.model_id = f"bench-hash-bow-{dim}@v1"
        self._codes: dict[str, int] = {}
        self.seconds = 0.0  # time spent embedding (the bench subtracts it from ingest)
        self.texts = 0

    def space_parts(self, input_type: str) -> dict[str, Any]:
        return {"provider": self.provider, "model": self.model_id, "dimensions": self.dim, "input_type": "symmetric"}

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in _TOKEN.finditer(text)]

    def count_tokens(self, text: str) -> int:
        return len(_TOKEN.findall(text))

    def _code(self, w: str) -> int:
        h = zlib.crc32(w.encode())
        c = (h % self.dim) + (self.dim if (h >> 16) & 1 else 0)
        self._codes[w] = c
        return c

    def embed(self, texts: Sequence[str], *, input_type: str = "document", batch_size: int = 16,
              progress: bool = False) -> np.ndarray:
        t0 = time.perf_counter()
        d2 = 2 * self.dim
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        get = self._codes.get
        for lo in range(0, len(texts), 4096):
            part = texts[lo: lo + 4096]
            flat: list[int] = []
            for i, t in enumerate(part):
                base = i * d2
                for w in _WORD.findall(t.lower()):
                    c = get(w)
                    flat.append(base + (self._code(w) if c is None else c))
            counts = np.bincount(np.asarray(flat, dtype=np.int64), minlength=len(part) * d2).astype(np.float32)
            counts = counts.reshape(len(part), 2, self.dim)
            v = counts[:, 0, :] - counts[:, 1, :]
            norms = np.linalg.norm(v, axis=1)
            empty = norms == 0
            v[empty, 0] = 1.0  # a text without words: a fixed unit vector, never a zero one (cosine NaN)
            norms[empty] = 1.0
            out[lo: lo + len(part)] = v / norms[:, None]
        self.seconds += time.perf_counter() - t0
        self.texts += len(texts)
        return out


# -- the corpus --------------------------------------------------------------------------------
def _prose_sentences(text: str) -> list[str]:
    out = []
    in_code = False
    for para in re.split(r"\n\s*\n", text):
        p = para.strip()
        if p.startswith("```"):
            in_code = not in_code if p.count("```") % 2 else in_code
            continue
        if in_code or not p or p[0] in "#|-*>+0123456789`<![" or p.startswith("---") or "\n    " in p:
            continue
        for s in _SENT_SPLIT.split(" ".join(p.split())):
            n = len(s.split())
            if 5 <= n <= 40 and s[-1] in ".!?" and "|" not in s and "`" not in s and "*" not in s and "_" not in s \
                    and "[" not in s and "<" not in s:
                out.append(s)
    return out


def sentence_pool(cranfield: Path | None = None) -> tuple[list[str], dict[str, int]]:
    """Distinct prose sentences of the demo corpus (and of Cranfield's abstracts when given), sorted
    (so the pool, and with the seed every corpus, is the same on every machine)."""
    from .corpus.loader import demo_corpus_dir

    demo: list[str] = []
    for f in sorted(demo_corpus_dir().rglob("*.md")):
        text = f.read_text(encoding="utf-8")
        if text.startswith("---\n"):
            text = text[text.find("\n---\n", 4) + 5:]
        demo += _prose_sentences(text)
    cran: list[str] = []
    if cranfield is not None and (cranfield / "cran.all.1400").exists():
        raw = (cranfield / "cran.all.1400").read_text(encoding="utf-8", errors="replace")
        for block in re.split(r"^\.I \d+", raw, flags=re.M):
            w = block.split("\n.W\n", 1)
            if len(w) == 2:
                body = " ".join(w[1].split()).replace(" .", ".").replace(" ,", ",")
                for s in re.split(r"(?<=\.)\s+", body):
                    n = len(s.split())
                    if 5 <= n <= 40 and s.endswith("."):
                        cran.append(s[0].upper() + s[1:])
    pool = sorted(set(demo) | set(cran))
    return pool, {"demo": len(set(demo)), "cranfield": len(set(cran)), "pool": len(pool)}


@dataclass
class Corpus:
    root: Path
    name: str
    n_docs: int
    n_sections: int
    golden: dict[int, Path] = field(default_factory=dict)  # n cases -> golden file
    seconds: float = 0.0


def _paragraph(rng: random.Random, pool: list[str], tok: HashEmbedder) -> list[str]:
    while True:
        sents: list[str] = []
        n = 0
        while n < 100:
            s = pool[rng.randrange(len(pool))]
            sents.append(s)
            n += tok.count_tokens(s) + 0
        if n <= 185 and len(sents) >= 2:
            return sents


def _case(rng: random.Random, doc, sents: list[str], para_start: int, name: str) -> dict | None:
    from .golden.build import case_record

    i = rng.randrange(len(sents) - 1)
    quote = sents[i] + " " + sents[i + 1]
    if doc.text.count(quote) != 1:
        return None
    words = []
    for s in (sents[i], sents[i + 1]):
        cw = [w for w in _CONTENT.findall(s) if w.lower() not in STOP]
        cw = list(dict.fromkeys(cw))
        if len(cw) < 2:
            return None
        pick = sorted(rng.sample(range(len(cw)), min(3, len(cw))))
        words += [cw[j] for j in pick]
    return case_record(doc, quote, " ".join(words), "paraphrase",
                       {"method": "synthetic", "author": "bench-scale", "seed": SEED, "corpus": name})


def build_corpus(root: Path, n_chunks: int, pool: list[str], cases: Sequence[int] = (1000,), seed: int = SEED,
                 progress: bool = True) -> Corpus:
    """Write ``ceil(n_chunks / 20)`` Markdown documents of 20 sections under ``root`` (one at a
    time: the corpus is never held in memory) and golden sets of ``cases`` cases (the smaller
    sets are prefixes of the larger: their first cases)."""
    from .golden.golden_file import GoldenFile
    from .types import Document

    t0 = time.perf_counter()
    name = root.name
    rng = random.Random(seed)
    tok = HashEmbedder()
    n_docs = math.ceil(n_chunks / SECTIONS_PER_DOC)
    n_sections = n_docs * SECTIONS_PER_DOC
    most = max(cases) if cases else 0
    crng = random.Random(seed + 1)
    order = crng.sample(range(n_sections), min(most, n_sections))
    order += [crng.randrange(n_sections) for _ in range(most - len(order))]
    targets: dict[int, list[int]] = {}
    for pos, sec in enumerate(order):
        targets.setdefault(sec, []).append(pos)
    records: list[tuple[int, dict]] = []
    root.mkdir(parents=True, exist_ok=True)
    for d in range(n_docs):
        parts, spans = [], []
        offset = 0
        for s in range(SECTIONS_PER_DOC):
            sents = _paragraph(rng, pool, tok)
            head = " ".join(w.capitalize() if k == 0 else w for k, w in enumerate(re.findall(r"[A-Za-z]+", sents[0])[:5]))
            heading = f"## {d + 1}.{s + 1}. {head}\n\n"
            body = " ".join(sents)
            parts.append(heading + body + "\n\n")
            spans.append((sents, offset + len(heading)))
            offset += len(parts[-1])
        text = "".join(parts)
        uri = f"synth/{name}/doc-{d:06d}.html"
        title = f"Synthetic document {d + 1}"
        sub = root / f"{d // 1000:03d}"
        sub.mkdir(exist_ok=True)
        (sub / f"doc-{d:06d}.md").write_text(
            f"---\nsource_uri: {uri}\ntitle: {title}\ndoc_type: synthetic\n---\n{text}", encoding="utf-8")
        hits = [(s, p) for s in range(SECTIONS_PER_DOC) for p in targets.get(d * SECTIONS_PER_DOC + s, ())]
        if hits:
            doc = Document(uri, uri, title, "synthetic", text, name)
            for s, pos in hits:
                sents, start = spans[s]
                rec = None
                for _ in range(5):
                    rec = _case(crng, doc, sents, start, name)
                    if rec is not None:
                        break
                if rec is not None:
                    records.append((pos, rec))
        if progress and (d + 1) % 1000 == 0:
            print(f"    corpus {name}: {d + 1}/{n_docs} documents", flush=True)
    corpus = Corpus(root, name, n_docs, n_sections)
    records.sort(key=lambda r: r[0])
    seen: set[str] = set()
    unique = []
    for _, rec in records:
        if rec["id"] not in seen:
            seen.add(rec["id"])
            unique.append(rec)
    gdir = root.parent / f"{name}-golden"
    for n in sorted(cases):
        path = gdir / f"golden_{n}.jsonl"
        subset = sorted(unique[:n], key=lambda r: r["id"])
        GoldenFile(path).append([{**r, "created_at": "2026-12-03T00:00:00+00:00"} for r in subset])
        corpus.golden[n] = path
    corpus.seconds = time.perf_counter() - t0
    return corpus


# -- measuring ---------------------------------------------------------------------------------
def _pct(values: list[float], q: float) -> float:
    vs = sorted(values)
    return vs[min(len(vs) - 1, int(round(q * (len(vs) - 1))))] if vs else float("nan")


def _hwm_mib() -> float | None:
    try:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return None


def _settings(corpus: Corpus, n_cases: int, mlflow_uri: str, extra: Sequence[str] = ()):
    from .session import compose_settings

    return compose_settings(["progress=false", f"corpus.path={corpus.root}", f"corpus.name={corpus.name}",
                             f"golden.path={corpus.golden[n_cases]}", f"tracking.uri={mlflow_uri}",
                             "eval.ann_recall_queries=0", *extra])


def _use_hash_embedder(embedder: HashEmbedder) -> None:
    """In this process, every run embeds with ``embedder`` (the configured model is not loaded)."""
    from . import experiment

    experiment.load_settings_embedder = lambda settings: embedder


def _child_main(spec: dict) -> dict:
    """What a child process measures (its peak RSS is its own): ``ingest`` or ``run``."""
    from .chunk_index import ingest
    from . import chunk_index
    from .corpus.loader import load_corpus
    from .db.connect import connect

    embedder = HashEmbedder()
    corpus = Corpus(Path(spec["root"]), spec["name"], 0, 0, {int(k): Path(v) for k, v in spec["golden"].items()})
    settings, cfg = _settings(corpus, spec["cases"], spec["mlflow"])
    out: dict[str, Any] = {}
    conn = connect(spec["url"])
    if spec["what"] == "ingest":
        hnsw_s = [0.0]
        original = chunk_index.ensure_hnsw_index

        def timed(*a, **k):
            if spec.get("keyword_only"):
                return  # --keyword-only: no HNSW index
            t = time.perf_counter()
            original(*a, **k)
            hnsw_s[0] += time.perf_counter() - t

        chunk_index.ensure_hnsw_index = timed
        t = time.perf_counter()
        docs = load_corpus(corpus.root, corpus.name)
        out["load_s"] = time.perf_counter() - t
        rep = ingest(conn, docs, settings.chunking, embedder, settings.retrieval.hnsw)
        out.update(n_chunks=rep.n_chunks, n_docs=rep.n_documents, ingest_s=rep.seconds, settle_s=rep.settle_seconds,
                   hnsw_s=hnsw_s[0], embed_s=embedder.seconds, strategy=rep.strategy_id)
    else:
        _use_hash_embedder(embedder)
        from .experiment import run_experiment

        t = time.perf_counter()
        res = run_experiment(settings, conn)
        out.update(wall_s=time.perf_counter() - t, timings=res.timings,
                   n_cases=res.eval.n_cases, metrics={k: v for k, v in res.eval.metrics.items()
                                                      if isinstance(v, float)})
    conn.close()
    out["peak_rss_mib"] = _hwm_mib()
    return out


def _child(what: str, url: str, corpus: Corpus, cases: int, mlflow_uri: str, keyword_only: bool = False,
           build_memory: str | None = None) -> dict:
    spec = {"what": what, "url": url, "root": str(corpus.root), "name": corpus.name, "cases": cases,
            "golden": {str(k): str(v) for k, v in corpus.golden.items()}, "mlflow": mlflow_uri,
            "keyword_only": keyword_only}
    env = dict(os.environ)
    if build_memory:
        # libpq passes PGOPTIONS to every session the child opens. The ingest raises
        # maintenance_work_mem to 1 GB for the HNSW build; a 1M-chunk graph outgrows that and
        # pgvector then builds on disk, slower (in 8 GB it took 654 s here). One parallel worker
        # beside the leader, on 2 cores
        env["PGOPTIONS"] = (f"{env.get('PGOPTIONS', '')} -c maintenance_work_mem={build_memory} "
                            "-c max_parallel_maintenance_workers=1").strip()
    with tempfile.NamedTemporaryFile("r", suffix=".json") as res:
        proc = subprocess.run([sys.executable, "-m", "rag_experiments.bench_scale", "--child", json.dumps(spec), res.name],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"child {what} failed: {proc.stderr.strip()[-2000:]}")
        return json.loads(open(res.name).read())


class Rows:
    """The rows of one size: name -> (value, unit, whether it is a cost whose growth to report)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.rows: dict[str, tuple[float, str]] = {}
        self.notes: dict[str, str] = {}

    def add(self, name: str, value: float, fmt: str = "{:.1f}", note: str = "") -> None:
        self.rows[name] = (float(value), fmt)
        if note:
            self.notes[name] = note
        shown = fmt.format(value) if value == value else "n/a"
        print(f"  [{self.size:>8,}] {name:62s} {shown} {note}", flush=True)


def exponent(n1: float, v1: float, n2: float, v2: float) -> float:
    """Growth exponent a of v ~ n^a between two sizes."""
    if not (v1 > 0 and v2 > 0 and n2 != n1):
        return float("nan")
    return math.log(v2 / v1) / math.log(n2 / n1)


def render(all_rows: list[Rows]) -> str:
    names = list(dict.fromkeys(n for r in all_rows for n in r.rows))
    sizes = [r.size for r in all_rows]
    head = "| row | " + " | ".join(f"{s:,} chunks" for s in sizes) + " | " + " | ".join(
        f"growth {a:,}->{b:,}" for a, b in zip(sizes, sizes[1:])) + " |"
    sep = "|---|" + "---:|" * (len(sizes) + len(sizes) - 1)
    out = [head, sep]
    for n in names:
        cells = []
        for r in all_rows:
            v = r.rows.get(n)
            cells.append("" if v is None or v[0] != v[0] else v[1].format(v[0]))
        growth = []
        for a, b in zip(all_rows, all_rows[1:]):
            va, vb = a.rows.get(n), b.rows.get(n)
            e = exponent(a.size, va[0], b.size, vb[0]) if va and vb else float("nan")
            growth.append("" if e != e else f"{e:.2f}")
        out.append(f"| {n} | " + " | ".join(cells) + " | " + " | ".join(growth) + " |")
    return "\n".join(out)


# -- one size ----------------------------------------------------------------------------------
def _sizes(conn, strategy_id: str, n: int) -> dict[str, float]:
    per = 10_000 / max(n, 1) / 2**20

    def rel(name: str, total: bool = False) -> float:
        f = "pg_total_relation_size" if total else "pg_relation_size"
        return conn.execute(f"SELECT {f}(%s::regclass)", (name,)).fetchone()[0] * per

    hnsw = conn.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'hnsw_%%'").fetchone()
    indexes = ("chunks_pkey", "chunks_tsv_gin", "chunks_identifiers_gin", "chunks_doc") + ((hnsw[0],) if hnsw else ())
    return {
        "chunks table (heap + TOAST), MB / 10k chunks": rel("chunks", True) - sum(rel(i) for i in indexes),
        "HNSW index, MB / 10k chunks": rel(hnsw[0]) if hnsw else float("nan"),
        "tsvector GIN index, MB / 10k chunks": rel("chunks_tsv_gin"),
        "BM25 postings (table + covering key), MB / 10k chunks": rel("bm25_postings", True),
        "BM25 document frequencies, MB / 10k chunks": rel("bm25_df", True),
        "BM25 packed postings + chunk ordinals (native search), MB / 10k chunks":
            rel("bm25_packs", True) + rel("bm25_ords", True),
        "documents table, MB / 10k chunks": rel("documents", True),
    }


def _time(fn, queries: Sequence[str]) -> list[float]:
    out = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - t) * 1000)
    return out


def measure_latency(conn, strategy, embedder, queries: list[str], rows: Rows, depth: int = 50) -> None:
    from .retrieval.legs import vector_search
    from .retrieval.retriever import MEMO, Retriever, RetrievalParams

    qvecs = dict(zip(queries, embedder.embed(queries, input_type="query")))
    sid = strategy.strategy_id
    for q in queries:  # an untimed pass: the rows below are warm (at 1M chunks the database
        vector_search(conn, sid, qvecs[q], depth, strategy.dim)  # outgrows the page cache)
    for ef in (None, 200):
        vt = _time(lambda q: vector_search(conn, sid, qvecs[q], depth, strategy.dim, ef_search=ef), queries)
        shown = max(40, depth, ef or 0)
        rows.add(f"vector leg p50, ms (HNSW, depth {depth}, ef_search {shown})", _pct(vt, .5))
        rows.add(f"vector leg p95, ms (ef_search {shown})", _pct(vt, .95))
        shares = []
        for q in queries[:50]:
            approx = {h.chunk_id for h in vector_search(conn, sid, qvecs[q], depth, strategy.dim, ef_search=ef)}
            exact = {h.chunk_id for h in vector_search(conn, sid, qvecs[q], depth, strategy.dim, exact=True)}
            shares.append(len(approx & exact) / max(len(exact), 1))
        rows.add(f"vector leg ANN recall@{depth} vs exact, ef_search {shown} ({len(shares)} queries)",
                 sum(shares) / len(shares), "{:.3f}")
    measure_bm25(conn, sid, queries, rows, depth)
    MEMO.clear()
    r = Retriever(conn, strategy, embedder, RetrievalParams(variant="hybrid", use_cache=False))
    r.embed_queries(queries)
    ht = _time(lambda q: r.search(q, 20), queries)
    rows.add("hybrid p50, ms (both legs + RRF, uncached)", _pct(ht, .5))
    rows.add("hybrid p95, ms", _pct(ht, .95))


def measure_bm25(conn, sid: str, queries: list[str], rows: Rows, depth: int = 50) -> None:
    """The BM25 leg as shipped (native: migration 0007, where the accumulator is installed), the
    SQL search (pruned: migration 0006) and reading every posting (the leg before pruning), on
    the same queries; every query's lists and scores are compared across all three."""
    from .db import native
    from .retrieval import legs
    from .retrieval.legs import KeywordParams, keyword_search

    kw = KeywordParams()
    saved = legs.PRUNE_MIN_POSTINGS
    has_native = native.installed_build(conn) is not None

    def timed() -> tuple[list[float], dict[str, list], dict[str, int]]:
        lists: dict[str, list] = {}
        plans: dict[str, int] = {}

        def one(q: str) -> None:
            lists[q] = [(h.chunk_id, h.score) for h in keyword_search(conn, sid, q, depth, kw)]
            kind = (conn.execute("SELECT current_setting('rag_exp.bm25_plan', true)").fetchone()[0] or "?").split(" ")[0]
            plans[kind] = plans.get(kind, 0) + 1

        return _time(one, queries), lists, plans

    # Each path is timed on its second pass over the queries (warm). The first pass of the shipped
    # leg is a row of its own: the postings it reads first come from disk where the database has
    # outgrown the page cache (at 1M chunks the exact vector scans above have just read 4.5 GB).
    first_t, _, _ = timed()
    shipped_t, shipped, shipped_plans = timed()
    name = "native" if has_native else "SQL search, no native accumulator here"
    rows.add(f"BM25 leg p50, ms (OR, depth {depth}; as shipped: {name})", _pct(shipped_t, .5))
    rows.add("BM25 leg p95, ms (as shipped)", _pct(shipped_t, .95),
             note="(" + ", ".join(f"{k} {v}" for k, v in sorted(shipped_plans.items())) + ")")
    rows.add("BM25 leg p50, ms, as shipped, the queries' first pass (cold where the data outgrows RAM)",
             _pct(first_t, .5))
    rows.add("BM25 leg p95, ms, as shipped, first pass", _pct(first_t, .95))
    conn.execute("SET rag_exp.bm25_native = 'off'")
    try:
        timed()
        sql_t, sql_lists, plans = timed()
        legs.PRUNE_MIN_POSTINGS = 10**15  # every posting read: the leg before migration 0006
        timed()
        every_t, every, _ = timed()
    finally:
        legs.PRUNE_MIN_POSTINGS = saved
        conn.execute("RESET rag_exp.bm25_native")
    rows.add("BM25 leg p50, ms (SQL search, pruned: bm25_top_sql)", _pct(sql_t, .5))
    rows.add("BM25 leg p95, ms (SQL search)", _pct(sql_t, .95))
    rows.add("BM25 SQL-search queries pruned (MaxScore), share", plans.get("pruned", 0) / max(len(queries), 1),
             "{:.2f}", "(" + ", ".join(f"{k} {v}" for k, v in sorted(plans.items())) + ")")
    rows.add("BM25 leg p50, ms (every posting read: the leg before pruning)", _pct(every_t, .5))
    rows.add("BM25 leg p95, ms (every posting read)", _pct(every_t, .95))
    same = sum(every[q] == sql_lists[q] == shipped[q] for q in queries)
    rows.add("BM25 lists and scores, as shipped = SQL search = every posting read, queries", same, "{:,.0f}",
             f"of {len(queries)}" + ("" if same == len(queries) else "  <-- MISMATCH"))


def _artifact_bytes(run_id: str) -> dict[str, int]:
    from mlflow.tracking import MlflowClient

    from .tracking.runs import local_artifact_dir

    run = MlflowClient().get_run(run_id)
    folder = local_artifact_dir(run.info.artifact_uri)
    if folder is None:
        return {}
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


def measure_evaluation(url: str, corpus: Corpus, mlflow_uri: str, rows: Rows, embedder: HashEmbedder,
                       sweep_points: int, eval_cases: Sequence[int]) -> None:
    """Runs (cold: candidate caches empty; warm: the same again), their MLflow logging, the compare
    of two runs and the summary of a ``sweep_points``-point rrf_k sweep, per golden-set size."""
    from .db.connect import connect
    from .experiment import run_experiment
    from .pipeline import log_result
    from .retrieval.retriever import MEMO
    from .tracking.compare import build_comparison, run_labels, sweep_order
    from .tracking.configured import comparison_defaults
    from .tracking.runs import load_per_case, runs_by_ids

    _use_hash_embedder(embedder)
    os.environ["MLFLOW_TRACKING_URI"] = mlflow_uri
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    conn = connect(url)
    for n in eval_cases:
        if n not in corpus.golden:
            continue
        settings, cfg = _settings(corpus, n, mlflow_uri)
        conn.execute("TRUNCATE candidate_cache")
        if not conn.autocommit:
            conn.commit()
        MEMO.clear()
        t = time.perf_counter()
        cold = run_experiment(settings, conn)
        cold_s = time.perf_counter() - t
        t = time.perf_counter()
        warm = run_experiment(settings, conn)
        warm_s = time.perf_counter() - t
        beyond = warm_s - warm.timings.get("retrieval_s", 0.0)
        label = f"{n:,} cases"
        rows.add(f"eval {label}: cold run, s", cold_s)
        rows.add(f"eval {label}: cold run's retrieval, s", cold.timings.get("retrieval_s", float("nan")))
        rows.add(f"eval {label}: cold run's loading (golden set + its quality report, corpus), s",
                 cold.timings.get("load_s", float("nan")), "{:.2f}")
        rows.add(f"eval {label}: warm run, s", warm_s)
        rows.add(f"eval {label}: warm run beyond retrieval, s", beyond, "{:.2f}")
        rows.add(f"eval {label}: recall_at_5 of hybrid (by construction)", cold.eval.metrics.get("recall_at_5", float("nan")),
                 "{:.3f}")
        log_result(cold, cfg, f"scale-{n}-cold")  # not timed: the store's first write creates its tables
        t = time.perf_counter()
        base_id = log_result(warm, cfg, f"scale-{n}-base")
        log_s = time.perf_counter() - t
        rows.add(f"eval {label}: MLflow logging of the run, s", log_s, "{:.2f}")
        files = _artifact_bytes(base_id)
        per_case = sum(v for k, v in files.items() if "per_case" in k)
        rows.add(f"eval {label}: per-case artifact, KB per case", per_case / 1024 / max(n, 1), "{:.2f}",
                 f"({per_case / 2**20:.1f} MB; all artifacts {sum(files.values()) / 2**20:.1f} MB)")
        ids = [base_id]
        point_s = []
        for i in range(1, sweep_points):
            s_i = replace(settings, fusion=replace(settings.fusion, rrf_k=settings.fusion.rrf_k + 5 * i))
            t = time.perf_counter()
            res = run_experiment(s_i, conn)
            cfg.fusion.rrf_k = s_i.fusion.rrf_k
            ids.append(log_result(res, cfg, f"scale-{n}-rrf{s_i.fusion.rrf_k}"))
            point_s.append(time.perf_counter() - t)
        if point_s:
            rows.add(f"eval {label}: rrf_k-only sweep point (run + log), median s", _pct(point_s, .5))
        # compare of two runs: what `rag-exp compare A B` does (read both, pair, test, render)
        t = time.perf_counter()
        two = runs_by_ids(ids[:2])
        metrics, primary = comparison_defaults(two)
        cmp = build_comparison(two, metrics, primary=primary, labels=run_labels(two))
        cmp.to_markdown()
        rows.add(f"eval {label}: compare of two runs (read, pair, test, render), s", time.perf_counter() - t, "{:.2f}")
        if len(ids) >= 3:
            # the sweep summary: what the sweep callback does at the end (children read, their
            # per-case tables, the comparison best-first, its table and verdicts)
            from .tracking.verdict import verdict_lines, verdicts

            t = time.perf_counter()
            children = runs_by_ids(ids, per_case=False)
            objective = settings.objective
            runs = [replace(r, per_case=load_per_case(r.id, None, r.artifact_uri))
                    for r in sweep_order(children, objective, True)]
            metrics, primary = comparison_defaults(runs)
            cmp = build_comparison(runs, metrics, primary=primary, labels=run_labels(runs))
            cmp.to_markdown()
            verdict_lines(verdicts(cmp, 1000, 0), cmp.alpha)
            rows.add(f"eval {label}: summary of a {len(ids)}-point sweep, s", time.perf_counter() - t, "{:.2f}")
    conn.close()


@dataclass
class Server:
    admin: str
    folder: Path | None = None
    embedded: Any = None

    def stop(self) -> None:
        if self.embedded is not None:
            self.embedded.stop()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def start_server() -> Server:
    """A throwaway server: ``DATABASE_URL``'s (databases are created and dropped on it), else an
    embedded one in a temporary folder (stopped and removed by :meth:`Server.stop`)."""
    external = os.environ.get("DATABASE_URL")
    if external:
        return Server(external)
    from .db.embedded import EmbeddedPostgres

    folder = Path(tempfile.mkdtemp(prefix="rag-bench-scale-pg-", dir="/tmp"))
    folder.chmod(0o755)
    server = EmbeddedPostgres(folder / "pgdata")
    server.ensure_running()
    return Server(server.url("postgres"), folder, server)


def _with_db(url: str, name: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    return make_conninfo(**{**conninfo_to_dict(url), "dbname": name})


def run_size(server: Server, work: Path, size: int, pool: list[str], *, queries: int, eval_cases: Sequence[int],
             sweep_points: int, keyword_only: bool = False, build_memory: str | None = None) -> Rows:
    import psycopg

    from .chunk_index import strategy_info
    from .db.connect import connect
    from .golden.resolve import load_golden

    rows = Rows(size)
    name = f"scale-{size}"
    cases = sorted(set(eval_cases))
    base = cases[0]
    corpus = build_corpus(work / name, size, pool, cases)
    rows.add("corpus generation (files + golden sets), s", corpus.seconds, note="(not a cost of the tool)")
    dbname = f"rag_bench_scale_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server.admin, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{dbname}"')
    url = _with_db(server.admin, dbname)
    mlflow_uri = f"sqlite:///{work / (name + '-mlflow')}/mlflow.db"
    (work / (name + "-mlflow")).mkdir(exist_ok=True)
    try:
        connect(url).close()  # migrations
        ing = _child("ingest", url, corpus, base, mlflow_uri, keyword_only, build_memory)
        n = ing["n_chunks"]
        rows.add("chunks", n, "{:,.0f}")
        rows.add("ingest, s (cheap embedder; chunking, writes, BM25 statistics, HNSW, settle)", ing["ingest_s"])
        rest = ing["ingest_s"] - ing["hnsw_s"] - ing["embed_s"]
        rows.add("ingest chunks/s without the model and the HNSW build", n / rest, "{:,.0f}",
                 f"(the cheap embedder took {ing['embed_s']:.1f}s)")
        rows.add("HNSW build (m 16, ef_construction 64), s", float("nan") if keyword_only else ing["hnsw_s"],
                 note="(--keyword-only: not built)" if keyword_only
                 else f"(maintenance_work_mem {build_memory})" if build_memory else "")
        rows.add("settle (GIN pending lists, VACUUM ANALYZE BM25 tables), s", ing["settle_s"])
        rows.add("peak RSS of ingest (child process), MiB", ing["peak_rss_mib"] or float("nan"), "{:,.0f}")
        conn = connect(url)
        strategy = strategy_info(conn, ing["strategy"])
        for k, v in _sizes(conn, strategy.strategy_id, n).items():
            rows.add(k, v, "{:.1f}")
        golden = load_golden(corpus.golden[base])
        qs = [c.query for c in golden.scorable][:queries]
        embedder = HashEmbedder()
        if keyword_only:
            measure_bm25(conn, strategy.strategy_id, qs, rows)
            conn.close()
            return rows
        measure_latency(conn, strategy, embedder, qs, rows)
        conn.close()
        run = _child("run", url, corpus, base, mlflow_uri)
        rows.add(f"peak RSS of a run ({base:,} cases, hybrid, child process), MiB", run["peak_rss_mib"] or float("nan"),
                 "{:,.0f}")
        rows.add("that run: wall s (first run: candidate caches empty)", run["wall_s"])
        measure_evaluation(url, corpus, mlflow_uri, rows, embedder, sweep_points, cases)
    finally:
        with psycopg.connect(server.admin, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        shutil.rmtree(work / name, ignore_errors=True)
        shutil.rmtree(work / (name + "-golden"), ignore_errors=True)
        shutil.rmtree(work / (name + "-mlflow"), ignore_errors=True)
    return rows


def _counts(minimum: int):
    """An argparse type: comma-separated whole numbers, each >= ``minimum`` (a bad value is
    argparse's one usage line, naming it)."""
    def parse(text: str) -> list[int]:
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if not parts:
            raise argparse.ArgumentTypeError("give at least one number, e.g. 10000,100000")
        out = []
        for part in parts:
            try:
                value = int(part.replace("_", ""))
            except ValueError:
                raise argparse.ArgumentTypeError(f"{part!r} is not a whole number") from None
            if value < minimum:
                raise argparse.ArgumentTypeError(f"{value} is below the minimum of {minimum:,}")
            out.append(value)
        return out
    return parse


def _memory_size(text: str) -> str:
    """An argparse type: a PostgreSQL memory size such as 8GB (it goes into PGOPTIONS, so nothing
    else may ride along)."""
    if not re.fullmatch(r"[1-9][0-9]*(kB|MB|GB|TB)", text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a memory size such as 512MB or 8GB")
    return text.strip()


def _quiet_store_creation() -> None:
    """Each size's throwaway MLflow store is new: MLflow and alembic log its table creation at INFO,
    lines between the bench's own that say nothing about what is measured."""
    import logging

    for name in ("mlflow.store.db.utils", "alembic.runtime.migration"):
        logging.getLogger(name).setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _quiet_store_creation()
    if argv[:1] == ["--child"]:
        out = _child_main(json.loads(argv[1]))
        Path(argv[2]).write_text(json.dumps(out))
        return 0
    ap = argparse.ArgumentParser(prog="rag-exp bench --scale", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sizes", type=_counts(1000), default="10000,100000",
                    help="corpus sizes in chunks, comma-separated (each >= 1,000)")
    ap.add_argument("--million", action="store_true", help="also 1,000,000 chunks (long)")
    ap.add_argument("--keyword-only", action="store_true",
                    help="build no HNSW index and time only the BM25 leg (pruned and reading every posting, "
                    "their lists compared): the keyword leg at a size whose HNSW build would take hours")
    ap.add_argument("--build-memory", default=None, metavar="SIZE", type=_memory_size,
                    help="maintenance_work_mem for the ingest's index builds, e.g. 8GB (default: the server's "
                    "setting (the ingest raises it to 1GB) below 500k chunks, 8GB from 500k: a graph that outgrows it builds "
                    "on disk, slower)")
    ap.add_argument("--queries", type=int, default=200, help="queries timed per leg")
    ap.add_argument("--eval-cases", type=_counts(1), default="1000,10000",
                    help="golden-set sizes evaluated (the largest only at the smallest corpus size; none larger "
                    "than the smallest corpus size)")
    ap.add_argument("--sweep-points", type=int, default=20, help="points of the rrf_k sweep whose summary is timed")
    ap.add_argument("--cranfield", default=os.environ.get("RAG_EXP_CRANFIELD"),
                    help="a folder with Cranfield's cran.all.1400: its abstracts join the sentence pool")
    ap.add_argument("--workdir", default=None, help="where corpora are written (default: a temporary folder)")
    args = ap.parse_args(argv)
    sizes = list(args.sizes)
    if args.million:
        sizes.append(1_000_000)
    eval_cases = list(args.eval_cases)
    if max(eval_cases) > min(sizes):
        ap.error(f"--eval-cases {max(eval_cases):,} is more cases than the smallest corpus has chunks "
                 f"({min(sizes):,}); each case quotes its own section")
    pool, counts = sentence_pool(Path(args.cranfield) if args.cranfield else None)
    print(f"sentence pool: {counts['pool']:,} distinct sentences (demo corpus {counts['demo']:,}, "
          f"Cranfield {counts['cranfield']:,}); seed {SEED}")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="rag-bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    server = start_server()
    all_rows: list[Rows] = []
    t0 = time.perf_counter()
    try:
        for i, size in enumerate(sorted(sizes)):
            print(f"\n== {size:,} chunks ==", flush=True)
            # the 10,000-case evaluation (and the 20-point sweep at it) once, at the smallest size:
            # its cost beyond retrieval does not depend on the corpus
            cases = eval_cases if i == 0 else [min(eval_cases)]
            all_rows.append(run_size(server, work, size, pool, queries=args.queries, eval_cases=cases,
                                     sweep_points=args.sweep_points, keyword_only=args.keyword_only,
                                     build_memory=args.build_memory or ("8GB" if size >= 500_000 else None)))
    finally:
        server.stop()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\nscale benchmark: {time.perf_counter() - t0:.0f}s; growth exponent = log(v2/v1) / log(n2/n1) "
          "between consecutive sizes (1: linear in the corpus; 0: flat)\n")
    print(render(all_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
