"""The native BM25 search (migration 0007: packed postings summed by the ``bm25_accumulate`` C
aggregate, rag_experiments/db/csrc/bm25_native.c) gives the SQL search's lists and scores, keeps
its packs in step with the postings through re-ingests, and never answers wrongly when its
library or its packs are not there: the SQL search answers instead, with a warning.

Compared with ``rag_exp.bm25_native = 'off'`` (bm25_top_sql, itself proven against the
exhaustive leg in test_bm25_pruning.py and against bm25s in test_bm25.py). The scale benchmark
repeats the comparison on every timed query at 10k, 100k and 1M chunks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from rag_experiments import bench_scale, bm25_stats
from rag_experiments.db import native
from rag_experiments.retrieval.legs import KeywordParams, keyword_search

from .conftest import SYNTHETIC_CHUNKING


def plan(conn) -> str:
    return conn.execute("SELECT current_setting('rag_exp.bm25_plan', true)").fetchone()[0]


def _search(conn, sid, q, depth, params=KeywordParams(), *, native_on: bool):
    conn.execute(f"SET rag_exp.bm25_native = '{'on' if native_on else 'off'}'")
    try:
        hits = keyword_search(conn, sid, q, depth, params)
        return [(h.chunk_id, h.score) for h in hits], plan(conn)
    finally:
        conn.execute("RESET rag_exp.bm25_native")


def _top(conn, sid, q, depth, k1, b, *, native_on: bool) -> tuple[dict[str, float], str]:
    """bm25_top's raw answer: chunk -> raw sum."""
    conn.execute(f"SET rag_exp.bm25_native = '{'on' if native_on else 'off'}'")
    try:
        rows = conn.execute(
            "WITH qt AS (SELECT u.lexeme, count(*)::float8 AS qtf FROM unnest(to_tsvector('english', %(q)s))"
            "   AS u(lexeme, positions, weights) CROSS JOIN LATERAL unnest(u.positions) GROUP BY u.lexeme)"
            " SELECT t.top_chunk, t.top_raw FROM bm25_top(%(sid)s, (SELECT array_agg(lexeme ORDER BY lexeme) FROM qt),"
            " (SELECT array_agg(qtf ORDER BY lexeme) FROM qt), %(d)s, %(k1)s, %(b)s, (10^15)::bigint, 0, 0) t",
            {"q": q, "sid": sid, "d": depth, "k1": k1, "b": b}).fetchall()
        return dict(rows), plan(conn)
    finally:
        conn.execute("RESET rag_exp.bm25_native")


def require_native(conn) -> None:
    if native.installed_build(conn) is None:
        why = "the native BM25 accumulator is not installed (a DATABASE_URL server, or no C compiler)"
        if os.environ.get("CI"):
            pytest.fail(why + ": CI has gcc and the embedded server, so it must be")
        pytest.skip(why)


@pytest.fixture(scope="module")
def packed(synthetic_corpus, pg_url):
    from rag_experiments.chunk_index import ingest
    from rag_experiments.db.connect import connect

    docs, queries = synthetic_corpus
    conn = connect(pg_url)
    require_native(conn)
    report = ingest(conn, docs, SYNTHETIC_CHUNKING, bench_scale.HashEmbedder())
    yield conn, report.strategy_id, queries, docs
    conn.close()


def _extra_queries(conn, sid, queries) -> list[str]:
    common = [r[0] for r in conn.execute(
        "SELECT lexeme FROM bm25_df WHERE strategy_id = %s ORDER BY df DESC, lexeme LIMIT 3", (sid,))]
    return [
        " ".join(common),                 # only the commonest words
        "memory memory memory sort",      # a repeated word counts again
        queries[1].split()[0],            # one term
        "what is the and of to it",       # stop words only: no terms
        "zzyzx qwertyuiop",               # words no chunk has
    ]


