"""A team's own system behind the same protocol (:mod:`rag_experiments.retrieval.external`):
``external`` (a Python target), ``http`` (a search service), ``stored`` (a run file). Nothing is
ingested: the passages it returns are placed in the corpus text and scored like a built-in
variant's hits."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from ...errors import ConfigError
from ...redaction import redact_text
from ..external import ExternalRetriever, System, load_http_target, load_python_target, load_stored_run
from ..external_params import ExternalParams, HttpParams, StoredParams
from . import BuildInputs, Getter, SystemType


def answer_cache(settings: Any) -> bool:
    """Whether the system's answers are cached in the database (``retrieval.use_cache`` and
    ``retrieval.external.cache``, for a Python target and a service alike; a stored run is its own
    cache: its file is read every run)."""
    r = settings.retrieval
    if r.variant == "stored":
        return False
    return r.use_cache and r.external.cache


def _load_stored(inputs: BuildInputs) -> System:
    r = inputs.settings.retrieval
    if r.external.version is not None:  # what would it declare? the file is the system, its sha256 the key
        raise ConfigError(f"retrieval.external.version={r.external.version}: a stored run is identified by its "
                          "file's sha256 (re-read every run, never cached), so a declared version changes nothing",
                          hint="drop the override; import the new run file (rag-exp import-run) instead")
    if inputs.queries_by_case is None:
        raise ConfigError("retrieval=stored: a stored run answers only the golden set's cases it holds; it "
                          "cannot be searched or served", hint="search or serve the system itself "
                          "(retrieval=external or retrieval=http)")
    return replace(load_stored_run(r.stored, dict(inputs.queries_by_case)), offsets=r.external.offsets)


def _builder(load: Callable[[BuildInputs], System]) -> Callable[[BuildInputs], ExternalRetriever]:
    def build(inputs: BuildInputs) -> ExternalRetriever:
        r = inputs.settings.retrieval
        system = load(inputs)  # import, URL and auth problems before any work
        use_cache = answer_cache(inputs.settings) and not inputs.serving and inputs.conn is not None
        e = r.external
        return ExternalRetriever(system, inputs.docs, r.variant, inputs.conn if use_cache else None, use_cache,
                                 e.max_unplaced, per_query_records=not inputs.serving,
                                 verify=(e.verify, e.verify_share, e.verify_seed))
    return build


def _describe(key: str, redact: bool = False):
    def where(get: Getter) -> str:
        value = str(get(key, None) or "?")
        return redact_text(value) if redact else value

    def describe(get: Getter, chunking: str, embedding: str) -> str:
        return f"{get('retrieval.variant', '?')} {where(get)}, {chunking}"

    def sentence(get: Getter) -> str:
        return (f"a team's own system (`retrieval={get('retrieval.variant', '?')}`: `{where(get)}`), its passages "
                "placed in the corpus and scored on the golden set")
    return describe, sentence


def _system(name: str, params: type, load: Callable[[BuildInputs], System], key: str, owns: tuple[str, ...],
            summary: str, position: int, redact: bool = False) -> SystemType:
    describe, sentence = _describe(key, redact)
    return SystemType(name=name, summary=summary, kind="team", params=params, build=_builder(load),
                      describe=describe, sentence=sentence, owns=owns, position=position,
                      needs_database=answer_cache)


#: the answer-cache keys of retrieval.external a service shares with a Python target
CACHE_KEYS = ("external.version", "external.cache", "external.verify", "external.verify_share",
              "external.verify_seed")

SYSTEMS = (
    _system("external", ExternalParams, lambda i: load_python_target(i.settings.retrieval.external),
            "retrieval.external.target", ("external",),
            "a team's Python function or class, called in-process (retrieval.external.*)", 10),
    _system("http", HttpParams,
            lambda i: load_http_target(i.settings.retrieval.http, i.settings.retrieval.external.offsets,
                                       i.settings.retrieval.external.version),
            "retrieval.http.url", ("http", "external.max_unplaced", *CACHE_KEYS),
            "a team's search service over HTTP (retrieval.http.*)", 11, redact=True),
    _system("stored", StoredParams, _load_stored, "retrieval.stored.path", ("stored", "external.max_unplaced"),
            "the ranked lists of a run file (rag-exp import-run; retrieval.stored.*)", 12),
)
