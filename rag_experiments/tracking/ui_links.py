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

from ..paths import default_tracking_uri, project_root
from ..redaction import redact_text

MODE_PARAM = "workflowType=machine_learning"
UI_ENV = "RAG_EXP_UI_URL"
LOCAL_UI = "http://127.0.0.1:5000"


#: the runs list's opening columns and order, kept where MLflow keeps a shared view of an
#: experiment: an experiment tag ``mlflow.sharedViewState.<key>`` (JSON of the search facets and
#: the table's UI state) that a URL's ``viewStateShareKey=<key>`` applies. MLflow has no default
#: column set per experiment otherwise (a user's own choice lives in the browser's storage).
VIEW_KEY = "rag-exp-headline"
VIEW_PREFIX = "mlflow.sharedViewState."
VIEW_TAG = VIEW_PREFIX + VIEW_KEY
#: the headline metrics at the default cutoffs (conf/eval: ks [5, 20], mrr_k 10, ndcg_k 10)
VIEW_METRICS = ("recall_at_5", "recall_at_20", "mrr_at_10", "ndcg_at_10")
#: the first tags of the view (MLflow's table lists attributes, then metrics alphabetically, then tags,
#: whatever the order given here): which row is the champion (``champion``: ``true`` on
#: its run, ``holds the champion: <point>`` on the sweep parent that holds it folded,
#: tracking.champion_mark.mark_champion) and the champion's value on the newest golden version,
#: rescored (tracking.champion_newest.TAG): a champion measured on an older version says so beside
#: the headline metrics, not in the last columns (issue 59)
CHAMPION_TAGS = ("champion", "on_newest_golden")
#: tags as columns after the metrics: the sweep's best point, the variant, the golden version's size
#: (every run) and, on the champion's row, the golden version its record was measured on
VIEW_TAGS = ("sweep.best", "variant", "golden_records", "measured_on")
#: the runs list's name column (MLflow's column id) and its width in the opening view, in pixels (MLflow's
#: default, 190, shows ~18 characters: "champion (olde…")
RUN_NAME_COLUMN = "attributes.`Run Name`"
RUN_NAME_WIDTH = 330


def view_state(metrics=VIEW_METRICS, order_by: str | None = None, search_filter: str | None = None) -> str:
    """The shared view's JSON: the headline metrics and which point is best as columns (MLflow
    lists them alphabetically), the runs newest first or by ``order_by`` (best first), and in the chart view (``compareRunsMode=CHART``) a
    first section "Headline metrics" with one bar chart each, in this order (MLflow's own charts
    list every metric alphabetically). MLflow shows a metric as logged (its runs table has no
    rounding option); the tool's own tables round to 3 decimals. ``search_filter``: the runs shown
    (a sweep's points: ``tags.mlflow.parentRunId = '<id>'``)."""
    cols = ([f"tags.`{t}`" for t in CHAMPION_TAGS] + [f"metrics.`{m}`" for m in metrics]
            + [f"tags.`{t}`" for t in VIEW_TAGS])
    charts = [{"deleted": False, "type": "BAR", "uuid": f"headline-{m}", "metricSectionId": "headline",
               "isGenerated": False, "metricKey": m} for m in metrics]
    # sorted by a metric MLflow lists children flat among the parents; by start time sweeps stay folded
    state = {"orderByKey": f"metrics.`{order_by}`" if order_by else "attributes.start_time", "orderByAsc": False,
             "selectedColumns": ["attributes.`Run Name`", "attributes.`Created`", *cols],
             # the name column wide enough to read a champion's notice (tracking.champion_mark; ~18 characters
             # before); MLflow applies a width only to a column named in columnOrder, which it applies too
             "columnOrder": [RUN_NAME_COLUMN, "runDateAndNestInfo", "duration", *[f"metrics.`{m}`" for m in metrics],
                             *[f"tags.`{t}`" for t in CHAMPION_TAGS + VIEW_TAGS]],
             "columnWidths": {RUN_NAME_COLUMN: RUN_NAME_WIDTH},
             "compareRunCharts": charts,
             "compareRunSections": [{"uuid": "headline", "name": "Headline metrics", "display": True,
                                     "isReordered": False, "deleted": False}]}
    if search_filter:
        state["searchFilter"] = search_filter
    return json.dumps(state, separators=(",", ":"))


def sweep_view_key(parent_id: str) -> str:
    return f"rag-exp-sweep-{parent_id}"


def sweep_charts_route(experiment_id: str, parent_id: str) -> str:
    """A sweep's points side by side in MLflow's chart view, the headline metrics first (the
    experiment tag ``mlflow.sharedViewState.rag-exp-sweep-<parent>`` the sweep sets)."""
    return with_mode(f"#/experiments/{experiment_id}/runs?viewStateShareKey={sweep_view_key(parent_id)}"
                     "&compareRunsMode=CHART")


def with_mode(route: str) -> str:
    return route + ("&" if "?" in route else "?") + MODE_PARAM


def runs_route(experiment_id: str) -> str:
    """The runs list in Model training mode, opening on the headline columns (:data:`VIEW_TAG`,
    which :func:`rag_experiments.tracking.mlflow_run.setup` sets on the experiment)."""
    return with_mode(f"#/experiments/{experiment_id}/runs?viewStateShareKey={VIEW_KEY}")


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
    # a base with user:password@ is printed masked (redact_text)
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
