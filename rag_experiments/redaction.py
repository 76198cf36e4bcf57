"""The one place that decides what a secret looks like and masks it (``***``).

Everything that leaves the process (MLflow run names, tags, params, artifacts, Hydra's output
files, logs, error messages, ``rag-exp db status``) goes through :func:`redact_text`,
:func:`redact_dsn` or :func:`redact_obj`.

Connection strings are parsed with libpq's own rules (``psycopg.conninfo.conninfo_to_dict``),
so every form libpq accepts is covered: ``scheme://user:pw@host``, percent-encoded passwords,
``?password=`` query parameters and ``key=value`` strings (``host=... password=...``, quoted or
not). Two cases libpq parses differently from what a user meant are handled on purpose:

* an unencoded ``@`` inside a URL password (``postgresql://u:p@ss@h/db``): libpq reads the
  password as ``p`` and the host as ``ss@h``; we mask everything between ``user:`` and the
  *last* ``@``, so no fragment of the password survives;
* a string libpq cannot parse at all: a conservative pattern mask instead of the parser.

Every password found is also remembered for the life of the process (:func:`register_secret`),
with ``$ANTHROPIC_API_KEY`` and the password inside ``$DATABASE_URL``: any later text that
carries one verbatim (a driver's error message quoting the connection string, a log line) is
masked even where no pattern would recognise it.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import Any

MASK = "***"
# a config key or parameter name whose value is a secret
# (ends the name: ``max_tokens`` and ``tokenizer`` are not secrets, ``access_token`` is)
SECRET_KEY = re.compile(r"(api[_-]?key|password|passwd|secret(?:[_-]?key)?|token|credentials?)$", re.I)
# the same words anywhere in a text: a file without one has no secret-named key to walk to
SECRET_WORD = re.compile(r"api[_-]?key|password|passwd|secret|token|credential", re.I)
# libpq parameters that hold a secret (password, sslpassword)
_DSN_SECRET_PARAM = re.compile(r"password", re.I)
# a URL-like token inside free text; stops at whitespace and quotes. The scheme starts where a
# run of scheme characters starts (the look-behind): tried from every letter of a 300,000-letter
# line, the scan for "://" took quadratic time (corpus show ran 4.5 minutes, issue 55)
_URL = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*+://[^\s'\"<>]*")
# key=value secrets in free text: libpq strings, query strings, KEY=VALUE env lines, YAML/JSON
# "key: value" (value quoted with ' or ", or up to whitespace/&/,). The key starts where a run
# of key characters starts (the look-behind), so each run is scanned once: linear time
_KV = re.compile(
    r"(?P<key>(?<![\w.\-])[\w.\-]*?(?:api[_-]?key|password|passwd|secret(?:[_-]?key)?|token|credentials?)\b)"
    r"(?P<sep>\s*[=:]\s*|\"\s*:\s*)"
    r"(?P<val>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s&,;'\"}\]]+)",
    re.I,
)
# well-known API key shapes, masked wherever they appear (Anthropic, OpenAI-style, GitHub)
_KEY_SHAPES = re.compile(r"\b(?:sk-ant-[A-Za-z0-9_\-]{6,}|sk-[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,})")
_MIN_KNOWN = 4  # shorter remembered secrets would mask ordinary words
_MIN_ENV = 8  # an env var named like a secret may hold a flag ("true"): only long values

_known: set[str] = set()


def register_secret(value: str | None, min_len: int = _MIN_KNOWN) -> None:
    """Remember a secret so any later text that quotes it verbatim is masked."""
    if value and len(value) >= min_len and MASK not in value:
        _known.add(value)


def secrets_known() -> int:
    """How many secrets this process has learned: a text checked clean stays clean until it grows."""
    return len(_known)


def _env_secrets() -> None:
    for name, value in os.environ.items():
        if SECRET_KEY.search(name) and value:
            register_secret(value, _MIN_ENV)
    url = os.environ.get("DATABASE_URL")
    if url:
        _dsn_password(url)


def _dsn_password(dsn: str) -> dict | None:
    """libpq's reading of ``dsn`` (None when it cannot parse it); registers its secrets."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - not a connection string libpq accepts
        return None
    for k, v in params.items():
        if _DSN_SECRET_PARAM.search(k) and v:
            register_secret(str(v))
    return params


# a secret query parameter (password, sslpassword, api_key, token...), value up to & or #
_QUERY_SECRET = re.compile(r"([?&][^=&#\s?]*?(?:password|passwd|api[_-]?key|token|secret)=)([^&#\s]*)", re.I)


