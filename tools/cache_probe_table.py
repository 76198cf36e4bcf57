"""The cache probe table of issue 55 on the demo, with a real stack (examples/langchain_bm25.py:
LangChain's RecursiveCharacterTextSplitter + BM25Retriever over the demo corpus).

A team's system changes in a way its answer-cache key cannot see, and the next run is scored:
each probe system answers as the LangChain stack ("good") or with its top 20 reversed ("bad"),
switched by a JSON data file, an environment variable, a helper module loaded with
``importlib.import_module``, a module made to look installed (its folder counted as site-packages,
as a reinstall under the same version), or an HTTP service behind the same URL. Per way:

* right: recall@5 of the changed system asked live (``retrieval.external.cache=false``);
* key only: the run with ``retrieval.external.verify=0``, which reads the cache by its key alone,
  as every run did before issue 55 (for HTTP ``version=v2`` / ``cache=false`` the code before
  ignored both: what it logged is the key-only value of the same URL, as the issue measured);
* checked: the run as it is now (a sample re-asked live first), and the line it printed;
* the check's cost on a warm cache (230 queries cached: live asks and seconds) against the run
  without the check.

    .venv/bin/python tools/cache_probe_table.py --pgdata /tmp/me/pg      # ~5 min on 2 busy cores
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATE = Path(os.environ.get("RAG_EXP_PROBE_STATE", tempfile.gettempdir())) / "rag_exp_probe_state"
_SYSTEM: dict = {}


def _answer(query: str, k: int, bad: bool) -> list:
    if "lc" not in _SYSTEM:
        from examples.langchain_bm25 import LangChainBM25

        _SYSTEM["lc"] = LangChainBM25()
    found = _SYSTEM["lc"].search(query, k)
    return list(reversed(found)) if bad else found


def from_json(query: str, k: int) -> list:
    return _answer(query, k, json.loads((STATE / "mode.json").read_text())["bad"])


def from_env(query: str, k: int) -> list:
    return _answer(query, k, os.environ.get("RAG_EXP_PROBE_BAD") == "1")


def from_helper(query: str, k: int) -> list:
    return _answer(query, k, importlib.import_module("rag_probe_helper").BAD)


def from_installed(query: str, k: int) -> list:
    import rag_probe_installed  # in a folder counted as site-packages: the key holds its version

    return _answer(query, k, rag_probe_installed.BAD)


SERVICE = {"bad": False}


class Service(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        hits = _answer(body["query"], body["k"], SERVICE["bad"])
        data = json.dumps({"passages": [{"source_uri": d.metadata["source"], "start": d.metadata["start_index"],
                                         "end": d.metadata["start_index"] + len(d.page_content)}
                                        for d in hits]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def set_mode(way: str, bad: bool) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    (STATE / "mode.json").write_text(json.dumps({"bad": bad}))
    os.environ["RAG_EXP_PROBE_BAD"] = "1" if bad else "0"
    for name in ("rag_probe_helper", "rag_probe_installed"):
        (STATE / f"{name}.py").write_text(f"BAD = {bad}\n" + "#" * (2 if bad else 1) + "\n")  # new size: no stale pyc
        sys.modules.pop(name, None)
    importlib.invalidate_caches()
    SERVICE["bad"] = bad


def run(overrides: list[str]) -> tuple[dict, str, float]:
    from rag_experiments.experiment import run_experiment
    from rag_experiments.session import compose_settings

    settings, _ = compose_settings(overrides)
    err = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(err):
        result = run_experiment(settings)
    seconds = time.perf_counter() - t0
    printed = " | ".join(line for line in err.getvalue().splitlines() if line.startswith("WARNING:"))
    return {"r5": result.eval.metrics["recall_at_5"], **result.cache, **result.external,
            **result.external_tags}, printed, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pgdata", required=True, help="a throwaway embedded PostgreSQL folder")
    args = ap.parse_args()
    os.chdir(ROOT)
    sys.path[:0] = [str(ROOT), str(STATE)]
    from rag_experiments.retrieval import code_identity

    STATE.mkdir(parents=True, exist_ok=True)
    roots = code_identity._outside_roots()
    code_identity._outside_roots = lambda: (*roots, str(STATE.resolve()) + os.sep)  # rag_probe_installed: "installed"
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Service)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/search"
    base = [f"db.pgdata={args.pgdata}", "progress=false", "eval.bootstrap_samples=100", "tracking.enabled=false"]
    ways = {name: ["retrieval=external", f"retrieval.external.target=tools.cache_probe_table:{name}"]
            for name in ("from_json", "from_env", "from_helper", "from_installed")}
    ways["http (same URL)"] = ["retrieval=http", f"retrieval.http.url={url}"]
    print("| way | right r@5 | key only (before) | checked (after) | what the checked run printed |")
    print("| --- | --- | --- | --- | --- |")
    for way, sets in ways.items():
        version = f"retrieval.external.version=probe-{uuid.uuid4().hex[:8]}"
        set_mode(way, False)
        run([*base, *sets, version])  # the cache holds the good answers
        set_mode(way, True)
        right, _, _ = run([*base, *sets, version, "retrieval.external.cache=false"])
        before, _, _ = run([*base, *sets, version, "retrieval.external.verify=0"])
        after, printed, _ = run([*base, *sets, version])
        print(f"| {way} | {right['r5']:.3f} | {before['r5']:.3f} ({before['external_cached']} cached) | "
              f"{after['r5']:.3f} ({after['external_cached']} cached, {after['external.cache_check']}) | "
              f"{printed[:300]} |", flush=True)
    sets = ways["http (same URL)"]
    v1, v2 = f"retrieval.external.version=v1-{uuid.uuid4().hex[:8]}", f"retrieval.external.version=v2-{uuid.uuid4().hex[:8]}"
    set_mode("http", False)
    run([*base, *sets, v1])
    set_mode("http", True)
    right, _, _ = run([*base, *sets, v1, "retrieval.external.cache=false"])
    key_only, _, _ = run([*base, *sets, v1, "retrieval.external.verify=0"])
    declared, printed, _ = run([*base, *sets, v2, "retrieval.external.verify=0"])
    print(f"| http version=v2 | {right['r5']:.3f} | {key_only['r5']:.3f} (version ignored: the v1 cache) | "
          f"{declared['r5']:.3f} ({declared['external_calls']} asked, {declared['external_cached']} cached) | "
          f"{printed[:200]} |")
    live, printed, _ = run([*base, *sets, v1, "retrieval.external.cache=false"])
    print(f"| http cache=false | {right['r5']:.3f} | {key_only['r5']:.3f} (cache=false ignored) | "
          f"{live['r5']:.3f} ({live['external_calls']} asked, {live['external_cached']} cached) | {printed[:200]} |")

    # the check's cost on a warm cache of the plain LangChain example (230 queries cached)
    lc = [*base, "retrieval=external", "retrieval.external.target=examples.langchain_bm25:LangChainBM25",
          f"retrieval.external.version=cost-{uuid.uuid4().hex[:8]}"]
    _, _, cold = run(lc)
    off, _, t_off = run([*lc, "retrieval.external.verify=0"])
    on, _, t_on = run(lc)
    print(f"\nLangChain BM25 on the demo: cold run {cold:.1f} s; warm with verify=0 {t_off:.1f} s "
          f"({off['external_cached']} cached); warm with the check {t_on:.1f} s: "
          f"{on['external.cache_check.asks']:.0f} live asks of {on['external.cache_check.sampled']:.0f} sampled "
          f"queries in {on['external.cache_check.seconds']:.2f} s ({on['external.cache_check']})")
    srv.shutdown()


if __name__ == "__main__":
    main()
