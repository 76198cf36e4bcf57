"""Screenshots of the MLflow UI on the browser tests' store recipe, from any checkout of this repo:
the "before" and "after" of a UI change, taken the same way.

    python tools/ui_screenshots.py --tree /tmp/before --out test-artifacts/browser/before
    python tools/ui_screenshots.py --tree . --out test-artifacts/browser/after

``--tree`` is the checkout whose package (``rag_experiments``) and test helpers
(``tests/tracking/conftest.py``) log the store: a three-point ``fusion.rrf_k`` sweep through the
real Hydra sweep callback (as the ``small_sweep`` fixture does), then ``rag-exp promote --sweep``
through a real ``mlflow server`` on 127.0.0.1. Debian's Chromium (/usr/bin/chromium) driven by
Playwright opens, in a fresh browser profile each, what a user opens: the runs list (the README's
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
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run"]
SHOTS = ("1-runs-view", "2-parent-overview", "3-compare-view", "4-champion-version", "5-home-to-experiment")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_sweep(exp_id: str, sweep_dir: Path) -> tuple[str, list[str]]:
    """The small_sweep fixture's store: a fusion.rrf_k=10,30,60 sweep, 40 cases, rrf_k=30 best."""
    import warnings

    import mlflow
    import yaml
    from omegaconf import OmegaConf

    from rag_experiments.tracking.hydra_callback import MlflowSweepCallback
    from rag_experiments.tracking.mlflow_run import PARENT_ENV, flatten
    from tests.tracking.conftest import CORPUS, GOLDEN, aggregate, base_config, per_case_frame

    cfg = OmegaConf.create({
        "tracking": {"enabled": True, "uri": None, "experiment": "rag-experiments", "sweep_summary": True},
        "objective": "recall_at_5",
        "hydra": {"overrides": {"task": ["fusion.rrf_k=10,30,60", "progress=false"]},
                  "sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper", "params": None},
                  "launcher": {"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"},
                  "sweep": {"dir": str(sweep_dir)}},
    })
    callback = MlflowSweepCallback()
    callback.on_multirun_start(cfg)
    parent = os.environ[PARENT_ENV]
    n = 40
    scores = {10: [1.0 if i % 4 else 0.0 for i in range(n)], 30: [1.0 if i % 8 else 0.0 for i in range(n)],
              60: [1.0 if i % 2 else 0.0 for i in range(n)]}
    children = []
    for k, r5 in scores.items():
        config = base_config(**{"fusion.rrf_k": k})
        per_case = per_case_frame(r5, seed=k)
        tags = {"variant": "hybrid", "golden_sha256": GOLDEN, "corpus_digest": CORPUS, "labels_validated": "false",
                "mlflow.parentRunId": parent}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with mlflow.start_run(experiment_id=exp_id, run_name=f"fusion.rrf_k={k} progress=false", tags=tags) as run:
                mlflow.log_params(flatten(config))
                mlflow.log_text(yaml.safe_dump(config, sort_keys=False), "config.yaml")
                mlflow.log_metrics(aggregate(per_case))
                mlflow.log_table(per_case, artifact_file="per_case.json")
        children.append(run.info.run_id)
        callback.on_job_end(cfg, None)
    callback.on_multirun_end(cfg)
    return parent, children


def _click_if_visible(locator) -> None:
    try:
        if locator.count() and locator.first.is_visible():
            locator.first.click(timeout=5_000)
    except Exception:  # noqa: BLE001 - a convenience: the screenshot is taken either way
        pass


