"""The champion in MLflow's runs list as a person sees it (issue 59): a real ``mlflow server`` over a
store whose champion is a sweep point measured on an older golden version, in Debian's Chromium.

Before, the list showed the champion's value of record beside newer runs' values with nothing in
view saying they measure different cases (the notice sat in cut-off tag columns at the right), and
a champion that is a sweep point sat hidden under its folded parent. Now the first column, the run
name, says both: the parent reads ``champion inside: …`` and, unfolded, the point reads
``champion (older golden <sha>; <value> on the newest): …``.
"""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.tracking.mlflow_run import runs_view_url

from .conftest import cli
from .golden_runs import log_golden_run
from .test_champion_newest import _grow
from .test_golden_versions import golden, golden_add  # noqa: F401 - fixtures
from .ui_browser import SHOTS, browser, new_page, serving, sync_playwright  # noqa: F401

pytestmark = pytest.mark.browser


@pytest.fixture
def older_champion_in_a_sweep(store, golden, golden_add):  # noqa: F811
    """A sweep's point promoted (as promote --force of a point leaves it), then the golden set grows
    and a newer run is logged; what every run does after logging (ensure_registered) then marks it.
    (experiment id, sweep parent id, champion id, newer run id)."""
    from rag_experiments.serving.model_logging import ensure_registered

    from rag_experiments.tracking.mlflow_run import setup

    path, exp = golden
    assert setup(None, "rag-experiments") == exp  # the experiment's tags: the runs list's shared view
    c = MlflowClient()
    parent = c.create_run(exp, run_name="fusion.rrf_k=30,60", tags={"sweep": "parent"}).info.run_id
    c.set_terminated(parent)
    champ = log_golden_run(path, name="fusion.rrf_k=30", exp_id=exp)
    c.set_tag(champ, "mlflow.parentRunId", parent)
    assert cli("promote") == 0
    _grow(path, golden_add)
    newer = log_golden_run(path, name="hybrid (heading)", exp_id=exp)
    ensure_registered("default")
    return exp, parent, champ, newer


def test_the_runs_list_names_the_champion_first_and_says_it_is_on_an_older_golden_version(
        new_page, store, older_champion_in_a_sweep):
    exp, parent, champ, newer = older_champion_in_a_sweep
    sha = MlflowClient().get_run(champ).data.tags["golden_sha256"][:8]
    with serving(store[0]) as base:
        page = new_page(1500, 1000)
        page.goto(runs_view_url(base, exp))
        close_assistant = page.get_by_role("button", name="Close")  # MLflow 3's side panel
        # the folded sweep parent says it holds the champion, in its name (the first column)
        older = f"older golden {sha}; 0.9500 on the newest"
        holder = page.get_by_role("link", name=f"champion inside ({older}): fusion.rrf_k=30,60")
        holder.wait_for()
        if close_assistant.count():
            close_assistant.first.click()
        page.wait_for_timeout(500)
        created = page.get_by_role("columnheader", name="Created").first.bounding_box()
        box = holder.bounding_box()
        assert box["x"] < created["x"] and box["y"] < 1000, (box, created)  # the name column, first screen
        # wide enough to read the notice (MLflow's default column, 190 px, showed "champion (olde…")
        cell = page.locator("[role=gridcell]", has=holder).bounding_box()
        assert cell["width"] >= 300, cell
        # unfolded, the point's name starts with what makes its value of record not comparable
        page.locator("[role=gridcell]", has=holder).locator("button").first.click()  # the row's expander
        point = page.get_by_role("link", name=f"champion ({older}): fusion.rrf_k=30", exact=True)
        point.wait_for()
        assert point.bounding_box()["x"] < created["x"]
        page.get_by_role("link", name="hybrid (heading)").wait_for()  # the newer run, unmarked
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "champion-older-golden-in-a-sweep.png"))
