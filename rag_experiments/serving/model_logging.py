"""Log the champion as an MLflow pyfunc model and register it as ``rag-retriever-<name>@champion``.

* :func:`register_champion` (called by ``rag-exp promote``): logs :class:`RetrieverModel` into the
  winning run (an MLflow 3 LoggedModel linked to it, carrying the run's params and metrics), with
  the resolved config and a manifest (corpus and golden digests it was measured on, package
  version, git commit) as artifacts, a signature and an input example; registers it and moves
  the alias.
* :func:`sync_with_record`: the committed ``experiments/promoted/<name>.record.json`` is the
  champion of record. When the registry does not mirror it (a fresh clone, a new store, or a
  record that changed under git), the record's config is logged as a model in a run named
  ``champion of record: ...`` and registered, so promote, gate, ``experiment=promoted`` and
  ``models:/rag-retriever-<name>@champion`` all mean the same retriever.
* :func:`champion_model`: the champion's config and manifest, for ``Retriever.from_champion``.
"""

from __future__ import annotations

import json
import logging
import tempfile
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from ..errors import UserError
from ..file_lock import file_lock
from ..evaluation.metric_key import MEASURES, MetricKey
from ..tracking.champion_mark import champion_tags
from ..tracking.ui_links import run_route

MODEL_ARTIFACT = "retriever"
RECORD_SOURCE = "record"


def package_version() -> str:
    try:
        from importlib.metadata import version

        return version("rag-experiments")
    except Exception:  # noqa: BLE001 - running from a checkout that is not installed
        from .. import __version__

        return __version__


def model_config(config: dict) -> dict:
    """The resolved config minus where/how it was logged: the model connects to DATABASE_URL
    (or the embedded default) wherever it is loaded, and never carries a database password."""
    from ..tracking.champion import preset_config

    return preset_config(config)


def manifest(config: dict, tags: dict[str, str], *, name: str, run_id: str, run_name: str, metric: str,
             metrics: dict[str, float], forced: bool, source: str) -> dict:
    import mlflow

    from ..tracking.champion import model_name
    from ..tracking.configured import headline_names

    keys = dict.fromkeys([metric, *headline_names(metrics), f"{metric}.exact"])
    return {
        "model": model_name(name), "name": name, "source": source, "run_id": run_id, "run_name": run_name,
        "golden_sha256": tags.get("golden_sha256", ""), "corpus_digest": tags.get("corpus_digest", ""),
        "golden_set": tags.get("golden_set", ""), "embedding_model": tags.get("embedding_model", ""),
        "strategy": tags.get("strategy", ""), "variant": (config.get("retrieval") or {}).get("variant", ""),
        "primary_metric": metric, "metrics": {k: metrics[k] for k in keys if k in metrics},
        "forced": forced, "package": "rag-experiments", "package_version": package_version(),
        "git_commit": tags.get("git_commit", ""), "mlflow_version": mlflow.__version__,
        "logged_at": datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
    }


@contextmanager
def _without_serving_input_validation():
    """MLflow 3.17's ``Model.log`` validates the input example by loading the model and calling
    ``predict`` on it, and only warns when that fails. For a retriever that means opening the
    database (or starting an embedded server) on whatever machine runs ``promote``, before the
    model is even registered. The example is exercised by the serving test instead."""
    import mlflow.models.utils as model_utils

    original = model_utils._validate_serving_input
    model_utils._validate_serving_input = lambda model_uri, serving_input: None
    try:
        yield
    finally:
        model_utils._validate_serving_input = original