def test_the_native_search_returns_the_sql_searchs_lists_and_scores(packed):
    conn, sid, queries, _ = packed
    compared = native_plans = 0
    for k1, b in ((1.2, 0.75), (0.9, 0.4), (0.0, 0.0), (2.0, 1.0)):
        params = KeywordParams(k1=k1, b=b)
        for depth in (1, 50):
            for q in queries[:30] + _extra_queries(conn, sid, queries):
                fast, fast_plan = _search(conn, sid, q, depth, params, native_on=True)
                slow, slow_plan = _search(conn, sid, q, depth, params, native_on=False)
                assert fast == slow, (q, k1, b, depth)
                assert slow_plan != "native"
                native_plans += fast_plan == "native"
                raw_fast, _ = _top(conn, sid, q, depth, k1, b, native_on=True)
                raw_slow, _ = _top(conn, sid, q, depth, k1, b, native_on=False)
                assert raw_fast.keys() == raw_slow.keys(), (q, k1, b, depth)
                assert all(raw_fast[c] == pytest.approx(raw_slow[c], rel=1e-12) for c in raw_slow)
                compared += 1
    assert compared == 4 * 2 * 35
    # every query with a known word ran natively (the stop words' and the unknown words' query
    # have no terms)
    assert native_plans == 4 * 2 * 33


def test_packs_follow_a_reingest_that_changes_adds_and_removes_documents(synthetic_corpus, fresh_db_url, monkeypatch):
    """Packs rewritten for the touched lexemes only, ordinals renumbered once the holes outgrow
    the chunks: after each ingest every pack equals its lexeme's postings, and the native search
    equals the SQL one."""
    from rag_experiments.chunk_index import ingest
    from rag_experiments.db.connect import connect

    docs, queries = synthetic_corpus
    assert len(docs) >= 200
    conn = connect(fresh_db_url)
    require_native(conn)
    try:
        emb = bench_scale.HashEmbedder()
        sid = ingest(conn, docs[:120], SYNTHETIC_CHUNKING, emb).strategy_id
        _assert_packs_are_the_postings(conn, sid)
        longer = replace(docs[0], text=docs[0].text + "\n\n## Tail\n\nmemory memory memory memory sort.\n")
        # changed (docs[0]), removed (docs[1:50]), added (docs[120:200])
        report = ingest(conn, [longer] + docs[50:200], SYNTHETIC_CHUNKING, emb)
        assert report.strategy_id == sid and report.docs_rechunked == 1 + 80
        slots_before = _slots(conn, sid)
        _assert_packs_are_the_postings(conn, sid)
        _assert_same_answers(conn, sid, queries[:25] + ["memory sort"])

        # holes: ordinals outnumber chunks by more than RENUMBER_SLACK -> renumbered 0..n-1
        monkeypatch.setattr(bm25_stats, "RENUMBER_MIN_SLOTS", 0)
        monkeypatch.setattr(bm25_stats, "RENUMBER_SLACK", 1)
        ingest(conn, [longer] + docs[50:100], SYNTHETIC_CHUNKING, emb)
        n = conn.execute("SELECT count(*) FROM chunks WHERE strategy_id = %s", (sid,)).fetchone()[0]
        assert slots_before > n and _slots(conn, sid) == n
        _assert_packs_are_the_postings(conn, sid)
        _assert_same_answers(conn, sid, queries[:25] + ["memory sort"])
    finally:
        conn.close()


def _slots(conn, sid) -> int:
    return conn.execute("SELECT coalesce(max(ord), -1) + 1 FROM bm25_ords WHERE strategy_id = %s", (sid,)).fetchone()[0]


def _assert_packs_are_the_postings(conn, sid) -> None:
    # every chunk numbered once
    n_chunks, n_ords, distinct = conn.execute(
        "SELECT (SELECT count(*) FROM chunks WHERE strategy_id = %(s)s), count(*), count(DISTINCT ord)"
        " FROM bm25_ords o JOIN chunks c USING (strategy_id, chunk_id) WHERE o.strategy_id = %(s)s",
        {"s": sid}).fetchone()
    assert n_chunks == n_ords == distinct
    # each pack is its lexeme's postings, in ordinal order; no pack without postings, or the reverse
    differ = conn.execute(
        "WITH want AS (SELECT p.lexeme, array_agg(o.ord ORDER BY o.ord) AS ords, array_agg(p.tf ORDER BY o.ord) AS tfs,"
        "   array_agg(p.dl ORDER BY o.ord) AS dls FROM bm25_postings p JOIN bm25_ords o USING (strategy_id, chunk_id)"
        "   WHERE p.strategy_id = %(s)s GROUP BY p.lexeme),"
        " have AS (SELECT lexeme, ords, tfs, dls FROM bm25_packs WHERE strategy_id = %(s)s)"
        " SELECT count(*) FROM want FULL JOIN have USING (lexeme)"
        " WHERE want.ords IS DISTINCT FROM have.ords OR want.tfs IS DISTINCT FROM have.tfs"
        "   OR want.dls IS DISTINCT FROM have.dls", {"s": sid}).fetchone()[0]
    assert differ == 0
    assert conn.execute("SELECT count(*) FROM bm25_packs WHERE strategy_id = %s", (sid,)).fetchone()[0] > 100


