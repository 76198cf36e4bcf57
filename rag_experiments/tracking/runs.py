"""Find logged runs and read them back: ids, sweep children, tags, the latest sweep.

A :class:`RunView` is a plain value (id, name, status, tags, metrics, params and the per-case
table read from the ``per_case.json`` artifact) so that comparison, promotion and the gate work
on data, not on MLflow objects. The store is the one every run logs to:
:func:`rag_experiments.paths.tracking_uri` ($MLFLOW_TRACKING_URI wins).

Searches span every active experiment of the store: a sweep's children are found by their
``mlflow.parentRunId`` tag wherever they were logged.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import orjson
import pandas as pd

from ..errors import UserError
from ..paths import tracking_uri
from .ownership import KILLED_REASON, reap_dead_runs
from .server import open_store

PER_CASE_ARTIFACT = "per_case.json"
CONFIG_ARTIFACT = "config.yaml"
PARENT_TAG = "mlflow.parentRunId"
_RUN_ID = re.compile(r"^[0-9a-fA-F]{32}$")
_TAG_KEY = re.compile(r"^[A-Za-z0-9_.\-/ ]+$")


#: the one tag name for a run's corpus digest (every run, the champion of record's stand-in too)
TAG_CORPUS = "corpus_digest"


@dataclass(frozen=True, eq=False)
class RunView:
    """One logged run, read back. ``per_case`` is None when the run logged no per-case table."""

    id: str
    name: str
    status: str
    experiment_id: str
    start_time: int
    tags: dict[str, str]
    metrics: dict[str, float]
    params: dict[str, str]
    artifact_uri: str = ""
    per_case: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return self.name or self.tags.get("variant") or self.id[:8]

    @property
    def golden(self) -> str | None:
        return self.tags.get("golden_sha256")

    @property
    def corpus(self) -> str | None:
        """The corpus digest, read here only (tag ``corpus_digest``; stand-ins of the champion of
        record logged before issue 33 carried it as ``record.corpus_digest``)."""
        return self.tags.get(TAG_CORPUS) or self.tags.get(f"record.{TAG_CORPUS}")

    @property
    def parent_id(self) -> str | None:
        return self.tags.get(PARENT_TAG)

    @property
    def is_sweep_parent(self) -> bool:
        return self.tags.get("sweep") == "parent"

    def metric(self, name: str) -> float | None:
        return self.metrics.get(name)

    def interval(self, name: str) -> tuple[float, float] | None:
        lo, hi = self.metrics.get(f"{name}.ci_low"), self.metrics.get(f"{name}.ci_high")
        return None if lo is None or hi is None else (lo, hi)


def client():
    """An MlflowClient on the project's store (tracking_uri(): $MLFLOW_TRACKING_URI wins)."""
    import mlflow
    from mlflow.tracking import MlflowClient

    # reading two small JSON files per run needs no progress bar on stderr
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

    uri = tracking_uri()
    open_store(uri)  # a store refusing the password is one line; a fresh store is created under a lock
    mlflow.set_tracking_uri(uri)
    c = MlflowClient(tracking_uri=uri)
    reap_dead_runs(c, uri)  # every command that reads runs first closes those whose process died
    return c


def experiment_ids(c=None, name: str | None = None) -> list[str]:
    c = c or client()
    if name:
        exp = c.get_experiment_by_name(name)
        if exp is None:
            raise UserError(f"MLflow experiment {name!r} not found in {tracking_uri()}")
        return [exp.experiment_id]
    return [e.experiment_id for e in c.search_experiments()]


def _quote(value: str) -> str:
    if "'" in value and '"' in value:
        raise UserError(f"tag value {value!r}: cannot contain both quote characters")
    return f'"{value}"' if "'" in value else f"'{value}'"


def tag_filter(key: str, value: str) -> str:
    if not _TAG_KEY.match(key):
        raise UserError(f"tag key {key!r}: use letters, digits, '_', '-', '.', '/' only")
    return f"tags.`{key}` = {_quote(value)}"


def check_run_id(run_id: str) -> str:
    run_id = run_id.strip()
    if not _RUN_ID.match(run_id):
        raise UserError(f"{run_id!r} is not an MLflow run id (32 hex characters)")
    return run_id.lower()


def _loads(text: str | bytes):
    """orjson (a sweep summary parses a hundred ~460 KB tables: 1.8 vs 6.4 ms each); the json
    module for what orjson refuses and json reads (NaN / Infinity tokens, integers above 64 bits)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def parse_per_case(payload: dict | str | bytes) -> pd.DataFrame:
    """The per-case table from ``mlflow.log_table``'s JSON (``{"columns": [...], "data": [...]}``)."""
    data = _loads(payload) if isinstance(payload, (str, bytes)) else payload
    if not isinstance(data, dict) or "columns" not in data or "data" not in data:
        raise ValueError("not a table written by mlflow.log_table (expected 'columns' and 'data')")
    return pd.DataFrame(data["data"], columns=data["columns"])


