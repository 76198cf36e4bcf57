"""The MLflow UI as a user sees it: a real ``mlflow server`` on 127.0.0.1 serving a store with a
small sweep, driven by Playwright in Debian's Chromium (``apt-get install chromium``; nothing
downloads a browser build: never ``playwright install``).

Screenshots are kept in ``test-artifacts/browser/`` (git-ignored) for a person to look at.
Outside CI a missing Chromium or Playwright skips the test; in CI (``CI=true``) it fails.
"""

from __future__ import annotations

import pytest

from rag_experiments.tracking.mlflow_run import runs_view_url

from .conftest import log_small_sweep
from .test_champion_newest import champion_then_growth  # noqa: F401 - fixture
from .test_golden_versions import golden, golden_add  # noqa: F401 - fixtures
from .ui_browser import SHOTS, TIMEOUT_MS, browser, new_page, own_store, serving, sync_playwright, use_store  # noqa: F401

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def _sweep_store(tmp_path_factory, _template_db):
    root = tmp_path_factory.mktemp("ui-sweep")
    with own_store(root, _template_db) as exp_id:
        parent, children, _ = log_small_sweep(exp_id, root / "multirun")
        with serving(root) as base:
            yield root, base, parent, children, exp_id


@pytest.fixture
def sweep_ui(_sweep_store, monkeypatch):
    """The ``small_sweep`` store that the module's tests only read, and its ``mlflow server`` (started once:
    ~15 s each): (base URL, parent id, child ids, experiment id). A test that writes (promote) has its own."""
    root, *rest = _sweep_store
    use_store(monkeypatch, root)
    return tuple(rest)


@pytest.fixture
def mlflow_server(store, small_sweep):
    """``mlflow server`` on a free 127.0.0.1 port over the test's own sqlite store; its base URL."""
    with serving(store[0]) as base:
        yield base


def test_sweep_parent_and_per_case_table_in_the_mlflow_ui(new_page, sweep_ui):
    mlflow_server, parent_id, children, exp_id = sweep_ui
    best = children[1]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = new_page()

    # 1. the runs view (the URL the README gives): it opens on the headline metrics as
    # columns (the experiment's shared view, issue 48 item 3), no Columns clicks
    page.goto(runs_view_url(mlflow_server, exp_id))
    page.get_by_role("link", name="fusion.rrf_k=10,30,60").wait_for()
    # in "Model training" mode (its menu has the model registry; the GenAI menu has none)
    page.get_by_text("Model registry", exact=True).first.wait_for()
    close_assistant = page.get_by_role("button", name="Close")  # MLflow 3's side panel takes a third
    if close_assistant.count():
        close_assistant.first.click()
    for column in ("recall_at_5", "recall_at_20", "mrr_at_10", "ndcg_at_10", "sweep.best"):
        page.get_by_role("columnheader", name=column).first.wait_for()
    page.get_by_role("gridcell", name="0.875", exact=True).first.wait_for()  # the parent's best child
    page.screenshot(path=str(SHOTS / "1-runs-view.png"))
    assert page.get_by_role("link", name="fusion.rrf_k=30 progress=false").count() == 0  # folded

    # 2. the parent's Overview: the description renders the comparison as a table
    page.goto(f"{mlflow_server}/#/experiments/{exp_id}/runs/{parent_id}")
    page.get_by_text("Best", exact=False).first.wait_for()
    show_more = page.get_by_text("Show more")
    if show_more.count():
        show_more.first.click()
    table = page.locator("table").filter(has_text="W/T/L")
    table.first.wait_for()
    header = table.first.locator("th").all_inner_texts()
    assert header[:3] == ["run", "n", "recall@5"], header
    body = page.inner_text("body")
    assert "<br>" not in body and "<sub>" not in body and "[!" not in body
    assert "rrf_k=30" in table.first.inner_text()
    # the verdict table reads in one screen: no wider than its box, no cell wrapping
    box = table.first.evaluate("t => [t.scrollWidth, t.parentElement.clientWidth, "
                               "Math.max(...[...t.querySelectorAll('td')].map(c => c.getClientRects().length "
                               "&& Math.round(c.getBoundingClientRect().height)))]")
    row_h = table.first.evaluate("t => Math.round(t.querySelector('th').getBoundingClientRect().height)")
    print(f"verdict table: {box[0]} px wide in a {box[1]} px box, tallest cell {box[2]} px (header {row_h} px)")
    assert box[0] <= box[1] and box[2] <= 1.5 * row_h, (box, row_h)
    page.screenshot(path=str(SHOTS / "2-parent-overview.png"), full_page=True)

    # 3. a child's per-case table (per_case.json, logged with log_table) renders as a table
    page.goto(f"{mlflow_server}/#/experiments/{exp_id}/runs/{best}/artifacts/per_case.json")
    page.get_by_text("first_relevant_rank").first.wait_for()
    page.get_by_text("c-0000").first.wait_for()
    page.screenshot(path=str(SHOTS / "3-child-per-case.png"))