def _assert_same_answers(conn, sid, queries) -> None:
    for q in queries:
        fast, fast_plan = _search(conn, sid, q, 20, native_on=True)
        assert fast_plan == "native"
        assert fast == _search(conn, sid, q, 20, native_on=False)[0], q


def test_packs_out_of_step_warn_and_the_sql_search_answers(synthetic_corpus, fresh_db_url):
    from rag_experiments.chunk_index import ingest
    from rag_experiments.db.connect import connect

    docs, queries = synthetic_corpus
    conn = connect(fresh_db_url)
    require_native(conn)
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary))
    try:
        sid = ingest(conn, docs[:150], SYNTHETIC_CHUNKING, bench_scale.HashEmbedder()).strategy_id
        q = queries[0]
        want = _search(conn, sid, q, 20, native_on=False)[0]
        lexeme = conn.execute("SELECT u.lexeme FROM unnest(to_tsvector('english', %s)) u"
                              " JOIN bm25_packs p ON p.strategy_id = %s AND p.lexeme = u.lexeme LIMIT 1",
                              (q, sid)).fetchone()[0]
        conn.execute("UPDATE bm25_packs SET ords = ords[2:], tfs = tfs[2:], dls = dls[2:]"
                     " WHERE strategy_id = %s AND lexeme = %s", (sid, lexeme))
        got, got_plan = _search(conn, sid, q, 20, native_on=True)
        assert got == want and got_plan != "native"
        assert any("out of step" in n and sid in n for n in notices), notices
    finally:
        conn.close()


