"""Issue 59 in the MLflow UI as a user sees it: one ``mlflow server`` for the module over a store
with two runs that ``rag-exp compare`` paired (so the candidate carries its case explorer), driven
by Playwright in Debian's Chromium (never ``playwright install``).

* the case explorer renders inside MLflow's artifact view (an ``<iframe sandbox="allow-scripts">``
  on a blob URL), lost case first, its filters and pages work;
* a page whose question and passage carry ``<script>`` / ``</script>`` runs none of it;
* the runs-list URL docs/tutorials/demo.md gives opens with the headline metric columns, the
  champion's mark and its value on the newest golden version right after them (on the folded
  sweep parent that holds it);
* the reference pages keep a glob and the option names whole.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import cli
from .test_explorer import hostile_page, pair_of_runs
from .ui_browser import SHOTS, browser, new_page, own_store, serving, sync_playwright  # noqa: F401

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def module_store(tmp_path_factory, _template_db, mini_docs):
    """A store of the module's own (the shared ``store`` fixture is per test): two mini runs,
    compared, and a hostile page logged beside them. (root, experiment id, a, b, lost case)."""
    import mlflow

    from rag_experiments.tracking.explorer import log_page
    from rag_experiments.tracking.mlflow_run import EXPERIMENT_TAGS

    root = tmp_path_factory.mktemp("explorer-ui")
    with own_store(root, _template_db, EXPERIMENT_TAGS) as exp_id:
        a, b, lost, _ = pair_of_runs(root, mini_docs)
        assert cli("compare", a, b) == 0
        page, _ = hostile_page()
        c = mlflow.tracking.MlflowClient()
        log_page(c, a, "explorer/hostile.html", page)
        # b is the champion and a sweep's point (what promote --force of a point leaves): the folded
        # parent carries the mark (tracking.champion_mark.mark_champion, as promote calls it)
        from rag_experiments.tracking.champion_mark import mark_champion

        sweep = c.create_run(exp_id, run_name="retrieval=vector,hybrid", tags={"sweep": "parent"}).info.run_id
        c.set_terminated(sweep)
        c.set_tag(b, "mlflow.parentRunId", sweep)
        c.set_tag(b, "champion", "true")
        c.set_tag(b, "on_newest_golden", "measured on the newest golden version")
        mark_champion(c, b)
        yield root, exp_id, a, b, lost


@pytest.fixture(scope="module")
def server(module_store):
    with serving(module_store[0]) as base:
        yield base


@pytest.fixture
def page(new_page):
    """A fresh browser context's page (1500x1000), closed after the test."""
    return new_page(1500, 1000)


def _open_artifact(page, server: str, exp_id: str, run_id: str, artifact: str):
    """A run's HTML artifact in MLflow's artifact view (Model training mode); the frame it renders in."""
    page.goto(f"{server}/#/experiments/{exp_id}/runs/{run_id}/artifacts/{artifact}?workflowType=machine_learning")
    return page.frame_locator("iframe.mlflow-html-iframe")


def test_the_case_explorer_renders_in_mlflows_artifact_view(page, server, module_store):
    root, exp_id, a, b, lost = module_store
    frame = _open_artifact(page, server, exp_id, b, f"explorer/cases_vs_{a[:8]}.html")
    first = frame.locator("section.case").first
    first.wait_for()
    assert lost in first.inner_text() and "lost -1.000" in first.inner_text()
    from rag_experiments.golden.resolve import load_golden

    n = len(load_golden(root / "mini.jsonl").scorable)
    assert frame.locator("section.case").count() == n  # every case on the first page (25 a page)
    frame.locator("text=relevant").first.wait_for()
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "explorer-in-mlflow.png"))
    # the outcome filter: only the won case
    frame.locator("#f-outcome").select_option("won")
    frame.locator("#status").filter(has_text=f"1 of {n} cases").wait_for()
    assert frame.locator("section.case.won").count() == 1 and frame.locator("section.case.lost").count() == 0


def test_a_hostile_question_and_passage_run_no_script_in_the_explorer(page, server, module_store):
    root, exp_id, a, b, lost = module_store
    frame = _open_artifact(page, server, exp_id, a, "explorer/hostile.html")
    page.locator("iframe.mlflow-html-iframe").wait_for()
    q = frame.locator(".q").first
    q.wait_for()
    # the markup shows as text, and nothing in it ran (not in the frame, not in MLflow's page)
    assert "</script><script>window.__pwned=1</script>" in q.inner_text()
    assert "window.__pwned=2" in frame.locator(".txt").first.inner_text()
    assert frame.locator("img").count() == 0
    inner = next(f for f in page.frames if f != page.main_frame and f.url.startswith("blob:"))
    assert inner.evaluate("() => window.__pwned === undefined")
    assert page.evaluate("() => window.__pwned === undefined")