def _mask_query(m: re.Match) -> str:
    if m.group(2) != MASK:
        register_secret(m.group(2))
    return m.group(1) + MASK


def _mask_url(url: str) -> str:
    """A URL with its userinfo password and secret query parameters masked, shape kept.

    The userinfo ends at the *last* ``@``: a raw ``@``, ``/``, ``?`` or ``#`` inside a password
    then stays inside the masked part (over-masking an odd URL is fine, a leaked fragment is not).
    """
    scheme, _, rest = url.partition("://")
    rest = _QUERY_SECRET.sub(_mask_query, rest)
    if "@" in rest:
        userinfo, _, hostpart = rest.rpartition("@")
        if ":" in userinfo:
            user, _, pw = userinfo.partition(":")
            if pw != MASK:
                register_secret(pw)
                _register_misread(scheme, user, pw, hostpart)
            rest = f"{user}:{MASK}@{hostpart}"
    return f"{scheme}://{rest}"


# what libpq reads as the end of a URL's password or the start of the next part: a password
# holding one of these unencoded is cut there, and the rest becomes the host, port or database
# (which the driver then quotes in its error: ``failed to resolve host 'ssW0rd@127.0.0.1'``)
_URL_SEPARATOR = re.compile(r"[@:/?#\s]|%(?![0-9A-Fa-f]{2})")


def _encoded_password(pw: str) -> str:
    """``pw`` as libpq needs it in a URL: separators percent-encoded, valid ``%XX`` escapes kept."""
    return _URL_SEPARATOR.sub(lambda m: "".join(f"%{b:02X}" for b in m.group(0).encode()), pw)


def _libpq_reading(url: str) -> dict | None:
    try:
        from psycopg.conninfo import conninfo_to_dict

        return conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - libpq cannot parse it
        return None


def _register_misread(scheme: str, user: str, pw: str, hostpart: str) -> None:
    """A password libpq cuts short leaves its fragments in the host, port or database libpq
    reads: remember each fragment and each of those values, so any text quoting them is masked."""
    meant = f"{scheme}://{user}:{_encoded_password(pw)}@{hostpart}"
    if meant == f"{scheme}://{user}:{pw}@{hostpart}":
        return
    fragments = [f for f in _URL_SEPARATOR.split(pw) if f]
    for fragment in fragments:
        register_secret(fragment)
    meant_values = set((_libpq_reading(meant) or {}).values())
    for value in (_libpq_reading(f"{scheme}://{user}:{pw}@{hostpart}") or {}).values():
        if value not in meant_values and any(f in value for f in fragments):
            register_secret(value)


_QUERY_START = re.compile(r"\?[A-Za-z_]+=")


def misread_password(url: str) -> str:
    """The characters of a URL's password that libpq would read as separators (``@``, ``:``,
    ``/``, ``?``, ``#``, a space, a ``%`` not starting an escape), in order, each once; "" when
    libpq reads the password the URL's writer meant (the userinfo ends at the last ``@``)."""
    scheme, sep, rest = url.strip().partition("://")
    query = _QUERY_START.search(rest)  # an ``@`` in ``?application_name=a@b`` ends no userinfo
    if not sep or "@" not in rest[: query.start() if query else None]:
        return ""
    userinfo = rest[: query.start() if query else None].rpartition("@")[0]
    if ":" not in userinfo:
        return ""
    user, _, pw = userinfo.partition(":")
    meant = f"{scheme}://{user}:{_encoded_password(pw)}{rest[len(userinfo):]}"
    if _libpq_reading(meant) == _libpq_reading(url.strip()):
        return ""  # libpq reads it as meant (a ``:`` inside a password is fine, for one)
    return "".join(dict.fromkeys(m.group(0)[0] for m in _URL_SEPARATOR.finditer(pw)))


def redact_dsn(dsn: str) -> str:
    """A connection string (URL or libpq ``key=value``) with every password masked.

    URLs keep their shape (``postgresql://u:***@host/db``); ``key=value`` strings are rebuilt
    with ``psycopg.conninfo.make_conninfo`` (``password=***``). A string without a password
    comes back unchanged.
    """
    if not dsn:
        return dsn
    params = _dsn_password(dsn)
    if re.match(r"^\s*[A-Za-z][A-Za-z0-9+.\-]*://", dsn):
        return _scrub_known(_mask_url(dsn))
    if params is not None:
        if not any(_DSN_SECRET_PARAM.search(k) for k in params):
            return dsn
        from psycopg.conninfo import make_conninfo

        return make_conninfo(**{k: (MASK if _DSN_SECRET_PARAM.search(k) else v) for k, v in params.items()})
    return redact_text(dsn)