def test_a_library_that_cannot_be_loaded_warns_and_ensure_reinstalls_it(synthetic_corpus, fresh_db_url):
    from rag_experiments.chunk_index import ingest
    from rag_experiments.db.connect import connect

    docs, queries = synthetic_corpus
    conn = connect(fresh_db_url)
    require_native(conn)
    folder = Path(tempfile.mkdtemp(prefix="rag-exp-native-", dir="/tmp"))
    folder.chmod(0o755)  # the embedded server's user must reach it
    try:
        sid = ingest(conn, docs[:150], SYNTHETIC_CHUNKING, bench_scale.HashEmbedder()).strategy_id
        want = _search(conn, sid, queries[0], 20, native_on=False)[0]
        # registered from a copy, which is then moved away (a server restored on another machine)
        library = conn.execute("SELECT probin FROM pg_proc WHERE proname = 'bm25_acc_trans'").fetchone()[0]
        copy = folder / "moved.so"
        shutil.copy(library, copy)
        copy.chmod(0o755)
        conn.execute(native.install_sql(str(copy)))
        copy.unlink()
    finally:
        conn.close()
    conn = connect(fresh_db_url, migrate_schema=False)  # a new backend, which has not loaded it
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary))
    try:
        assert native.installed_build(conn) is None
        got, got_plan = _search(conn, sid, queries[0], 20, native_on=True)
        assert got == want and got_plan != "native"
        assert any("native search failed" in n and "moved.so" in n for n in notices), notices
        assert native.ensure(conn) == native.build_id(conn.info.server_version)
        assert _search(conn, sid, queries[0], 20, native_on=True) == (want, "native")
    finally:
        conn.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_the_aggregate_rejects_malformed_packs_by_name(packed):
    conn, _, _, _ = packed
    call = ("SELECT bm25_accumulate(1.0, %s::integer[], %s::integer[], %s::integer[], %s, 1.2, 0.75, 10.0, 5)"
            " FROM (VALUES (1)) v")
    cases = [
        (([0, 1], [1], [3, 3], 10), "ords, tfs and dls differ in length (2, 1, 2)"),
        (([0, 10], [1, 1], [3, 3], 10), "chunk ordinal 10 outside [0, 10)"),
        (([0, None], [1, 1], [3, 3], 10), "ords must be a one-dimensional integer[] without NULLs"),
        (([[0, 1]], [1, 1], [3, 3], 10), "ords must be a one-dimensional integer[] without NULLs"),
        (([0], [1], [3], -1), "ordinal bound -1 is negative"),
    ]
    for args, message in cases:
        with pytest.raises(psycopg.Error, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
            with conn.transaction():
                conn.execute(call, args)
    # a well-formed call: (ordinal, sum) pairs, every chunk when fewer than depth match
    row = conn.execute(call, ([0, 3], [1, 2], [3, 3], 10)).fetchone()[0]
    assert [int(x) for x in row[0::2]] == [0, 3] and row[1] < row[3]


def test_no_c_compiler_is_named_and_nothing_is_written(tmp_path, monkeypatch):
    from rag_experiments.db.embedded import bin_dir

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CC", "no-such-cc")
    with pytest.raises(native.NativeBuildError, match="no C compiler found"):
        native._compile(tmp_path / "native", "test", bin_dir().parent / "include" / "server")
    assert not (tmp_path / "native").exists()


def test_a_server_of_your_own_gets_the_library_from_the_build_command(synthetic_corpus, fresh_db_url, monkeypatch,
                                                                       capsys):
    """What docs/reference/performance.md tells a DATABASE_URL user to run: the build command
    against the server's pg_config, then its printed SQL. Here the 'own server' is a database
    the automatic install was kept away from (RAG_EXP_BM25_NATIVE=0)."""
    from rag_experiments.chunk_index import ingest
    from rag_experiments.db.connect import connect
    from rag_experiments.db.embedded import bin_dir

    docs, queries = synthetic_corpus
    monkeypatch.setenv(native.ENV_SWITCH, "0")
    conn = connect(fresh_db_url)
    folder = Path(tempfile.mkdtemp(prefix="rag-exp-native-own-", dir="/tmp"))
    folder.chmod(0o755)  # the server's user loads the library from here
    try:
        assert native.installed_build(conn) is None
        sid = ingest(conn, docs[:150], SYNTHETIC_CHUNKING, bench_scale.HashEmbedder()).strategy_id
        want, sql_plan = _search(conn, sid, queries[1], 20, native_on=True)
        assert sql_plan != "native"  # not installed: the SQL search answers
        library = folder / f"bm25_native-{native.build_id(conn.info.server_version)}.so"
        assert native.main(["--pg-config", str(bin_dir() / "pg_config"), "--out", str(folder),
                            "--library-path", str(library)]) == 0
        printed = capsys.readouterr().out
        assert library.exists() and f"'{library}'" in printed
        conn.execute(printed)
        assert native.installed_build(conn) == native.build_id(conn.info.server_version)
        assert _search(conn, sid, queries[1], 20, native_on=True) == (want, "native")
    finally:
        conn.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_the_build_command_names_a_missing_pg_config(capsys):
    assert native.main(["--pg-config", "/no/such/pg_config", "--out", "/tmp"]) == 2
    err = capsys.readouterr().err
    assert "/no/such/pg_config --version failed" in err and "--pg-config" in err


def test_the_build_command_names_a_folder_it_cannot_write(capsys, tmp_path):
    from rag_experiments.db.embedded import bin_dir

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert native.main(["--pg-config", str(bin_dir() / "pg_config"), "--out", str(blocker / "lib")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot write the library into {blocker / 'lib'}") and "Traceback" not in err


def _corrupt(library: Path) -> None:
    """The library cut to half its bytes (a full disk, an interrupted copy). Replaced, not truncated
    in place: a backend that has the file mapped would crash on a page past its new end."""
    half = library.with_name(library.name + ".half")
    half.write_bytes(library.read_bytes()[: library.stat().st_size // 2])
    half.chmod(0o755)
    os.replace(half, library)


def test_a_truncated_library_warns_and_is_rebuilt_or_the_sql_search_answers(synthetic_corpus, fresh_db_url,
                                                                           monkeypatch, caplog):
    """Issue 49 P3. Before: connect() loaded the damaged file (to ask its build, then to register
    it again): cut short it ends in a psycopg traceback (``could not load library``), cut in half it
    crashed the backend and the server restarted every connection (``the database system is not
    yet accepting connections``). Now: its checksum says so before anything loads it; a warning,
    the file is deleted and compiled again, and the leg answers natively; where no compiler can
    rebuild it, a warning and the SQL search's list, as with no compiler."""
    from rag_experiments.chunk_index import ingest
    from rag_experiments.db.connect import connect

    docs, queries = synthetic_corpus
    conn = connect(fresh_db_url)
    require_native(conn)
    try:
        sid = ingest(conn, docs[:150], SYNTHETIC_CHUNKING, bench_scale.HashEmbedder()).strategy_id
        want = _search(conn, sid, queries[2], 20, native_on=False)[0]
        library = Path(conn.execute("SELECT probin FROM pg_proc WHERE proname = 'bm25_acc_trans'").fetchone()[0])
    finally:
        conn.close()

    _corrupt(library)
    with caplog.at_level("WARNING", logger=native.__name__):
        conn = connect(fresh_db_url)  # a new backend: it loads the library from disk
    try:
        assert any(r.levelname == "WARNING" and f"{library} is damaged" in r.getMessage()
                   and "compiling it again" in r.getMessage() for r in caplog.records), caplog.text
        assert native.library_problem(library) is None  # compiled again, its checksum beside it
        assert _search(conn, sid, queries[2], 20, native_on=True) == (want, "native")
    finally:
        conn.close()

    _corrupt(library)
    caplog.clear()
    monkeypatch.setenv("PATH", str(library.parent / "no-such-bin"))  # no compiler to rebuild it
    monkeypatch.setenv("CC", "no-such-cc")
    native._warned.clear()
    try:
        with caplog.at_level("WARNING", logger=native.__name__):
            conn = connect(fresh_db_url)
        try:
            text = caplog.text
            assert "is damaged" in text and "no C compiler found" in text and "runs in SQL" in text, text
            assert not library.exists()  # deleted: the registered functions fail cleanly, never load it
            got, got_plan = _search(conn, sid, queries[2], 20, native_on=True)
            assert got == want and got_plan != "native"
        finally:
            conn.close()
    finally:  # the session's other tests need the library: build it again with the compiler back
        monkeypatch.undo()
        conn = connect(fresh_db_url)
        try:
            assert native.installed_build(conn) == native.build_id(conn.info.server_version)
        finally:
            conn.close()


def test_a_library_the_server_refuses_is_compiled_again_once(synthetic_corpus, fresh_db_url, caplog):
    """Its checksum matches, yet the server will not load it (here: a library without
    PostgreSQL's magic block, standing in for another architecture or an unreadable file). Before:
    connect() ended in a psycopg traceback. Now: a warning, compiled again, installed."""
    from rag_experiments.db.connect import connect

    conn = connect(fresh_db_url)
    require_native(conn)
    library = Path(conn.execute("SELECT probin FROM pg_proc WHERE proname = 'bm25_acc_trans'").fetchone()[0])
    conn.close()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "other.c"
        src.write_text("int not_the_accumulator = 1;\n")
        other = library.with_name(library.name + ".other")
        subprocess.run([shutil.which(os.environ.get("CC", "cc")) or "gcc", "-shared", "-fPIC", "-o", str(other),
                        str(src)], check=True)
    other.chmod(0o755)
    os.replace(other, library)
    refused = native._sha256(library)
    native._checksum_file(library).write_text(refused + "\n")
    with caplog.at_level("WARNING", logger=native.__name__):
        conn = connect(fresh_db_url)
    try:
        assert f"the server could not load {library}" in caplog.text and "compiling it again" in caplog.text
        assert native.installed_build(conn) == native.build_id(conn.info.server_version)
        assert native.library_problem(library) is None and native._sha256(library) != refused
    finally:
        conn.close()
