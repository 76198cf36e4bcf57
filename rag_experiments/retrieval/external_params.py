"""The knobs of a team's own retriever: ``retrieval.external`` (a Python target) and
``retrieval.http`` (a search service). Plain frozen dataclasses like every group's params.

``external.params`` is a free mapping: its keys are the team's knobs (``chunk_size``,
``top_n`` ...), passed to the target as keyword arguments, logged as params
(``retrieval.external.params.chunk_size``) and sweepable like any key
(``-m retrieval.external.params.chunk_size=256,512``). It is the one place where keys the
schema does not know are accepted (see :func:`rag_experiments.config.free_mapping_overrides`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError

#: "package.module:attribute" (the attribute may be dotted: "pkg.mod:Class.factory")
TARGET_PATTERN = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
OFFSET_MODES = ("auto", "raw", "text")


@dataclass(frozen=True)
class ExternalParams:
    target: str | None = None  # "package.module:attribute": a function f(query, k, **params) or a class with search()
    init: dict[str, Any] = field(default_factory=dict)  # kwargs for a class target, constructed once per process
    params: dict[str, Any] = field(default_factory=dict)  # the system's own knobs: kwargs of every call
    # declared identity of what the code does not show (an index rebuilt, a model file): part of the
    # cache key beside the target, init, params and the digests of the project-local modules it imports
    version: str | None = None
    cache: bool = True  # false: every query asked live, no answer read from or written to the cache
    # a run that uses the cache re-asks a random sample of its queries live and compares
    # (retrieval.answer_check): max(verify, verify_share of the queries); 0 opts out (tagged on the run)
    verify: int = 10
    verify_share: float = 0.05
    verify_seed: int | None = None  # the sample's seed; None: a fresh one, logged as a run tag
    # bounds on a Python target's answer, as retrieval.http has (a bad answer fails in one line)
    max_passage_chars: int = 200_000  # a passage's text longer than this is refused
    deadline_s: float = 60.0  # seconds one query may take; past it the run stops with one line
    max_unplaced: float = 0.1  # share of hits that may fail to be placed in the corpus before the run stops
    # what a passage's start/end count from: raw (the file as read, YAML front matter included: what
    # LangChain TextLoader / LlamaIndex SimpleDirectoryReader count), text (the stored text after
    # the front matter) or auto (checked against the passage's text when it has one)
    offsets: str = "auto"

    def __post_init__(self) -> None:
        if self.target is not None and not TARGET_PATTERN.match(self.target):
            raise ConfigError(f"retrieval.external.target: {self.target!r} is not 'package.module:attribute'",
                              hint="e.g. retrieval.external.target=my_rag.search:retrieve")
        if not (0.0 <= self.max_unplaced <= 1.0) or math.isnan(self.max_unplaced):
            raise ConfigError(f"retrieval.external.max_unplaced: must be within 0..1, got {self.max_unplaced}")
        if self.offsets not in OFFSET_MODES:
            raise ConfigError(f"retrieval.external.offsets: must be one of {', '.join(OFFSET_MODES)}, "
                              f"got {self.offsets!r}")
        if isinstance(self.verify, bool) or not isinstance(self.verify, int) or self.verify < 0:
            raise ConfigError(f"retrieval.external.verify: must be an integer >= 0 (queries re-asked live to "
                              f"check the answer cache; 0 turns the check off), got {self.verify!r}")
        if not (0.0 <= self.verify_share <= 1.0) or math.isnan(self.verify_share):
            raise ConfigError(f"retrieval.external.verify_share: must be within 0..1, got {self.verify_share}")
        if isinstance(self.max_passage_chars, bool) or not self.max_passage_chars >= 1:
            raise ConfigError(f"retrieval.external.max_passage_chars: must be >= 1, got {self.max_passage_chars}")
        if not self.deadline_s > 0 or math.isinf(self.deadline_s):
            raise ConfigError(f"retrieval.external.deadline_s: must be a finite number > 0, got {self.deadline_s}",
                              hint="seconds one query of a Python target may take")
        for name in ("init", "params"):
            bad = [k for k in getattr(self, name) if not str(k).isidentifier()]
            if bad:
                raise ConfigError(f"retrieval.external.{name}.{bad[0]}: not a keyword argument name")


@dataclass(frozen=True)
class HttpParams:
    """POST ``{"query", "k", "params"}`` to ``url``; the answer is a JSON list of passages (or an
    object whose ``passages``/``results``/``hits`` field is one)."""

    url: str | None = None
    timeout_s: float = 30.0
    retries: int = 2  # on connection errors, timeouts, 429 and 5xx, with exponential backoff
    backoff_s: float = 0.5  # first retry's wait; doubled each retry
    concurrency: int = 4  # requests in flight at once
    auth_env: str | None = None  # name of the environment variable holding the header's value (never logged)
    auth_header: str = "Authorization"
    params: dict[str, Any] = field(default_factory=dict)  # sent as "params": the service's own knobs
    # rag: the body above; mlflow: an MLflow scoring server (`mlflow models serve`, e.g. a champion
    # of this tool): {"inputs": [query], "params": {"k": k, **params}}, its "predictions" rows back
    format: str = "rag"
    # bounds on what the service may send, so a bad answer fails in one line instead of hanging the run
    max_passage_chars: int = 200_000  # a passage's text longer than this is refused
    max_response_bytes: int = 32_000_000  # an answer body larger than this is refused (read streamed)
    deadline_s: float = 120.0  # seconds one query may take in all, retries and backoff included

    def __post_init__(self) -> None:
        if self.format not in ("rag", "mlflow"):
            raise ConfigError(f"retrieval.http.format: must be 'rag' or 'mlflow', got {self.format!r}")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ConfigError(f"retrieval.http.url: {self.url!r} is not an http(s) URL")
        if not self.timeout_s > 0:
            raise ConfigError(f"retrieval.http.timeout_s: must be > 0, got {self.timeout_s}")
        if self.retries < 0:
            raise ConfigError(f"retrieval.http.retries: must be >= 0, got {self.retries}")
        if self.backoff_s < 0:
            raise ConfigError(f"retrieval.http.backoff_s: must be >= 0, got {self.backoff_s}")
        if self.concurrency < 1:
            raise ConfigError(f"retrieval.http.concurrency: must be >= 1, got {self.concurrency}")
        if isinstance(self.max_passage_chars, bool) or not self.max_passage_chars >= 1:
            raise ConfigError(f"retrieval.http.max_passage_chars: must be >= 1, got {self.max_passage_chars}")
        if isinstance(self.max_response_bytes, bool) or not self.max_response_bytes >= 1024:
            raise ConfigError(f"retrieval.http.max_response_bytes: must be >= 1024, got {self.max_response_bytes}")
        if not self.deadline_s > 0 or math.isinf(self.deadline_s):
            raise ConfigError(f"retrieval.http.deadline_s: must be a finite number > 0, got {self.deadline_s}",
                              hint="seconds one query may take in all, its retries included")
        if self.auth_env is not None and not re.match(r"^[A-Za-z_]\w*$", self.auth_env):
            raise ConfigError(f"retrieval.http.auth_env: {self.auth_env!r} is not an environment variable name")


STORED_FORMATS = ("trec", "jsonl")


@dataclass(frozen=True)
class StoredParams:
    """``retrieval=stored``: the ranked lists of a system that cannot be called here (offline,
    another team's), read from a file (``rag-exp import-run FILE``). See
    :mod:`rag_experiments.retrieval.stored_run` for the two formats."""

    path: str | None = None
    format: str = "trec"

    def __post_init__(self) -> None:
        if self.format not in STORED_FORMATS:
            raise ConfigError(f"retrieval.stored.format: must be one of {', '.join(STORED_FORMATS)}, "
                              f"got {self.format!r}")
