"""Screenshots of the MLflow UI on the browser tests' store recipe, from two checkouts of this repo:
the "before" and "after" of a UI change, taken the same way.

    python tools/ui_screenshots.py --tree /tmp/before --out test-artifacts/browser/before
    python tools/ui_screenshots.py --tree . --out test-artifacts/browser/after

``--tree`` is the checkout whose package (``rag_experiments``) and test helpers
(``tests/tracking/conftest.py``) log the store: a three-point ``fusion.rrf_k`` sweep through the
real Hydra sweep callback (the ``small_sweep`` fixture's ``log_small_sweep``: the tree must be from
December 6, 2026 on), then ``rag-exp promote --sweep`` through a real ``mlflow server`` on
127.0.0.1. Debian's Chromium (/usr/bin/chromium) driven by Playwright opens, in a fresh browser profile each, what a user opens: the runs list (the README's
link), the sweep parent's Overview, the compare view the tool links to (the sweep's chart link
where the tree has one, else MLflow's compare page of the points), the champion's registry version
and MLflow Home -> the experiment. Run it with this repository's venv; nothing is downloaded.

``--store PROJECT`` shoots a project's real store instead (the demo the README builds: ``make run``,
``run.py retrieval=vector``, ``run.py -m fusion.rrf_k=30,60`` in a folder with ``RAG_EXP_HOME``
there): it first runs ``rag-exp compare`` on the two single runs and ``compare --last-sweep
--log-plots`` (logging the case explorers and the charts), then shoots the runs list's first screen,
the sweep parent, each case explorer in MLflow's artifact view and the sweep's charts::

    python tools/ui_screenshots.py --store /tmp/demo --out test-artifacts/browser/after

``--dev-test-db STORE.db --parent NAME=RUN_ID ...`` shoots sweep parents logged on a golden set with a
frozen split (their dev/test table) as ``sweep-parent-dev-test-NAME.png``::

    python tools/ui_screenshots.py --dev-test-db /tmp/dot/mlflow.db --parent rrf_k=PARENT_ID \
        --out test-artifacts/browser/after
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run"]
SHOTS = ("1-runs-view", "2-parent-overview", "3-compare-view", "4-champion-version", "5-home-to-experiment")


def log_sweep(exp_id: str, sweep_dir: Path) -> tuple[str, list[str]]:
    """The small_sweep fixture's store: a fusion.rrf_k=10,30,60 sweep, 40 cases, rrf_k=30 best."""
    from tests.tracking.conftest import log_small_sweep

    parent, children, _ = log_small_sweep(exp_id, sweep_dir)
    return parent, children


def _click_if_visible(locator) -> None:
    try:
        if locator.count() and locator.first.is_visible():
            locator.first.click(timeout=5_000)
    except Exception:  # noqa: BLE001 - a convenience: the screenshot is taken either way
        pass


# what covers a page on a first visit: the assistant side panel, GenAI's first-visit popover, a long run description
DISMISS = (lambda page: page.get_by_role("button", name="Close"), lambda page: page.get_by_role("button", name="Got it"),
           lambda page: page.get_by_text("Show more"))


@dataclass(frozen=True)
class Shot:
    """One page to photograph: ``ready(page)`` waits until it shows its data (or acts to get there)."""

    name: str
    url: str
    ready: Callable[[Any], None]
    full_page: bool = False
    settle_ms: int = 2500  # charts and menus settle after the data
    dismiss: tuple[Callable[[Any], Any], ...] = DISMISS


def _wait_for_text(text: str) -> Callable[[Any], None]:
    return lambda page: page.get_by_text(text, exact=False).first.wait_for()


def _shoot(shots: list[Shot], out: Path, *, viewport: tuple[int, int], timeout_ms: int = 60_000) -> list[Path]:
    """Each shot in a fresh browser profile (nothing a previous page dismissed or cached carries over)."""
    from playwright.sync_api import sync_playwright

    written = []
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            for shot in shots:
                context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
                page = context.new_page()
                page.set_default_timeout(timeout_ms)
                page.goto(shot.url)
                shot.ready(page)
                for target in shot.dismiss:
                    _click_if_visible(target(page))
                page.wait_for_timeout(shot.settle_ms)
                page.screenshot(path=str(out / f"{shot.name}.png"), full_page=shot.full_page)
                written.append(out / f"{shot.name}.png")
                context.close()
        finally:
            browser.close()
    return written