def local_artifact_dir(artifact_uri: str) -> Path | None:
    """The folder of a run's artifacts when they are on this machine (``file://...`` or the plain
    path MLflow records when the tracking URI names a database but no artifact root)."""
    if artifact_uri.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return Path(unquote(urlparse(artifact_uri).path))
    if artifact_uri.startswith("/"):
        return Path(artifact_uri)
    return None


def artifact_bytes(run_id: str, name: str, c=None, artifact_uri: str = "") -> bytes | None:
    """A run's artifact ``name``, or None when it logged none. A local store's file is read in
    place (a sweep summary reads a hundred of them; MLflow's download copies each first)."""
    local = local_artifact_dir(artifact_uri)
    if local is not None and (local / name).is_file():
        return (local / name).read_bytes()
    c = c or client()
    if name not in {f.path for f in c.list_artifacts(run_id)}:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        return Path(c.download_artifacts(run_id, name, tmp)).read_bytes()


def artifact_json(run_id: str, name: str, c=None, artifact_uri: str = "") -> Any:
    """A run's JSON artifact ``name`` parsed, or None when it logged none or it cannot be read
    (the optional extras compare shows: judge-corrected, sampled labels; a missing one is no error)."""
    try:
        data = artifact_bytes(run_id, name, c, artifact_uri)
        return None if data is None else json.loads(data)
    except (OSError, ValueError):
        return None


def load_per_case(run_id: str, c=None, artifact_uri: str = "") -> pd.DataFrame | None:
    """The run's per-case table, or None when it logged none (:func:`artifact_bytes`)."""
    data = artifact_bytes(run_id, PER_CASE_ARTIFACT, c, artifact_uri)
    return None if data is None else parse_per_case(data)


def load_config_text(run_id: str, c=None) -> str:
    """The run's resolved config (``config.yaml`` artifact) as text."""
    c = c or client()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return Path(c.download_artifacts(run_id, CONFIG_ARTIFACT, tmp)).read_text()
    except Exception as exc:  # noqa: BLE001 - MLflow raises several types for a missing file
        raise UserError(f"run {run_id} has no {CONFIG_ARTIFACT} artifact ({exc})") from exc


def view(run: Any, c=None, per_case: bool = True) -> RunView:
    """A RunView from an ``mlflow.entities.Run``."""
    info, data = run.info, run.data
    return RunView(
        id=info.run_id, name=info.run_name or data.tags.get("mlflow.runName", ""), status=info.status,
        experiment_id=info.experiment_id, start_time=int(info.start_time or 0),
        tags=dict(data.tags), metrics=dict(data.metrics), params=dict(data.params),
        artifact_uri=info.artifact_uri or "",
        per_case=load_per_case(info.run_id, c, info.artifact_uri or "") if per_case else None,
    )


def get_run(run_id: str, per_case: bool = True, c=None) -> RunView:
    from mlflow.exceptions import MlflowException

    c = c or client()
    run_id = check_run_id(run_id)
    try:
        run = c.get_run(run_id)
    except MlflowException as exc:
        raise UserError(f"run {run_id} not found in {tracking_uri()}",
                        hint="is MLFLOW_TRACKING_URI (or RAG_EXP_HOME) pointing at the right store?") from exc
    return view(run, c, per_case)


def search(filter_string: str = "", per_case: bool = True, order: str = "ASC", max_results: int = 5000,
           c=None, experiment: str | None = None) -> list[RunView]:
    """Runs of every experiment (or of ``experiment``) matching an MLflow filter, by start time."""
    c = c or client()
    runs = c.search_runs(experiment_ids(c, experiment), filter_string=filter_string, max_results=max_results,
                         order_by=[f"attributes.start_time {order}"])
    return [view(r, c, per_case) for r in runs]


def runs_by_ids(ids: Iterable[str], per_case: bool = True, c=None) -> list[RunView]:
    c = c or client()
    out = []
    for i in ids:
        run = get_run(i, per_case, c)
        if run.is_sweep_parent:
            raise UserError(f"run {run.id} ({run.name}) is a sweep parent, not an experiment run",
                            hint=f"compare its children with --sweep {run.id}")
        out.append(run)
    return out


#: the most run ids :func:`sweep_children` puts in one ``NOT IN`` filter (1,000 parse in ~0.06 s;
#: sqlparse stops at 10,000 tokens, a few thousand ids); more, and every child is searched
KNOWN_IN_FILTER_MAX = 1000