def _printed_url(text: str, what: str) -> str:
    line = next(ln for ln in text.splitlines() if ln.startswith(f"MLflow UI, {what}: "))
    return line.split(": ", 1)[1].split()[0]


def _sidebar_mode(browser, url: str, wait_for: str) -> bool:
    """Open ``url`` in a fresh browser profile (no remembered GenAI / Model training choice) and
    say whether the left-hand menu is the Model training one (it lists the model registry)."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        page.get_by_text(wait_for, exact=False).first.wait_for()
        page.wait_for_timeout(1500)  # the menu settles after the page's data
        mode = page.get_by_text("Model registry", exact=True).count() > 0
        page.screenshot(path=str(SHOTS / f"mode-{'ml' if mode else 'genai'}.png"))
        return mode
    finally:
        context.close()


def test_links_the_tool_prints_open_in_model_training_mode(browser, mlflow_server, small_sweep, monkeypatch, capsys):
    """The run link a run prints and the registry link promote prints, each opened in a fresh
    browser profile, land in Model training mode; the same run page without the mode parameter
    lands in GenAI mode (so the check can fail)."""
    from rag_experiments.report import run_link_line

    from .conftest import cli

    parent_id, children, exp_id = small_sweep
    monkeypatch.setenv("RAG_EXP_UI_URL", mlflow_server)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)  # promote registers through the server
    run_url = _printed_url(run_link_line(children[1]), "this run")
    assert cli("promote", "--sweep", parent_id) == 0
    registry_url = _printed_url(capsys.readouterr().out, "the champion in the registry")
    assert registry_url.endswith("#/models/rag-retriever-default/versions/1?workflowType=machine_learning")
    assert _sidebar_mode(browser, run_url, "fusion.rrf_k=30")
    bare = run_url.split("?", 1)[0]
    assert not _sidebar_mode(browser, bare, "fusion.rrf_k=30")  # what the parameter changes
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(registry_url)
        page.get_by_text("heading-200", exact=False).first.wait_for()  # the version explains itself
        page.get_by_text("Model registry", exact=True).first.wait_for()
        page.screenshot(path=str(SHOTS / "4-champion-version.png"), full_page=True)
    finally:
        context.close()


def test_the_sweeps_chart_link_opens_its_points_with_the_headline_metrics_first(new_page, sweep_ui):
    """The link a sweep prints for its points side by side (MLflow's chart view, reached through
    the experiment's shared view the sweep records): only its points, the section "Headline
    metrics" first with recall_at_5 (the objective) as its first chart; MLflow's own charts list
    every metric alphabetically (hit_at_20 first), issue 48 item 3."""
    from mlflow.tracking import MlflowClient

    from rag_experiments.tracking.ui_links import VIEW_PREFIX, sweep_charts_route, sweep_view_key

    mlflow_server, parent_id, children, exp_id = sweep_ui
    assert VIEW_PREFIX + sweep_view_key(parent_id) in MlflowClient().get_experiment(exp_id).tags
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = new_page()
    page.goto(f"{mlflow_server}/{sweep_charts_route(exp_id, parent_id)}")
    page.get_by_text("Headline metrics", exact=True).first.wait_for()
    page.get_by_text("Model registry", exact=True).first.wait_for()  # Model training mode
    page.wait_for_timeout(1500)  # the charts draw after the runs arrive
    page.screenshot(path=str(SHOTS / "5-sweep-charts.png"))
    body = page.inner_text("body")
    headline_at = body.index("Headline metrics")
    found = [(body.find(m, headline_at), m) for m in
             ("recall_at_5", "recall_at_20", "mrr_at_10", "ndcg_at_10", "hit_at_5", "hit_at_20")]
    first_chart = min(f for f in found if f[0] >= 0)
    assert first_chart[1] == "recall_at_5", body[headline_at:headline_at + 300]
    assert "fusion.rrf_k=10,30,60" not in body  # the points only, not the parent


def test_the_best_point_is_marked_in_the_runs_list(new_page, sweep_ui):
    """The sweep's own runs list (its shared view sorted by the objective): the best point first,
    its sweep.best column saying true; the other points say nothing there."""
    mlflow_server, parent_id, children, exp_id = sweep_ui
    from rag_experiments.tracking.ui_links import sweep_charts_route

    url = f"{mlflow_server}/{sweep_charts_route(exp_id, parent_id).replace('&compareRunsMode=CHART', '')}"
    page = new_page()
    page.goto(url)
    page.get_by_role("columnheader", name="sweep.best").first.wait_for()
    page.get_by_role("gridcell", name="true", exact=True).first.wait_for()
    # the grid draws its pinned name column apart from the rest: the names in order, then the mark
    names = [r for r in page.get_by_role("row").all_inner_texts() if "fusion.rrf_k=" in r]
    assert len(names) == 3 and "fusion.rrf_k=30 " in names[0], names  # the best first
    assert page.get_by_role("gridcell", name="true", exact=True).count() == 1  # one point marked
    page.screenshot(path=str(SHOTS / "6-best-point-marked.png"))


def test_every_path_into_the_experiment_after_one_click_stays_in_model_training(new_page, sweep_ui):
    """MLflow keeps GenAI / Model training in the browser's storage (a URL's workflowType holds it
    for that page only; no experiment tag sets it). The experiment itself opens on its runs in
    either mode (tag mlflow.experimentKind). One click on Model training, as docs/tutorials/demo.md
    says, holds it for Home -> experiment and for the model registry (issue 48 item 4)."""
    mlflow_server, parent_id, children, exp_id = sweep_ui
    page = new_page()
    # a fresh profile, MLflow Home, then the experiment by name
    page.goto(f"{mlflow_server}/#/")
    page.get_by_role("link", name="rag-experiments").first.click()
    page.wait_for_timeout(3000)
    page.screenshot(path=str(SHOTS / "7-home-to-experiment-fresh.png"))
    # without the click MLflow falls back to GenAI here: no tag or Home link holds the mode
    assert page.get_by_text("Model registry", exact=True).count() == 0
    # the one click the docs name (past GenAI's first-visit popover)
    got_it = page.get_by_role("button", name="Got it")
    if got_it.count():
        got_it.first.click()
    page.keyboard.press("Escape")
    page.get_by_text("Model training", exact=True).first.click(force=True)
    page.get_by_text("Model registry", exact=True).first.wait_for()
    for route in ("#/", "#/models", f"#/experiments/{exp_id}/runs/{children[1]}"):
        page.goto(f"{mlflow_server}/{route}")
        page.wait_for_timeout(1500)
        assert page.get_by_text("Model registry", exact=True).count() > 0, route
    page.goto(f"{mlflow_server}/#/experiments")  # where Home leads in Model training mode
    page.get_by_role("cell", name="rag-experiments").get_by_role("link").click()
    page.get_by_role("link", name="fusion.rrf_k=10,30,60").wait_for()  # its runs
    page.screenshot(path=str(SHOTS / "8-home-to-experiment-after-click.png"))
    assert page.get_by_text("Model registry", exact=True).count() > 0
    assert page.get_by_text("Traces", exact=True).count() <= 1 and page.get_by_text("Judges").count() == 0


def test_the_champions_row_shows_its_value_on_the_newest_golden_version(new_page, store, champion_then_growth):
    """Issue 48 item 1: after the golden set grew, the champion's row in the runs list's opening view
    says its value of record's version (golden_records) and its value rescored on the newest version
    (on_newest_golden), no Columns clicks."""
    from mlflow.tracking import MlflowClient

    from rag_experiments.serving.model_logging import ensure_registered

    from rag_experiments.tracking.mlflow_run import EXPERIMENT_TAGS

    path, exp_id, champ, records = champion_then_growth
    for k, v in EXPERIMENT_TAGS.items():  # what a run logged by run.py sets on its experiment
        MlflowClient().set_experiment_tag(exp_id, k, v)
    ensure_registered("default")
    with serving(store[0]) as base:
        page = new_page(2200, 700)  # the tag columns in view
        page.goto(runs_view_url(base, exp_id))
        page.get_by_role("link", name="champion").first.wait_for()
        close_assistant = page.get_by_role("button", name="Close")  # MLflow 3's side panel
        if close_assistant.count():
            close_assistant.first.click()
        page.get_by_role("columnheader", name="on_newest_golden").first.wait_for()
        page.get_by_text("0.9500 = recall@5 on golden", exact=False).first.wait_for()
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "9-champion-row-on-newest-golden.png"))