def shoot(base: str, exp_id: str, parent: str, children: list[str], out: Path) -> list[Path]:
    from rag_experiments.tracking import ui_links
    from rag_experiments.tracking.mlflow_run import runs_view_url

    if hasattr(ui_links, "sweep_charts_route"):  # the sweep's chart link (issue 48 item 3)
        compare = ui_links.sweep_charts_route(exp_id, parent)
    else:  # what the tree linked to: MLflow's compare page of the points
        compare = ui_links.compare_route([exp_id], children)

    def open_experiment(page) -> None:  # MLflow Home -> the experiment, as a user gets there
        page.get_by_role("link", name="rag-experiments").first.click()

    shots = [
        Shot("1-runs-view", runs_view_url(base, exp_id), _wait_for_text("fusion.rrf_k=10,30,60"), settle_ms=2000),
        Shot("2-parent-overview", f"{base}/{ui_links.run_route(exp_id, parent)}", _wait_for_text("Best"), True, 2000),
        Shot("3-compare-view", f"{base}/{compare}", _wait_for_text("recall_at_5"), settle_ms=2000),
        Shot("4-champion-version", f"{base}/{ui_links.model_route('rag-retriever-default', '1')}",
             _wait_for_text("Version 1"), True, 2000),
        Shot("5-home-to-experiment", f"{base}/#/", open_experiment, settle_ms=3000, dismiss=()),
    ]
    return _shoot(shots, out, viewport=(1600, 1000))


def _serving(root: Path, db: Path):
    """A real ``mlflow server`` on ``db`` (the browser tests' :func:`tests.tracking.ui_browser.serving`: from
    ``--tree`` when given, else from this checkout)."""
    if str(REPO) not in sys.path:
        sys.path.append(str(REPO))  # after --tree's checkout: the tree's tests package comes first
    from tests.tracking.ui_browser import serving

    return serving(root, db)


def shoot_store(store: Path, out: Path) -> list[Path]:
    """The real store of a project (see the module's docstring): compare logs the explorers and the
    charts, then one screenshot per page a user opens, 1500x1000, fresh profile each."""
    db = store / "mlruns" / "mlflow.db"
    os.environ.update(RAG_EXP_HOME=str(store), MLFLOW_TRACKING_URI=f"sqlite:///{db}",
                      MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR="false", COLUMNS="200")
    os.chdir(store)
    from rag_experiments.cli import main as cli
    from rag_experiments.tracking import ui_links
    from rag_experiments.tracking.explorer import artifact_path
    from rag_experiments.tracking.runs import last_sweep_parent, search, sweep_children

    parent = last_sweep_parent()
    points = sweep_children(parent.id)
    singles = [r for r in search() if r.parent_id is None and not r.is_sweep_parent and r.status == "FINISHED"]
    hybrid = next(r for r in singles if r.params.get("retrieval.variant") == "hybrid")
    vector = next(r for r in singles if r.params.get("retrieval.variant") == "vector")
    assert cli(["compare", hybrid.id, vector.id]) == 0
    assert cli(["compare", "--last-sweep", "--log-plots"]) == 0
    exp = parent.experiment_id
    chart = next(f"comparison/{n}" for n in os.listdir(store / "mlruns" / "artifacts" / parent.id / "artifacts"
                                                        / "comparison") if "_vs_" in n)

    def explorer(page) -> None:  # the case explorer renders inside MLflow's HTML artifact frame
        page.frame_locator("iframe.mlflow-html-iframe").locator("section.case").first.wait_for()

    def image(page) -> None:
        page.locator("img").last.wait_for()

    dismiss = (DISMISS[0], DISMISS[2])
    with _serving(store, db) as base:
        shots = [
            Shot("1-runs-list-first-screen", f"{base}/{ui_links.runs_route(exp)}", _wait_for_text(parent.name),
                 dismiss=dismiss),
            Shot("2-sweep-parent", f"{base}/{ui_links.run_route(exp, parent.id)}", _wait_for_text("Best"), True,
                 dismiss=dismiss),
            Shot("3-explorer-hybrid-vs-vector", f"{base}/{ui_links.run_route(exp, vector.id, artifact_path(hybrid.id))}",
                 explorer, dismiss=dismiss),
            Shot("4-explorer-sweep-points",
                 f"{base}/{ui_links.run_route(exp, points[1].id, artifact_path(points[0].id))}", explorer,
                 dismiss=dismiss),
            Shot("5-sweep-chart", f"{base}/{ui_links.run_route(exp, parent.id, chart)}", image, dismiss=dismiss),
            Shot("6-recall-curves", f"{base}/{ui_links.run_route(exp, parent.id, 'comparison/recall_at_k.png')}", image,
                 dismiss=dismiss),
        ]
        return _shoot(shots, out, viewport=(1500, 1000))


