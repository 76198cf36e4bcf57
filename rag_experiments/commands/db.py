"""rag-exp db: the embedded PostgreSQL (status, start, stop, url)."""

from __future__ import annotations

import os
import time


def register(sub) -> None:
    p = sub.add_parser("db", help="manage the embedded PostgreSQL + pgvector server",
                       description="The embedded server lives in .rag-exp/pgdata (under $RAG_EXP_HOME or the "
                       "current folder) and keeps running between commands, like a local dev database. "
                       "DATABASE_URL, when set, replaces it entirely.")
    s = p.add_subparsers(dest="db_command", metavar="ACTION")
    for name, func, text in (("status", _status, "is it running, where, which pid"),
                             ("start", _start, "start (or adopt) the server and print its URL"),
                             ("stop", _stop, "stop the server (only if it is ours)"),
                             ("url", _url, "print the connection URL (starts the server if needed)")):
        sp = s.add_parser(name, help=text)
        sp.set_defaults(func=func)
    p.set_defaults(func=lambda a: (p.print_help(), 1)[1])


def _server():
    from ..db.connect import state_dir
    from ..db.embedded import EmbeddedPostgres

    return EmbeddedPostgres(state_dir() / "pgdata")


def _status(args) -> int:
    if os.environ.get("DATABASE_URL"):
        from ..db.connect import redact_url

        print(f"DATABASE_URL is set: {redact_url(os.environ['DATABASE_URL'])} (the embedded server is not used)")
    srv = _server()
    pid = srv.running_pid()
    print(f"embedded server: {'running, pid ' + str(pid) if pid else 'stopped'}; data folder {srv.pgdata}")
    return 0


def _start(args) -> int:
    t = time.perf_counter()
    url = _server().ensure_running()
    print(f"{url}  (ready in {time.perf_counter() - t:.2f}s)")
    return 0


def _stop(args) -> int:
    print("stopped" if _server().stop() else "not running (or not ours: nothing was signalled)")
    return 0


def _url(args) -> int:
    from ..db.connect import redact_url, resolve_database_url

    print(redact_url(resolve_database_url()))
    return 0
