"""Any retriever behind HTTP, in the shape `retrieval=http` measures: POST {"query", "k",
"params"} -> {"passages": [...]}. Standard library only; for trying the http path, or as the
shape a team's own service can answer in.

    python -m examples.http_service examples.langchain_bm25:LangChainBM25 --port 8080
    python run.py retrieval=http retrieval.http.url=http://127.0.0.1:8080/search

The target is loaded as `retrieval.external.target` is (a function f(query, k, **params) or a
class with search(); --init KEY=VALUE for its constructor). LangChain and LlamaIndex results are
turned into plain passages (source_uri, start, end, text, score).
"""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from rag_experiments.retrieval.external import load_python_target
from rag_experiments.retrieval.external_params import ExternalParams
from rag_experiments.retrieval.passages import read_passage


def make_handler(search):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):  # noqa: N802 - http.server's name
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                answer = search(body["query"], int(body["k"]), **body.get("params", {}))
                passages = [read_passage(p, "answer").to_json() for p in answer]
                for p in passages:  # Passage names the document "document"; the wire says source_uri
                    p["source_uri"] = p.pop("document")
                self._send(200, {"passages": passages})
            except Exception as exc:  # noqa: BLE001 - the client gets one line, not a traceback
                self._send(500, {"error": f"{type(exc).__name__}: {exc}"})

        def _send(self, status: int, obj: dict) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", help="package.module:attribute")
    ap.add_argument("--init", action="append", default=[], metavar="KEY=VALUE", help="constructor kwargs (strings)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    args = ap.parse_args(argv)
    init = dict(kv.split("=", 1) for kv in args.init)
    system = load_python_target(ExternalParams(target=args.target, init=init))
    server = ThreadingHTTPServer((args.host, args.port), make_handler(system.search))
    print(f"serving {args.target} on http://{args.host}:{server.server_address[1]}/search", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
