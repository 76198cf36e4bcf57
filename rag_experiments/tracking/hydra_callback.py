"""One MLflow parent run per Hydra multirun, with every sweep point as a nested child.

``on_multirun_start`` creates the parent (named after what is swept, with the swept keys and
their value lists as params, and the source/git tags any run has) and publishes its id in the
environment (same-process launchers, and joblib/loky workers spawned afterwards inherit it)
and in ``<sweep dir>/mlflow_parent_run_id`` (for launchers on other machines).
``on_multirun_end`` fills in the result (see :mod:`.sweep_parent`: the shared config, the best
child's objective and segments, its id and overrides, Optuna's best value and params, the
comparison table as the run description) and closes it: FAILED if any child failed or is
missing, else FINISHED. A job that crashes marks its own child FAILED (see
:mod:`rag_experiments.pipeline`), and an ``atexit`` guard closes a parent left RUNNING if Hydra
aborts the sweep, so no run stays RUNNING forever.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ..errors import UserError
from ..paths import tracking_uri
from ..redaction import redact_text
from ..sweep_preflight import check_sweep_or_exit
from . import sweep_parent as S
from .configured import comparison_defaults
from .mlflow_run import PARENT_ENV, create_run, git_state, log_batch, setup
from .ownership import owner_tags
from .runs import load_per_case, sweep_children
from .server import check_store
from .sweep_parent import experiment_preset, parent_name, sweep_spec
from .ui_links import VIEW_METRICS, VIEW_PREFIX, line, run_route, sweep_charts_route, sweep_view_key, view_state


class MlflowSweepCallback(Callback):
    def __init__(self) -> None:
        self.parent_id: str | None = None
        self.n_jobs = 0
        self.summary = True
        self.objective: str | None = None
        self.maximize = True
        self.spec: dict[str, str] = {}
        self.name = "sweep"
        self.sweep_dir: Path | None = None
        self.prefetch = None  # sweep_prefetch.PerCasePrefetch, from the second point on
        self.exp_id: str | None = None
        self.resamples: int | None = None
        self.seed: int | None = None

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """A single run: a tracking store that does not answer (a server that is down, a database
        refusing the password) is one line before the run's work, not after it."""
        if not config.tracking.enabled:
            return

        try:
            check_store(tracking_uri(config.tracking.uri))
        except UserError as exc:  # Hydra would turn an exception here into a warning and go on
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(exc.exit_code)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        check_sweep_or_exit(config)  # every point valid, before the parent run exists
        if not config.tracking.enabled:
            return
        from mlflow.tracking import MlflowClient

        try:
            exp_id = setup(config.tracking.uri, config.tracking.experiment)
        except UserError as exc:  # Hydra would turn an exception here into a warning and go on
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(exc.exit_code)
        self.summary = bool(config.tracking.sweep_summary)
        self.exp_id = exp_id
        self.objective = str(config.objective)
        # every logged metric is better when higher; an Optuna study set to minimize says otherwise
        self.maximize = str(config.hydra.sweeper.get("direction", "maximize")).lower() != "minimize"
        overrides = list(config.hydra.overrides.task)
        params = config.hydra.sweeper.get("params")
        self.spec = sweep_spec(overrides, OmegaConf.to_container(params) if params is not None else None)
        self.name = parent_name(self.spec, experiment_preset(overrides))
        client = MlflowClient()
        from ..stats.paired import test_settings
        from .compare import DIRECTION_TAG, RESAMPLES_TAG, SEED_TAG

        self.resamples, self.seed = test_settings()  # the summary's paired tests, recorded for compare
        # mask before cutting: a cut through a URL would leave a password no pattern recognises
        self.parent_id = create_run(client, exp_id, redact_text(self.name)[:240], {
            "sweep": "parent", "sweep_overrides": redact_text(" ".join(overrides))[:5000],
            "sweep_params": redact_text(json.dumps(self.spec))[:5000], "objective": self.objective,
            "sweeper": str((config.hydra.get("sweeper") or {}).get("_target_", "")).rsplit(".", 1)[-1],
            "launcher": str((config.hydra.get("launcher") or {}).get("_target_", "")).rsplit(".", 1)[-1],
            RESAMPLES_TAG: str(self.resamples), SEED_TAG: str(self.seed),
            DIRECTION_TAG: "maximize" if self.maximize else "minimize",
            **git_state(), **owner_tags()})
        # the swept keys now (a running sweep already says what it sweeps); the shared config at the end
        log_batch(client, self.parent_id, params={k: redact_text(str(v)) for k, v in self.spec.items()})
        os.environ[PARENT_ENV] = self.parent_id
        self.sweep_dir = Path(config.hydra.sweep.dir)
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        (self.sweep_dir / "mlflow_parent_run_id").write_text(self.parent_id + "\n")
        atexit.register(self._close_if_running)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        self.n_jobs += 1
        # from the second point on (the default launcher has forked its workers by then) the
        # summary's inputs are read while the other points run
        if self.prefetch is None and self.summary and self.parent_id and self.n_jobs >= 2 and self.exp_id:
            from .sweep_prefetch import PerCasePrefetch

            self.prefetch = PerCasePrefetch(self.parent_id, self.exp_id)
            self.prefetch.start()

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._finish()

    def _finish(self) -> None:
        if not self.parent_id:
            return
        if self.prefetch is not None:
            self.prefetch.stop()
        from mlflow.tracking import MlflowClient

        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # reading per-case tables
        client = MlflowClient()
        parent_id = self.parent_id
        # the prefetch has stopped: what it read stays as it is
        known = self.prefetch.runs() if self.prefetch is not None else []
        children = sweep_children(parent_id, per_case=False, c=client, known=known)
        n_failed = sum(c.status != "FINISHED" for c in children)
        failed = n_failed > 0 or len(children) < self.n_jobs
        try:
            self._record_result(client, parent_id, children, n_failed)
        except Exception as exc:  # noqa: BLE001 - the children are logged; never fail the sweep here
            print(f"warning: could not record the sweep result on parent run {parent_id}: {exc}")
        client.set_terminated(parent_id, status="FAILED" if failed else "FINISHED")

        print(line("sweep parent (its Overview holds the verdict and the table)",
                   run_route(str(self.exp_id), parent_id), client.tracking_uri), flush=True)
        if self._log_view(client, parent_id):
            print(line("the sweep's points charted, headline metrics first",
                       sweep_charts_route(str(self.exp_id), parent_id), client.tracking_uri), flush=True)
        os.environ.pop(PARENT_ENV, None)
        self.parent_id = None
        self.prefetch = None

    def _log_view(self, client, parent_id: str) -> bool:
        """The experiment tag behind the sweep's chart link: its points, headline metrics first."""
        try:
            # the objective's chart and sort first (experiment=beir: ndcg_at_10)
            metrics = [self.objective] + [m for m in VIEW_METRICS if m != self.objective]
            client.set_experiment_tag(str(self.exp_id), VIEW_PREFIX + sweep_view_key(parent_id), view_state(
                metrics, order_by=self.objective, search_filter=f"tags.mlflow.parentRunId = '{parent_id}'"))
            return True
        except Exception as exc:  # noqa: BLE001 - a convenience; the sweep is logged
            print(f"warning: could not record the sweep's chart view: {exc}")
            return False

    def _record_result(self, client, parent_id: str, children: list, n_failed: int) -> None:
        from . import held_out  # pandas and the golden set: the sweep's end, never run.py's start-up

        finished = [c for c in children if c.status == "FINISHED"]
        objective = str(self.objective)
        cmp = self._comparison(client, finished, objective) if self.summary and len(finished) >= 2 else None
        best = S.best_child(finished, objective, self.maximize)
        # a frozen dev/test split: the best point is chosen on dev and reported on test (tracking.held_out)
        split = held_out.split_for(finished) if cmp is not None else None
        if split is not None:
            best = held_out.best_on_dev([row.run for row in cmp.rows], objective, split, self.maximize) or best
        tags = {"children": str(len(children)), "children_failed": str(n_failed)}
        metrics: dict[str, float] = {}
        extra: list[str] = []
        held = (held_out.lines(best, len(finished), objective, split, S.best_label(cmp, best), markdown=True,
                               family=[row.run for row in cmp.rows] if cmp is not None else ())
                if best is not None and len(finished) >= 2 else [])
        if best is not None:
            overrides = S.child_overrides(best, self.spec)
            from .configured import headline_metrics

            metrics.update(S.best_point_metrics(best, objective, headline_metrics(best)))
            client.set_tag(best.id, S.BEST_TAG, "true")  # the best point, marked in the runs list
            tags.update({"best_run_id": best.id, "best_run_overrides": overrides[:5000],
                         "best_run_name": best.name[:5000]})
        optuna = self._optuna_result()
        if optuna:
            metrics["optuna.best_value"] = float(optuna["best_value"])
            tags["optuna.best_params"] = json.dumps(optuna["best_params"])[:5000]
            extra.append("Optuna best: " + ", ".join(f"`{k}={v}`" for k, v in optuna["best_params"].items())
                         + f" → {float(optuna['best_value']):.4f}")
        dev_test = self._dev_test(client, parent_id, cmp, objective, split, best)
        if cmp is not None and best is not None:  # the cases behind the verdict, linked from the first lines
            from .explorer import sweep_lines

            extra += sweep_lines(cmp, best, parent_id, client)
        table = None
        if cmp is not None:  # values and Δ only: the Overview reads in one screen (table.md has the rest)
            from .compare_render import markdown_table

            table = markdown_table(cmp, compact=True)
        if cmp is not None:
            from .verdict import verdict_lines, verdicts

            # with a split the best point above was chosen on dev; the verdict is on every case: say so
            n_all = max((len(r.run.per_case) for r in cmp.rows if r.run.per_case is not None), default=0)
            extra = verdict_lines(verdicts(cmp, self.resamples, self.seed), cmp.alpha,
                                  all_cases=n_all if split is not None and n_all else None) + extra
        extra += ["", dev_test] if dev_test else []  # the points' dev and test columns, under the verdict
        extra += self._bounds(client, cmp, best, objective)
        tags["mlflow.note.content"] = S.note(self.name, objective, best, tags.get("best_run_overrides", ""),
                                             len(children), n_failed, table, extra, S.best_label(cmp, best),
                                             held, on_dev=split is not None)
        # the name, overrides and labels quote what was swept: a swept db.url carries its password
        tags = {k: redact_text(str(v)) for k, v in tags.items()}
        params = {k: redact_text(str(v)) for k, v in S.shared_params(finished, exclude=list(self.spec)).items()}
        log_batch(client, parent_id, params=params, metrics=metrics, tags=tags)
        if cmp is not None:
            self._log_summary(cmp, parent_id, client)

    def _dev_test(self, client, parent_id: str, cmp, objective: str, split, best) -> str:
        """With a frozen split: every point's objective on dev (chosen on) and test (held out), as a table
        for the description (the first :data:`.sweep_parent.DEV_TEST_ROWS` points) and, whole, the
        artifact ``comparison/dev_test.md``. Empty without a split; never fails the sweep."""
        if split is None or cmp is None or best is None:
            return ""
        try:
            from .split_decision import dev_test_rows

            rows = dev_test_rows([r.run for r in cmp.rows], [r.label for r in cmp.rows], objective, split, best.id,
                                 self.resamples or 10000, self.seed or 13)
            client.log_text(parent_id, S.dev_test_table(rows, objective, split.id, cmp.alpha, limit=None),
                            "comparison/dev_test.md")
            return S.dev_test_table(rows, objective, split.id, cmp.alpha)
        except Exception as exc:  # noqa: BLE001 - a table of the summary; the sweep is logged
            print(f"warning: could not compute the sweep's dev/test table for {parent_id}: {exc}")
            return ""

    def _bounds(self, client, cmp, best, objective: str) -> list[str]:
        """How far the unjudged hits in the cut-off could move the best point and its nearest rivals
        (:data:`.sweep_parent.BOUNDED_RIVALS`, by the objective), and each rival's Δ from the best: the
        lines compare, promote and the gate print. Empty when nothing can be bounded; never fails the sweep."""
        if cmp is None or best is None:
            return []
        try:
            from .coverage import bounds_lines

            # the table's short names (rrf_k=30), not the runs' names with every override
            runs = [replace(r.run, name=r.label) for r in cmp.rows]
            first = next((r for r in runs if r.id == best.id), None)
            if first is None:
                return []
            sign = 1 if self.maximize else -1
            rivals = sorted((r for r in runs if r.id != best.id),
                            key=lambda r: -sign * r.metrics.get(objective, float("-inf") * sign))
            lines = bounds_lines([first, *rivals[:S.BOUNDED_RIVALS]], objective, c=client)
        except Exception as exc:  # noqa: BLE001 - a line of the summary; the sweep is logged
            print(f"warning: could not bound the sweep's values under unjudged hits: {exc}")
            return []
        return ["", lines[0], "", *[f"- {line.strip()}" for line in lines[1:]]] if lines else []

    def _comparison(self, client, finished: list, objective: str):
        """Children compared with the first point, the rest best-first (:func:`.compare.sweep_order`,
        what ``rag-exp compare --sweep`` lists), with the paired tests' settings it recorded."""
        from .compare import build_comparison, run_labels, sweep_order

        read = self.prefetch.frames() if self.prefetch is not None else {}  # its thread has stopped
        runs = [replace(r, per_case=read[r.id] if r.id in read else load_per_case(r.id, client, r.artifact_uri))
                for r in sweep_order(finished, objective, self.maximize)]
        metrics, primary = comparison_defaults(runs)
        return build_comparison(runs, metrics, primary=primary, n_resamples=self.resamples, seed=self.seed,
                                labels=run_labels(runs))

    def _optuna_result(self) -> dict | None:
        """Optuna's sweeper writes its best value and params to ``optimization_results.yaml``."""
        if self.sweep_dir is None:
            return None
        path = self.sweep_dir / "optimization_results.yaml"
        if not path.exists():
            return None

        data = yaml.safe_load(path.read_text()) or {}
        if "best_value" not in data:
            return None
        return {"best_value": data["best_value"], "best_params": data.get("best_params") or {}}

    def _log_summary(self, cmp, parent_id: str, client) -> None:
        """The sweep's comparison plots and full table as artifacts of the parent. Never fails the sweep."""
        try:
            from .compare_plots import log_plots
            from .runs import get_run

            _, paths = log_plots(cmp, get_run(parent_id, per_case=False, c=client), client)
            print(f"sweep summary logged to parent run {parent_id}: {', '.join(paths)}")
        except Exception as exc:  # noqa: BLE001 - a summary is a convenience, the runs are logged
            print(f"warning: could not log the sweep summary to {parent_id}: {exc}")

    def _close_if_running(self) -> None:
        if self.parent_id:
            try:
                from mlflow.tracking import MlflowClient

                client = MlflowClient()
                client.set_tag(self.parent_id, "aborted", "true")
                # say how many points failed (a lost Ray node, a crashing point), as _finish does
                parent = client.get_run(self.parent_id)
                children = client.search_runs([parent.info.experiment_id],
                                              filter_string=f"tags.mlflow.parentRunId = '{self.parent_id}'")
                client.set_tag(self.parent_id, "children", str(len(children)))
                client.set_tag(self.parent_id, "children_failed",
                               str(sum(c.info.status != "FINISHED" for c in children)))
                client.set_terminated(self.parent_id, status="FAILED")
            except Exception:  # noqa: BLE001 - best effort at interpreter exit
                pass
            self.parent_id = None