def _scrub_known(text: str) -> str:
    for secret in sorted(_known, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def _mask_kv(m: re.Match) -> str:
    val = m.group("val")
    if val in (MASK, f"'{MASK}'", f'"{MASK}"') or val.lower() in ("null", "none", "~", "''", '""'):
        return m.group(0)
    raw = val[1:-1] if len(val) >= 2 and val[0] == val[-1] and val[0] in "'\"" else val
    register_secret(raw)
    quote = val[0] if val[0] in "'\"" and len(val) >= 2 and val[-1] == val[0] else ""
    return f"{m.group('key')}{m.group('sep')}{quote}{MASK}{quote}"


def redact_text(text: str) -> str:
    """Free text (a log line, an error message, an override, a YAML file) with every secret
    masked: URLs with passwords, ``password=...`` / ``api_key: ...`` pairs, API-key shapes, and
    every secret seen before in this process."""
    if not text:
        return text
    _env_secrets()
    return _redact_learned(text)


def _redact_learned(text: str) -> str:
    """:func:`redact_text` once the environment's secrets are registered."""
    text = _URL.sub(lambda m: _mask_url(m.group(0)) if "@" in m.group(0) or "?" in m.group(0) else m.group(0), text)
    text = _KV.sub(_mask_kv, text)
    text = _KEY_SHAPES.sub(MASK, text)
    return _scrub_known(text)


def redact_obj(obj: Any, key: str = "") -> Any:
    """A config-like structure with secrets removed: a value under a secret-looking key
    (``api_key``, ``password``, ``token``, ...) becomes ``***``; every other string goes through
    :func:`redact_text` (a DB URL keeps its shape with the password masked)."""
    _env_secrets()  # once per structure, not per string (a config holds hundreds)
    return _redact_tree(obj, key)


def _redact_tree(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        return {k: _redact_tree(v, str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_redact_tree(v, key) for v in obj]
    if isinstance(obj, str):
        if SECRET_KEY.search(key) and obj:
            register_secret(obj)
            return MASK
        return _redact_learned(obj) if obj else obj
    return obj


def register_argv(argv: list[str]) -> None:
    """Learn the secrets a command line carries (Hydra overrides such as
    ``db.url='postgresql://u:pw@h/db'`` or ``+llm.api_key=...``) before anything echoes them."""
    for arg in argv:
        key, eq, value = arg.partition("=")
        if eq:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            if SECRET_KEY.search(key):
                register_secret(value)
            if _dsn_password(value) is None:
                _loose_passwords(value)  # quoting gone wrong: libpq cannot parse it, Hydra will quote it back
            if "://" in value:
                _mask_url(value)
        redact_text(arg)


# ``password=`` (or another secret name) and whatever follows up to the next ``name=`` of a libpq
# string or the end: a mis-quoted value (``password=''S3cret PW2''``) is still the secret
# (the stop is looked for only where a run of spaces starts: linear time)
_LOOSE_SECRET = re.compile(r"(?:password|passwd|api[_-]?key|secret|token)\s*=\s*(.*?)(?=(?<!\s)\s+[A-Za-z_]+\s*=|$)",
                           re.I)


def _loose_passwords(value: str) -> None:
    """Learn what follows a secret's name in a value libpq could not parse: the whole remainder
    with its quotes stripped, and each of its words (Hydra's parse errors quote single tokens)."""
    for m in _LOOSE_SECRET.finditer(value):
        raw = m.group(1).strip().strip("'\"").strip()
        if not raw:
            continue
        register_secret(raw)
        for word in re.split(r"\s+", raw):
            register_secret(word.strip("'\""))


class RedactingFilter(logging.Filter):
    """A logging filter that masks secrets in every record (Hydra's launcher logs each sweep
    point's overrides; a job may log a connection error). Wired into Hydra's logging config in
    ``conf/config.yaml``."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logging's problem, not ours
            return True
        masked = redact_text(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


class RedactingStream:
    """A text stream that masks secrets in everything written through it.

    ``run.py`` puts stdout and stderr behind it: Hydra prints its own errors, and some of them
    quote the override that caused them (``Error merging override db.url=...``, ``To append to
    your config use +db.urll='host=... password=...'``), before any code of ours could catch
    them. Everything else (isatty, fileno, encoding, flush) is the wrapped stream's."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact_text(text) if isinstance(text, str) else text)
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def redact_process_output() -> None:
    """Mask secrets in this process's stdout and stderr from now on (idempotent)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream))