def _model_kwargs(tmp: str, config: dict, info: dict) -> dict:
    """What log_model and save_model share: the model object, its two artifacts (written into
    ``tmp``), the signature, the input example and the requirements."""
    import mlflow

    from .hits import ARTIFACT_CONFIG, ARTIFACT_MANIFEST, input_example, signature

    cfg_path = Path(tmp) / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
    man_path = Path(tmp) / "manifest.json"
    man_path.write_text(json.dumps(info, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return dict(python_model=str(Path(__file__).with_name("model_code.py")),  # "models from code"
                artifacts={ARTIFACT_CONFIG: str(cfg_path), ARTIFACT_MANIFEST: str(man_path)},
                signature=signature(), input_example=input_example(),
                # explicit, so MLflow does not load the model in a subprocess to infer them
                pip_requirements=[f"mlflow=={mlflow.__version__}", f"rag-experiments=={info['package_version']}"])


@contextmanager
def _quiet_mlflow():
    """MLflow's "Validating input example against model signature" INFO line kept from the
    user's terminal: promote's own lines say what was logged."""
    logger = logging.getLogger("mlflow.pyfunc")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def log_model(config: dict, info: dict):
    """Log :class:`RetrieverModel` into the active run; return MLflow's ModelInfo."""
    import mlflow

    tags = {k: str(info[k]) for k in ("golden_sha256", "corpus_digest", "primary_metric", "package_version",
                                      "source", "strategy") if info.get(k)}
    with tempfile.TemporaryDirectory() as tmp, _without_serving_input_validation(), _quiet_mlflow():
        return mlflow.pyfunc.log_model(name=MODEL_ARTIFACT, model_type="retriever", tags=tags,
                                       **_model_kwargs(tmp, config, info))


def save_model(path: str | Path, config: dict, info: dict) -> None:
    """The same model in a local folder, outside any store (the benchmark serves it from there)."""
    import mlflow

    with tempfile.TemporaryDirectory() as tmp, _quiet_mlflow():
        mlflow.pyfunc.save_model(str(path), **_model_kwargs(tmp, config, info))


def _register(model_info, name: str, tags: dict[str, str], description: str, c) -> str:
    from mlflow.exceptions import MlflowException

    from ..tracking.champion import ALIAS, model_name

    model = model_name(name)
    try:
        c.get_registered_model(model)
    except MlflowException:
        c.create_registered_model(model, description=(
            "Retrievers promoted by `rag-exp promote` (pyfunc: predict(['query'], params={'k': 10}) returns "
            "ranked hits). Alias 'champion' is the current champion; experiments/promoted/ holds its record."))
    mv = c.create_model_version(model, source=model_info.model_uri, run_id=model_info.run_id, tags=tags,
                                description=description, model_id=model_info.model_id)
    c.set_registered_model_alias(model, ALIAS, mv.version)
    return str(mv.version)


def register_champion(run, name: str, metric: str, forced: bool, config_text: str, c) -> str:
    """Log the winning run's retriever as a model (inside that run) and make it the champion."""
    import mlflow

    config = model_config(yaml.safe_load(config_text) or {})
    info = manifest(config, run.tags, name=name, run_id=run.id, run_name=run.name, metric=metric,
                    metrics=run.metrics, forced=forced, source="run")
    mlflow.set_tracking_uri(c.tracking_uri)
    with mlflow.start_run(run_id=run.id):
        model_info = log_model(config, info)
    tags = {"primary_metric": metric, "golden_sha256": run.golden or "", "corpus_digest": run.corpus or "",
            metric: f"{run.metrics.get(metric, float('nan')):.6f}", "forced": str(forced).lower(),
            "package_version": info["package_version"]}
    full = yaml.safe_load(config_text) or {}
    return _register(model_info, name, tags, version_description(full, run, metric, c), c)


def version_description(config: dict, run, metric: str, c, stand_in_id: str | None = None) -> str:
    """The registered version's description: what the retriever is, what it was measured on,
    its objective with interval, and a link to the run that measured it only where that run is in
    this store (a record promoted elsewhere names a run a fresh store does not have)."""
    from mlflow.exceptions import MlflowException

    from ..tracking.retriever_summary import long

    try:
        found = c.get_run(run.id)
        link = None if found.info.lifecycle_stage == "deleted" else run_route(found.info.experiment_id, run.id)
    except MlflowException:
        link = None
    text = long(config, run.tags, metric, run.metrics, link, run.id)
    if stand_in_id is not None:
        text += (f"\n- this version was registered from the committed record (experiments/promoted/); "
                 f"the model is logged in the stand-in run {stand_in_id}")
    return text


def lean_metrics(metrics: dict[str, float], metric: str) -> dict[str, float]:
    """What a run logs (:func:`rag_experiments.tracking.run_record.run_metrics`): the quality
    measures overall and per segment, n_cases and latency, and the objective's interval; not
    every segment's interval a record made before the lean list may hold."""
    from ..tracking.run_record import RESULT_EXTRAS

    out = {}
    for k, v in metrics.items():
        if not isinstance(v, (int, float)):
            continue
        if k in (f"{metric}.ci_low", f"{metric}.ci_high") or k in RESULT_EXTRAS:
            out[k] = float(v)
            continue
        if k.endswith((".ci_low", ".ci_high")):
            continue
        try:
            key = MetricKey.parse(k)
        except ValueError:
            continue
        if key.metric in MEASURES and key.k is not None:
            out[k] = float(v)
    return out


# -- the champion of record -----------------------------------------------------------------------
def _mirrors(mv, record_run_id: str) -> bool:
    """The registry version stands for the record's run and is a loadable model (versions made
    before promote logged models point at a bare config.yaml)."""
    if mv is None or (mv.source or "").endswith("config.yaml"):
        return False
    return ((mv.tags or {}).get("record_run_id") or mv.run_id) == record_run_id


def champion_version(name: str, c):
    from mlflow.exceptions import MlflowException

    from ..tracking.champion import ALIAS, model_name

    try:
        return c.get_model_version_by_alias(model_name(name), ALIAS)
    except MlflowException:
        return None


def sync_with_record(name: str, c) -> str | None:
    """Make ``@champion`` the committed record's retriever when it is not already; return the
    registry version (None when there is no record)."""
    from ..tracking.champion import read_record

    record = read_record(name)
    if record is None:
        return None
    mv = champion_version(name, c)
    if _mirrors(mv, record.run.id):
        return str(mv.version)
    return register_record(name, record, c)


def champion_lock(name: str):
    """The lock of champion ``name``'s promotions and registrations: two ``promote`` at once both
    reported "first champion" and registered versions 1 and 2, the second replacing the first
    without a comparison, and two first runs each registered the record (issue 55). The second
    now waits, saying so, then decides against (or finds) what the first left."""
    from ..tracking.champion import model_name, record_path

    model_name(name)  # validate before it names a file
    return file_lock(record_path(name, for_writing=True).with_name(f".{name}.promote.lock"),
                     waiting_for=f"another command promoting or registering champion {name!r}")


def ensure_registered(name: str = "default") -> str | None:
    """After a single run (``python run.py``, what ``make run`` runs): the registry mirrors the
    committed champion record, so ``mlflow.pyfunc.load_model("models:/rag-retriever-default@champion")``
    and ``mlflow models serve`` work in a fresh store without another command first; the champion's
    row then says its value on the newest golden version (tracking.champion_newest.refresh_ui). A no-op
    (registry look-ups, one hash of the golden file) once both hold; None when there is no record."""
    from ..tracking.champion import record_path
    from ..tracking.runs import client

    if not record_path(name).exists():
        return None
    with champion_lock(name):  # two first runs: one registers, the other finds it registered
        version = sync_with_record(name, client())
    from ..tracking.champion_newest import refresh_ui

    refresh_ui(name)  # its row in the runs list: its value on the newest golden version, when the set grew
    return version


def register_record(name: str, record, c) -> str:
    import mlflow

    from ..tracking.champion import model_name, promoted_file
    from ..tracking.mlflow_run import flatten, setup
    from ..tracking.runs import TAG_CORPUS

    path = promoted_file(name, ".yaml")
    if not path.exists():
        raise UserError(f"{path} is missing next to {path.with_suffix('.record.json').name}",
                        hint="restore it from git (both files are written by rag-exp promote)")
    full = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    config = model_config(full)
    run = record.run
    metric = record.metric or "recall_at_5"
    forced = str(run.tags.get("promoted_forced", "false")).lower() == "true"
    info = manifest(config, run.tags, name=name, run_id=run.id, run_name=run.name, metric=metric,
                    metrics=run.metrics, forced=forced, source=RECORD_SOURCE)
    experiment = ((full.get("tracking") or {}).get("experiment")) or "rag-experiments"
    exp_id = setup(None, experiment)
    # no golden_sha256 tag: this run is a stand-in for the model, never a promotion candidate
    tags = {"champion_source": RECORD_SOURCE, "record_run_id": run.id, **champion_tags(model_name(name)),
            "record.golden_sha256": run.golden or "",
            TAG_CORPUS: run.corpus or "",  # the one corpus tag name: history chains through it
            # a column of the runs list: its metrics are the record's, measured on this golden version
            # (another version's runs score other cases; compare pairs them on the shared ones)
            "measured_on": f"golden {str(run.golden or '?')[:12]}"
                           + (f", {run.tags['golden_records']} records" if run.tags.get("golden_records") else "")}
    from ..tracking.retriever_summary import short

    # named for the retriever it is; the record's run name carries Hydra's overrides (progress=False)
    with mlflow.start_run(experiment_id=exp_id, run_name=f"champion: {short(full, run.tags)}"[:250],
                          tags=tags) as stand_in:
        mlflow.log_params(flatten(config))
        mlflow.log_metrics(lean_metrics(run.metrics, metric))
        model_info = log_model(config, info)
    vtags = {"primary_metric": metric, "golden_sha256": run.golden or "", "corpus_digest": run.corpus or "",
             "forced": str(forced).lower(), "package_version": info["package_version"],
             "champion_source": RECORD_SOURCE, "record_run_id": run.id}
    if metric in run.metrics:
        vtags[metric] = f"{run.metrics[metric]:.6f}"
    return _register(model_info, name, vtags, version_description(full, run, metric, c, stand_in.info.run_id), c)


def champion_model(name: str = "default", c=None) -> tuple[dict, dict[str, Any]]:
    """(config, manifest) of ``rag-retriever-<name>@champion``, re-populated from the record first."""
    import mlflow
    from mlflow.exceptions import MlflowException

    from ..tracking.champion import ALIAS, model_name, record_path
    from ..tracking.runs import client

    c = c or client()
    sync_with_record(name, c)
    mv = champion_version(name, c)
    if mv is None:
        raise UserError(f"no champion: {model_name(name)} has no alias '{ALIAS}' and {record_path(name)} does not exist",
                        hint="promote a run first: rag-exp promote --metric recall_at_5")
    uri = f"models:/{model_name(name)}@{ALIAS}"
    try:
        model = mlflow.pyfunc.load_model(uri).unwrap_python_model()
    except MlflowException as exc:
        raise UserError(f"{uri} (version {mv.version}) cannot be loaded as a retriever model: "
                        f"{str(exc).splitlines()[0]}", hint="promote again: rag-exp promote") from None
    return model.config, {**model.manifest, "version": str(mv.version)}