def shoot_sweep_parent_dev_test(db: Path, parents: dict[str, str], out: Path) -> list[Path]:
    """A sweep parent's Overview on a golden set with a frozen split, with its dev/test table
    (``sweep-parent-dev-test-<name>.png``, 1600x1100): ``parents`` maps a
    name to the parent's run id in the sqlite store ``db`` (logged by ``rag-exp run -m ...`` with
    ``golden.path`` on a split golden set)."""
    exp = "1"  # a throwaway store with one experiment; the route resolves the run by id
    with _serving(db.parent, db) as base:
        # the description scrolls inside MLflow's own pane (a full-page shot is this same screen): the
        # first screen holds the Best and Selected lines, the verdict and the dev/test table
        shots = [Shot(f"sweep-parent-dev-test-{name}", f"{base}/#/experiments/{exp}/runs/{run_id}"
                      "?workflowType=machine_learning", _wait_for_text("on each side of the split"))
                 for name, run_id in parents.items()]
        return _shoot(shots, out, viewport=(1600, 1100), timeout_ms=90_000)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, help="the checkout whose code logs the store")
    ap.add_argument("--store", type=Path, help="a project folder with a real store (the demo): shoot it instead")
    ap.add_argument("--out", type=Path, required=True, help="folder for the PNG files")
    ap.add_argument("--dev-test-db", type=Path, help="a sqlite store with sweeps on a split golden set: shoot the "
                    "parents given by --parent NAME=RUN_ID (their dev/test table)")
    ap.add_argument("--parent", action="append", default=[], metavar="NAME=RUN_ID", help="with --dev-test-db")
    args = ap.parse_args(argv)
    if args.dev_test_db:
        parents = dict(item.split("=", 1) for item in args.parent)
        for path in shoot_sweep_parent_dev_test(args.dev_test_db.resolve(), parents, args.out.resolve()):
            print(f"wrote {path}")
        return 0
    if args.store:
        for path in shoot_store(args.store.resolve(), args.out.resolve()):
            print(f"wrote {path}")
        return 0
    if not args.tree:
        ap.error("give --tree CHECKOUT or --store PROJECT")
    tree, out = args.tree.resolve(), args.out.resolve()
    sys.path.insert(0, str(tree))
    import mlflow

    import rag_experiments

    assert Path(rag_experiments.__file__).resolve().is_relative_to(tree), rag_experiments.__file__
    root = Path(tempfile.mkdtemp(prefix="ui-shots-"))
    os.chdir(root)
    os.environ.update(RAG_EXP_HOME=str(root), MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR="false")
    for var in ("MLFLOW_TRACKING_URI", "RAG_EXP_PARENT_RUN_ID"):
        os.environ.pop(var, None)
    (root / "mlruns").mkdir()
    from rag_experiments.paths import artifact_root, tracking_uri

    mlflow.set_tracking_uri(tracking_uri())
    exp_id = mlflow.create_experiment("rag-experiments", artifact_location=artifact_root())
    mlflow.set_experiment(experiment_id=exp_id)
    parent, children = log_sweep(exp_id, root / "multirun")
    with _serving(root, root / "mlruns" / "mlflow.db") as base:
        os.environ.update(MLFLOW_TRACKING_URI=base, RAG_EXP_UI_URL=base)
        mlflow.set_tracking_uri(base)
        from rag_experiments.cli import main as cli

        if cli(["promote", "--sweep", parent]) != 0:
            raise SystemExit("promote --sweep failed")
        for path in shoot(base, exp_id, parent, children, out):
            print(f"wrote {path}")
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
