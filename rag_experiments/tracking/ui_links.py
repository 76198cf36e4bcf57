"""Links into the MLflow UI that open in its "Model training" mode.

MLflow 3.17's UI keeps a GenAI / Model training switch: the URL's ``workflowType`` query
parameter when present, else the browser's last choice, else GenAI, whose menu has no model
registry and whose experiment page opens on traces. Every link the tool prints carries
``workflowType=machine_learning`` (a run, the runs table, a sweep parent, a comparison, the
registry), so a link opened in a fresh browser shows runs, not traces. A page reached by
clicking around inside the UI may fall back to GenAI: the switch at the top of the left-hand menu
("Model training") brings the runs back (docs/tutorials/demo.md says so).

Where the UI is: ``RAG_EXP_UI_URL`` when set; else the tracking server when ``MLFLOW_TRACKING_URI``
/ ``tracking.uri`` is one (``http(s)://``), since the server serves its UI; else the address
``make ui`` serves the local store at (``http://127.0.0.1:5000``, its default port).
"""

from __future__ import annotations

import json
import os
from urllib.parse import quote

MODE_PARAM = "workflowType=machine_learning"
UI_ENV = "RAG_EXP_UI_URL"
LOCAL_UI = "http://127.0.0.1:5000"


def with_mode(route: str) -> str:
    return route + ("&" if "?" in route else "?") + MODE_PARAM


def runs_route(experiment_id: str) -> str:
    return with_mode(f"#/experiments/{experiment_id}/runs")


def run_route(experiment_id: str, run_id: str, artifact: str | None = None) -> str:
    tail = f"/artifacts/{artifact}" if artifact else ""
    return with_mode(f"#/experiments/{experiment_id}/runs/{run_id}{tail}")


def compare_route(experiment_ids: list[str], run_ids: list[str]) -> str:
    runs = quote(json.dumps(list(run_ids), separators=(",", ":")))
    exps = quote(json.dumps(sorted(set(experiment_ids)), separators=(",", ":")))
    return with_mode(f"#/compare-runs?runs={runs}&experiments={exps}")


def model_route(name: str, version: str | None = None) -> str:
    base = f"#/models/{quote(name, safe='')}"
    return with_mode(base + (f"/versions/{version}" if version else ""))


def ui_base(tracking_uri: str | None = None) -> tuple[str, bool]:
    """(base URL, whether it is known) for links: known when ``RAG_EXP_UI_URL`` is set or the
    tracking store is a server; else ``make ui``'s local address (not known to be running)."""
    from ..redaction import redact_text  # a base with user:password@ is printed masked

    explicit = os.environ.get(UI_ENV, "").strip()
    if explicit:
        return redact_text(explicit).rstrip("/"), True
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI", "")
    if uri.startswith(("http://", "https://")):
        return redact_text(uri).rstrip("/"), True
    return LOCAL_UI, False


def url(route: str, tracking_uri: str | None = None) -> str:
    base, _ = ui_base(tracking_uri)
    return f"{base}/{route}"


def serve_hint(tracking_uri: str | None = None) -> str:
    """How to serve the local store's UI: ``make ui`` in this repository (its Makefile has the
    target), else the ``mlflow ui`` command itself (a project made by ``rag-exp init`` has no
    Makefile)."""
    from ..config import default_tracking_uri, project_root
    from ..redaction import redact_text

    makefile = project_root() / "Makefile"
    try:
        if makefile.is_file() and "\nui:" in "\n" + makefile.read_text(encoding="utf-8", errors="replace"):
            return "make ui"
    except OSError:
        pass
    return f"mlflow ui --backend-store-uri {redact_text(tracking_uri or os.environ.get('MLFLOW_TRACKING_URI') or default_tracking_uri())} --port {LOCAL_UI.rsplit(':', 1)[1]}"


def line(what: str, route: str, tracking_uri: str | None = None) -> str:
    """``MLflow UI, <what>: <url>``, saying how to serve it when the UI is the local one."""
    base, known = ui_base(tracking_uri)
    return f"MLflow UI, {what}: {base}/{route}" + ("" if known else f"   (serve it with `{serve_hint(tracking_uri)}`)")