def shoot(base: str, exp_id: str, parent: str, children: list[str], out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    from rag_experiments.tracking import ui_links
    from rag_experiments.tracking.mlflow_run import runs_view_url

    if hasattr(ui_links, "sweep_charts_route"):  # the sweep's chart link (issue 48 item 3)
        compare = ui_links.sweep_charts_route(exp_id, parent)
    else:  # what the tree linked to: MLflow's compare page of the points
        compare = ui_links.compare_route([exp_id], children)
    pages = {
        "1-runs-view": (runs_view_url(base, exp_id), "fusion.rrf_k=10,30,60", False),
        "2-parent-overview": (f"{base}/{ui_links.run_route(exp_id, parent)}", "Best", True),
        "3-compare-view": (f"{base}/{compare}", "recall_at_5", False),
        "4-champion-version": (f"{base}/{ui_links.model_route('rag-retriever-default', '1')}", "Version 1", True),
    }
    written = []
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            for name, (url, wait_for, full) in pages.items():
                context = browser.new_context(viewport={"width": 1600, "height": 1000})
                page = context.new_page()
                page.set_default_timeout(60_000)
                page.goto(url)
                page.get_by_text(wait_for, exact=False).first.wait_for()
                for target in (page.get_by_role("button", name="Close"),  # the assistant side panel
                               page.get_by_role("button", name="Got it"),  # GenAI's first-visit popover
                               page.get_by_text("Show more")):  # a long run description
                    _click_if_visible(target)
                page.wait_for_timeout(2000)  # charts and menus settle after the data
                page.screenshot(path=str(out / f"{name}.png"), full_page=full)
                written.append(out / f"{name}.png")
                context.close()
            context = browser.new_context(viewport={"width": 1600, "height": 1000})
            page = context.new_page()
            page.set_default_timeout(60_000)
            page.goto(f"{base}/#/")
            page.get_by_role("link", name="rag-experiments").first.click()
            page.wait_for_timeout(3000)
            page.screenshot(path=str(out / "5-home-to-experiment.png"))
            written.append(out / "5-home-to-experiment.png")
            context.close()
        finally:
            browser.close()
    return written


def _serve(root: Path, db: Path):
    port = _free_port()
    log = open(root / "mlflow-server.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{db}",
                               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"], cwd=root, stdout=log,
                              stderr=subprocess.STDOUT, env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            urllib.request.urlopen(f"{base}/health", timeout=2).read()
            return server, base
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("mlflow server did not start: " + (root / "mlflow-server.log").read_text()[-2000:])
            time.sleep(0.25)


def shoot_store(store: Path, out: Path) -> list[Path]:
    """The real store of a project (see the module's docstring): compare logs the explorers and the
    charts, then one screenshot per page a user opens, 1500x1000, fresh profile each."""
    from playwright.sync_api import sync_playwright

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
    pages = {
        "1-runs-list-first-screen": (f"{ui_links.runs_route(exp)}", parent.name, False),
        "2-sweep-parent": (ui_links.run_route(exp, parent.id), "Best", True),
        "3-explorer-hybrid-vs-vector": (ui_links.run_route(exp, vector.id, artifact_path(hybrid.id)), None, False),
        "4-explorer-sweep-points": (ui_links.run_route(exp, points[1].id, artifact_path(points[0].id)), None, False),
        "5-sweep-chart": (ui_links.run_route(exp, parent.id, next(
            f"comparison/{n}" for n in os.listdir(store / "mlruns" / "artifacts" / parent.id / "artifacts" / "comparison")
            if "_vs_" in n)), None, False),
        "6-recall-curves": (ui_links.run_route(exp, parent.id, "comparison/recall_at_k.png"), None, False),
    }
    server, base = _serve(store, db)
    written = []
    out.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            for name, (route, wait_for, full) in pages.items():
                context = browser.new_context(viewport={"width": 1500, "height": 1000})
                page = context.new_page()
                page.set_default_timeout(60_000)
                page.goto(f"{base}/{route}")
                if wait_for:
                    page.get_by_text(wait_for, exact=False).first.wait_for()
                elif name.startswith(("3", "4")):
                    page.frame_locator("iframe.mlflow-html-iframe").locator("section.case").first.wait_for()
                else:
                    page.locator("img").last.wait_for()
                for target in (page.get_by_role("button", name="Close"), page.get_by_text("Show more")):
                    _click_if_visible(target)
                page.wait_for_timeout(2500)
                page.screenshot(path=str(out / f"{name}.png"), full_page=full)
                written.append(out / f"{name}.png")
                context.close()
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    return written


def shoot_sweep_parent_dev_test(db: Path, parents: dict[str, str], out: Path) -> list[Path]:
    """A sweep parent's Overview on a golden set with a frozen split, with its dev/test table
    (``sweep-parent-dev-test-<name>.png``, 1600x1100): ``parents`` maps a
    name to the parent's run id in the sqlite store ``db`` (logged by ``rag-exp run -m ...`` with
    ``golden.path`` on a split golden set)."""
    from playwright.sync_api import sync_playwright

    server, base = _serve(db.parent, db)
    written = []
    out.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            for name, run_id in parents.items():
                context = browser.new_context(viewport={"width": 1600, "height": 1100})
                page = context.new_page()
                page.set_default_timeout(90_000)
                exp = "1"  # a throwaway store with one experiment; the route resolves the run by id
                page.goto(f"{base}/#/experiments/{exp}/runs/{run_id}?workflowType=machine_learning")
                table = page.get_by_text("on each side of the split", exact=False).first
                table.wait_for()
                for target in (page.get_by_role("button", name="Close"), page.get_by_role("button", name="Got it"),
                               page.get_by_text("Show more")):
                    _click_if_visible(target)
                page.wait_for_timeout(2500)
                # the description scrolls inside MLflow's own pane (a full-page shot is this same screen): the
                # first screen holds the Best and Selected lines, the verdict and the dev/test table
                page.screenshot(path=str(out / f"sweep-parent-dev-test-{name}.png"))
                written.append(out / f"sweep-parent-dev-test-{name}.png")
                context.close()
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    return written


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
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(root / "mlflow-server.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
                               f"sqlite:///{root / 'mlruns' / 'mlflow.db'}", "--host", "127.0.0.1", "--port",
                               str(port), "--workers", "1"], cwd=root, stdout=log, stderr=subprocess.STDOUT,
                              env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"{base}/health", timeout=2).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("mlflow server did not start: " + (root / "mlflow-server.log").read_text()[-2000:])
                time.sleep(0.25)
        os.environ.update(MLFLOW_TRACKING_URI=base, RAG_EXP_UI_URL=base)
        mlflow.set_tracking_uri(base)
        from rag_experiments.cli import main as cli

        if cli(["promote", "--sweep", parent]) != 0:
            raise SystemExit("promote --sweep failed")
        for path in shoot(base, exp_id, parent, children, out):
            print(f"wrote {path}")
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