def sweep_children(parent_id: str, per_case: bool = True, c=None, known: Iterable[RunView] = ()) -> list[RunView]:
    """The child runs of a sweep parent, in the order they started (MLflow's own order: start
    time, then run id).

    ``known``: children already read, returned as given (FINISHED ones: nothing rewrites a finished
    sweep point); only the others are searched: the sweep summary reads most children while the sweep runs
    (:mod:`.sweep_prefetch`), and a search loading 100 runs' metrics, params and tags took ~0.7 s.
    """
    found = tag_filter(PARENT_TAG, check_run_id(parent_id))
    known = {r.id: r for r in known}
    if len(known) > KNOWN_IN_FILTER_MAX:
        known = {}  # MLflow's filter parser (sqlparse) refuses a list of a few thousand ids
    if known:
        found += " AND attributes.run_id NOT IN (" + ", ".join(_quote(i) for i in sorted(known)) + ")"
    runs = search(found, per_case=per_case, c=c)
    if not known:
        return runs
    return sorted([*known.values(), *runs], key=lambda r: (r.start_time, r.id))


def runs_by_tag(spec: str, per_case: bool = True, c=None) -> list[RunView]:
    """Runs whose tag ``key`` equals ``value`` (``spec`` = ``key=value``), oldest first."""
    key, sep, value = spec.partition("=")
    if not sep or not key.strip():
        raise UserError(f"--tag {spec!r}: expected KEY=VALUE, e.g. --tag variant=hybrid")
    return search(tag_filter(key.strip(), value.strip()), per_case=per_case, c=c)


def last_sweep_parent(c=None) -> RunView:
    """The most recently started run tagged ``sweep=parent`` that was not KILLED.

    A KILLED sweep (its process died: see :mod:`.ownership`) is skipped, and the skip is said on
    stderr: its children are an unknown subset of the points asked for.
    """
    found = search(tag_filter("sweep", "parent"), per_case=False, order="DESC", max_results=50, c=c)
    for run in found:
        if run.status != "KILLED":
            return run
        why = run.tags.get(KILLED_REASON, "its process died")
        print(f"note: skipping sweep {run.id} ({run.name}): KILLED ({why})", file=sys.stderr)
    if found:
        raise UserError(f"the last {len(found)} sweep(s) in {tracking_uri()} were KILLED",
                        hint="rerun the sweep, or name one with --sweep RUN_ID")
    raise UserError(f"no sweep parent run (tag sweep=parent) in {tracking_uri()}",
                    hint="run a sweep first: python run.py -m retrieval=vector,hybrid")


def select_runs(run_ids: list[str] | None = None, sweep: str | None = None, last_sweep: bool = False,
                tag: str | None = None, per_case: bool = True, c=None) -> tuple[list[RunView], RunView | None]:
    """Resolve a command line's run selection to runs (and the sweep parent, if one was named).

    Exactly one source besides explicit ids may be given; explicit ids come first, in the order
    given, followed by the runs of the sweep or tag (oldest first). Sweep parents themselves are
    never part of the result.
    """
    c = c or client()
    if sum(bool(x) for x in (sweep, last_sweep, tag)) > 1:
        raise UserError("give at most one of --sweep, --last-sweep and --tag")
    runs = runs_by_ids(run_ids or [], per_case, c)
    parent: RunView | None = None
    if sweep:
        parent = get_run(sweep, per_case=False, c=c)
        if parent.status == "KILLED":
            print(f"warning: sweep {parent.id} ({parent.name}) was KILLED "
                  f"({parent.tags.get(KILLED_REASON, 'its process died')}); its children are those that "
                  "finished before", file=sys.stderr)
    elif last_sweep:
        parent = last_sweep_parent(c)
    if parent is not None:
        children = sweep_children(parent.id, per_case, c)
        if not children:
            raise UserError(f"sweep {parent.id} ({parent.name}) has no child runs",
                            hint="its children may still be running, or were logged to another store")
        runs += children
    if tag:
        found = [r for r in runs_by_tag(tag, per_case, c) if not r.is_sweep_parent]
        if not found:
            raise UserError(f"no run has the tag {tag}")
        runs += found
    seen: set[str] = set()
    unique = []
    explicit = set(run_ids or [])
    for r in runs:
        if r.id not in seen and not r.is_sweep_parent:
            seen.add(r.id)
            if r.status == "KILLED":
                # its process died while logging: metrics and per-case table may be partial
                why = r.tags.get(KILLED_REASON, "its process died")
                if r.id in explicit or any(i.lower() == r.id for i in explicit):
                    print(f"warning: run {r.id} ({r.label}) was KILLED ({why}); its numbers may be partial",
                          file=sys.stderr)
                else:
                    print(f"note: skipping run {r.id} ({r.label}): KILLED ({why})", file=sys.stderr)
                    continue
            unique.append(r)
    return unique, parent
