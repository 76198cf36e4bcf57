"""No password or API key reaches MLflow, Hydra's output folders, logs or messages.

The end-to-end tests pass every connection-string form libpq accepts, each with its own
password, through real runs and a real sweep (``run.py``, Hydra, MLflow sqlite store, the
embedded PostgreSQL, which accepts any password over its socket), then read every byte the
project folder holds (MLflow's sqlite database and artifacts, ``.rag-exp/``, ``outputs/``,
``multirun/``) and the captured stdout/stderr, looking for any of the secrets.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from psycopg.conninfo import conninfo_to_dict

from rag_experiments.redaction import RedactingFilter, redact_dsn, redact_obj, redact_text

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "tests" / "fixtures" / "mini_corpus"
API_KEY = "sk-ant-api03-NEVERLOGME0123456789"


# -- unit: every DSN form -----------------------------------------------------------------------
@pytest.mark.parametrize("dsn, secret", [
    ("postgresql://alice:Url-S3cret@db.example:5432/rag", "Url-S3cret"),
    ("postgresql://alice:p%40ss%2Fw%3Ard-Enc@db.example/rag", "p@ss/w:rd-Enc"),
    ("postgresql://alice@db.example/rag?sslmode=require&password=Query-S3cret", "Query-S3cret"),
    ("host=db.example user=alice password=Kv-S3cret dbname=rag", "Kv-S3cret"),
    ("host=db.example password = 'two words Kvq-S3cret' dbname=rag", "two words Kvq-S3cret"),
    ("postgresql://alice:raw@At-S3cret@db.example/rag", "raw@At-S3cret"),
    ("postgres://alice:Sock-S3cret@/rag?host=/tmp/sock", "Sock-S3cret"),
    ("postgresql://alice:pa?ss#Odd-S3cret@db.example/rag", "pa?ss#Odd-S3cret"),
    ("postgresql://alice@db.example/rag?password=x@Odd2-S3cret&sslmode=require", "x@Odd2-S3cret"),
    ("postgresql://alice@db.example/rag?sslpassword=Ssl-S3cret", "Ssl-S3cret"),
])
def test_redact_dsn_masks_every_libpq_form(dsn, secret):
    out = redact_dsn(dsn)
    for fragment in (secret, quote(secret, safe=""), secret.split("@")[-1], secret.split(" ")[-1],
                     secret.split("#")[-1]):
        assert fragment not in out, (dsn, out)
    assert "***" in out
    params = conninfo_to_dict(out)  # still a connection string libpq reads, host and db kept
    assert params.get("dbname") == "rag"


def test_redact_dsn_leaves_a_password_free_string_alone():
    assert redact_dsn("postgresql://postgres@/rag?host=/tmp") == "postgresql://postgres@/rag?host=/tmp"
    assert redact_dsn("host=/tmp dbname=rag") == "host=/tmp dbname=rag"


def test_redact_text_and_config_keys():
    text = ("overrides: db.url='postgresql://u:TextPw-1@/db?host=/p' ANTHROPIC_API_KEY=" + API_KEY +
            " and api_key: other-Key-123 max_tokens: 200")
    out = redact_text(text)
    assert "TextPw-1" not in out and API_KEY not in out and "other-Key-123" not in out
    assert "max_tokens: 200" in out  # not a secret
    cfg = {"db": {"url": "host=/x password=CfgPw-1 dbname=r"}, "llm": {"api_key": "k-123456"},
           "chunking": {"max_tokens": "60", "tokenizer": "minilm"}}
    out = redact_obj(cfg)
    assert "CfgPw-1" not in str(out) and out["llm"]["api_key"] == "***"
    assert out["chunking"] == cfg["chunking"]


def test_a_secret_seen_once_is_masked_in_any_later_text():
    redact_dsn("host=h password=Remembered-77 dbname=x")
    assert redact_text('connection failed: missing "=" after "Remembered-77"') == \
        'connection failed: missing "=" after "***"'


def test_logging_filter_masks_records():
    import logging

    record = logging.LogRecord("hydra", logging.INFO, __file__, 1, "\t#%d : %s", (0, "db.url='postgresql://u:LogPw-9@/d'"),
                               None)
    RedactingFilter().filter(record)
    assert "LogPw-9" not in record.getMessage()


def test_connection_errors_are_masked():
    from rag_experiments.db.connect import connect
    from rag_experiments.errors import DatabaseError

    for dsn, secret in (("postgresql://nobody:Refused-S3cret@127.0.0.1:1/none", "Refused-S3cret"),
                        ("host=127.0.0.1 port=1 password=Kv-Refused-S3cret dbname=x", "Kv-Refused-S3cret"),
                        # libpq cannot parse this one: the driver's message quotes the string
                        ("host=127.0.0.1 password=Parse-S3cret garbage", "Parse-S3cret")):
        with pytest.raises(DatabaseError) as err:
            connect(dsn)
        assert secret not in str(err.value) and "cannot connect" in str(err.value), err.value


def test_db_status_and_url_mask_database_url(monkeypatch, capsys, tmp_path):
    from rag_experiments import cli

    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))
    for dsn, secret in (("host=/nowhere user=u password=Status-S3cret dbname=x", "Status-S3cret"),
                        ("postgresql://u@/x?host=/nowhere&password=Status-Q-S3cret", "Status-Q-S3cret")):
        monkeypatch.setenv("DATABASE_URL", dsn)
        assert cli.main(["db", "status"]) == 0
        assert cli.main(["db", "url"]) == 0
        out = capsys.readouterr()
        assert secret not in out.out + out.err and "***" in out.out


# -- end to end: real runs and a real sweep ---------------------------------------------------
def _forms(url: str) -> list[tuple[str, str]]:
    """(Hydra override value, secret) for every DSN form, all pointing at the test database."""
    p = conninfo_to_dict(url)
    host, port, user, db = p.get("host", "/tmp"), p.get("port", "5432"), p.get("user", "postgres"), p["dbname"]
    enc = "e2e@pw/Enc-S3cret"
    return [
        (f"postgresql://{user}:E2e-Url-S3cret@/{db}?host={host}&port={port}", "E2e-Url-S3cret"),
        (f"postgresql://{user}:{quote(enc, safe='')}@/{db}?host={host}&port={port}", enc),
        (f"postgresql://{user}@/{db}?host={host}&port={port}&password=E2e-Query-S3cret", "E2e-Query-S3cret"),
        (f"host={host} port={port} user={user} password=E2e-Kv-S3cret dbname={db}", "E2e-Kv-S3cret"),
        (f"postgresql://{user}:raw@E2e-Ät-漢€-S3cret@/{db}?host={host}&port={port}", "raw@E2e-Ät-漢€-S3cret"),
    ]


def _needles(secrets: list[str]) -> list[bytes]:
    out = set()
    for s in secrets:
        for variant in (s, quote(s, safe=""), s.split("@")[-1], s.split("/")[-1]):
            if len(variant) >= 6:
                out.add(variant.encode())
    return sorted(out)


def _grep(folder: Path, needles: list[bytes]) -> list[str]:
    hits = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            hits += [f"{path.relative_to(folder)}: {n.decode()}" for n in needles if n in data]
    return hits


def _run_py(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAG_EXP_HOME": str(project), "PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": API_KEY}
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)


def _mini(golden: Path) -> list[str]:
    return [f"corpus.path={MINI}", "corpus.name=mini", f"golden.path={golden}", "chunking.max_tokens=60",
            "progress=false", "eval.bootstrap_samples=50", "tracking.plots=false"]


def test_no_secret_anywhere_after_runs_and_a_sweep(project, mini_golden):
    forms = _forms(os.environ["DATABASE_URL"])
    outputs = []
    # single runs (outputs/...): a URL, with an explicit run name quoting it, and a key=value string
    for i, (dsn, _) in enumerate(forms[:1] + forms[3:4]):
        extra = [f"run_name='try {dsn}'"] if i == 0 else []
        proc = _run_py(project, f"db.url='{dsn}'", *_mini(mini_golden), *extra)
        assert proc.returncode == 0, proc.stderr[-3000:]
        outputs.append(proc.stdout + proc.stderr)
    # a sweep over every form at once (multirun/..., a parent run and one child per form)
    sweep = ",".join(f"'{dsn}'" for dsn, _ in forms)
    proc = _run_py(project, "-m", f"db.url={sweep}", *_mini(mini_golden))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "#4 :" in proc.stdout + proc.stderr  # Hydra's launcher printed every point (masked)
    outputs.append(proc.stdout + proc.stderr)
    # a run whose database refuses the connection: the error is masked too
    proc = _run_py(project, "db.url='postgresql://u:E2e-Refused-S3cret@127.0.0.1:1/x'", *_mini(mini_golden))
    assert proc.returncode == 2 and "cannot connect" in proc.stderr and "Traceback" not in proc.stderr
    outputs.append(proc.stdout + proc.stderr)

    for sub in ("mlruns", "outputs", "multirun"):
        assert (project / sub).is_dir(), sub
    assert list((project / "outputs").rglob(".hydra/overrides.yaml"))
    assert (list((project / "multirun").rglob("multirun.yaml")))
    needles = _needles([s for _, s in forms] + ["E2e-Refused-S3cret", API_KEY])
    hits = _grep(project, needles)  # mlruns/mlflow.db, mlruns/artifacts, outputs, multirun, .rag-exp
    hits += [f"captured output: {n.decode()}" for n in needles for text in outputs if n.decode() in text]
    assert hits == []
    # the runs still say which database they used, password masked
    overrides = next((project / "outputs").rglob(".hydra/overrides.yaml")).read_text()
    assert "***" in overrides and "db.url=" in overrides


def test_hydra_config_errors_do_not_echo_the_password(tmp_path):
    """Hydra prints these itself, quoting the override (found while probing, issue 12)."""
    secret = "Hydra-Err-S3cret"
    for override, echoed in ((f"db.urll='host=/x password={secret}'", False),  # unknown key: refused by name only
                             (f"db.url=[1,'postgresql://u:{secret}@h/d']", True),  # wrong type: "Error merging override"
                             (f"db.url='postgresql://u:{secret}@h/d'", True)):     # --cfg job prints the config
        args = [override, "--cfg", "job"] if override.startswith("db.url='") else [override]
        proc = _run_py(tmp_path, *args)
        assert secret not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
        if echoed:  # the value is quoted back, masked
            assert "***" in proc.stdout + proc.stderr