def test_the_runs_list_url_in_the_demo_tutorial_opens_with_the_headline_columns(page, server, module_store):
    """docs/tutorials/demo.md's runs-list URL, as a reader copies it (issue 59: it opened with no
    metric columns, the link `make ui` prints had them)."""
    root, exp_id, a, b, lost = module_store
    text = (ROOT / "docs" / "tutorials" / "demo.md").read_text(encoding="utf-8")
    url = re.search(r"open (http://127\.0\.0\.1:5000/#/experiments/1/runs\S*)", text).group(1)
    url = url.replace("http://127.0.0.1:5000", server).replace("/experiments/1/", f"/experiments/{exp_id}/")
    page.goto(url)
    page.get_by_role("link", name="vector").first.wait_for()
    page.get_by_text("Model registry", exact=True).first.wait_for()  # Model training mode
    for column in ("recall_at_5", "recall_at_20", "mrr_at_10", "ndcg_at_10"):
        page.get_by_role("columnheader", name=column).first.wait_for(timeout=15_000)
    # the champion's mark is the first tag column (MLflow lists metrics, then tags: right after the
    # four headline metrics, in the first screen, not last), on the folded sweep parent's row
    close_assistant = page.get_by_role("button", name="Close")  # MLflow 3's side panel
    if close_assistant.count():
        close_assistant.first.click()
    x = {name: page.get_by_role("columnheader", name=name, exact=True).first.bounding_box()["x"]
         for name in ("champion", "on_newest_golden", "ndcg_at_10", "variant")}
    page.screenshot(path=str(SHOTS / "docs-runs-url.png"))
    # MLflow orders the tag columns itself (not by the view's list): both in the first screen
    assert x["ndcg_at_10"] < x["champion"] < 1400 and x["on_newest_golden"] < 1450, x
    page.get_by_role("gridcell", name="holds the champion: vector").first.wait_for()
    page.screenshot(path=str(SHOTS / "docs-runs-url.png"))


def _reference_page(name: str) -> str:
    """docs/reference/<name>.md as the site renders it: Python-Markdown with mkdocs.yml's extensions,
    inside Material's article markup and stylesheet (no site build, no network)."""
    import glob

    import markdown
    import yaml

    conf = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[0])
    exts = [e if isinstance(e, str) else next(iter(e)) for e in conf["markdown_extensions"]]
    body = markdown.markdown((ROOT / "docs" / "reference" / f"{name}.md").read_text(encoding="utf-8"), extensions=exts)
    css = Path(sorted(glob.glob(str(Path(markdown.__file__).parents[1] / "material" / "templates" / "assets"
                                    / "stylesheets" / "main.*.min.css")))[0]).read_text(encoding="utf-8")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><style>{css}</style></head><body>"
            f"<div class='md-content'><article class='md-content__inner md-typeset'>{body}</article></div></body></html>")


def test_the_reference_pages_keep_globs_and_table_names_whole(page, tmp_path):
    """cli.md's `import-trec --docs` help says `*.all.*` (it rendered as italics, the glob lost) and
    config.md's experiment table keeps each option's name on one line (`chunking_sw` / `eep`
    before), at the site's content width in Material's stylesheet."""
    page.set_viewport_size({"width": 1280, "height": 900})
    (tmp_path / "cli.html").write_text(_reference_page("cli"), encoding="utf-8")
    page.goto((tmp_path / "cli.html").as_uri())
    row = page.locator("tr", has_text="documents file (default: the one").first
    assert "the one *.all.* / *.ALL file in DIR" in row.inner_text()
    assert row.locator("em").count() == 0
    (tmp_path / "config.html").write_text(_reference_page("config"), encoding="utf-8")
    page.goto((tmp_path / "config.html").as_uri())
    page.evaluate("() => document.querySelector('article').style.maxWidth = '660px'")  # the site's text column
    names = page.locator("h3:has-text('experiment options') + table tbody tr td:first-child code")
    assert names.count() >= 5
    lines = names.evaluate_all("els => els.map(e => [e.textContent, e.getClientRects().length])")
    assert all(n == 1 for _, n in lines), lines  # one line box each: no name broken
    page.locator("h3:has-text('experiment options')").scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "docs-config-experiment-table.png"))


def test_the_mlflow_links_the_demo_tutorial_names_do_leave_model_training_mode(page, server, module_store):
    """docs/tutorials/demo.md says which of MLflow's own links cannot keep Model training mode (no
    URL the tool prints can change them): a sweep parent's *Child runs* link is one. Opened from
    the parent's page in a fresh profile, it lands in GenAI mode (no Model registry in the menu);
    if MLflow changes that, this fails and the page's sentence must go."""
    root, exp_id, a, b, lost = module_store
    text = (ROOT / "docs" / "tutorials" / "demo.md").read_text(encoding="utf-8")
    assert "*Child runs*" in text and "*Source Run*" in text and "*Runs* breadcrumb" in text
    parent = __import__("mlflow").tracking.MlflowClient().get_run(b).data.tags["mlflow.parentRunId"]
    page.goto(f"{server}/#/experiments/{exp_id}/runs/{parent}?workflowType=machine_learning")
    page.get_by_text("Model registry", exact=True).first.wait_for()
    page.get_by_role("link", name="vector").first.click()  # the Child runs link in "About this run"
    page.wait_for_url(f"**/runs/{b}**")
    page.wait_for_timeout(1500)
    assert "workflowType" not in page.url
    assert page.get_by_text("Model registry", exact=True).count() == 0  # GenAI mode
