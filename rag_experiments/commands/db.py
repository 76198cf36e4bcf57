"""rag-exp db: the embedded PostgreSQL (status, start, stop, url)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("db", help="manage the embedded PostgreSQL + pgvector server",
                       description="The embedded server lives in .rag-exp/pgdata (under $RAG_EXP_HOME or the "
                       "current folder) and keeps running between commands, like a local dev database. "
                       "DATABASE_URL, when set, replaces it entirely.")
    s = p.add_subparsers(dest="db_command", metavar="ACTION")
    for name, func, text in (("status", _status, "is it running, where, which pid"),
                             ("start", _start, "start (or adopt) the server and print its URL"),
                             ("stop", _stop, "stop the server (only if it is a postgres serving that data folder)"),
                             ("url", _url, "print the connection URL (starts the server if needed)")):
        sp = s.add_parser(name, help=text)
        sp.add_argument("--pgdata", default=None, metavar="FOLDER",
                        help="the server's data folder (default: db.pgdata of the configuration, else .rag-exp/pgdata)")
        sp.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a Hydra override, e.g. --set db.pgdata=/tmp/pg: the folder a run with it used")
        sp.set_defaults(func=func)
    p.set_defaults(func=lambda a: (p.print_help(), 1)[1])


def _server(args=None):
    """The embedded server of ``--pgdata``, else of the configuration's ``db.pgdata`` (with the
    ``--set`` overrides: the folder a run given ``db.pgdata=...`` started), else ``.rag-exp/pgdata``."""
    from ..db.connect import state_dir
    from ..db.embedded import EmbeddedPostgres

    pgdata = getattr(args, "pgdata", None)
    if pgdata is None and (getattr(args, "overrides", None) or _project_names_pgdata()):
        from ..session import compose_settings

        settings, _ = compose_settings(list(args.overrides))
        pgdata = settings.db.pgdata_dir
    return EmbeddedPostgres(Path(pgdata) if pgdata else state_dir() / "pgdata")


_PGDATA_SET = re.compile(r"^\s*pgdata:\s*(?!null\b|~|$)\S", re.M)


def _project_names_pgdata() -> bool:
    """Whether the project's own conf/ sets ``pgdata`` (composing costs ~1 s: only then)."""
    from ..paths import project_root

    conf = project_root() / "conf"
    return conf.is_dir() and any(_PGDATA_SET.search(f.read_text(errors="replace")) for f in conf.rglob("*.yaml"))


def _status(args) -> int:
    if os.environ.get("DATABASE_URL"):
        from ..db.connect import redact_url

        print(f"DATABASE_URL is set: {redact_url(os.environ['DATABASE_URL'])} (the embedded server is not used)")
    srv = _server(args)
    pid = srv.running_pid()
    print(f"embedded server: {'running, pid ' + str(pid) if pid else 'stopped'}; data folder {srv.pgdata}")
    return 0


def _start(args) -> int:
    t = time.perf_counter()
    url = _server(args).ensure_running()
    print(f"{url}  (ready in {time.perf_counter() - t:.2f}s)")
    return 0


def _stop(args) -> int:
    """Signal the postmaster named by the data folder's ``postmaster.pid`` after checking that the
    process is a postgres serving that folder (pg_ctl refuses to run as root; this does not need it)."""
    srv = _server(args)
    print(f"stopped the server of {srv.pgdata}" if srv.stop()
          else f"no server of {srv.pgdata} is running (or its pid is not a postgres of that folder: nothing was signalled)")
    return 0


def _url(args) -> int:
    from ..db.connect import redact_url

    # DATABASE_URL replaces the embedded server; else the server of --pgdata / db.pgdata, as status, start and
    # stop read it (url started and printed the default folder's server whatever --pgdata said)
    url = os.environ.get("DATABASE_URL") or _server(args).ensure_running()
    print(redact_url(url))
    return 0
