"""Start-up (issue 44, item 8): what a command costs before and after its work, checked without
timing: which modules it loads, how many times Hydra composes, what the interpreter is left to do
at exit. Each test runs a fresh interpreter (a module already imported by pytest proves nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: what no command may load just to build its parser (argparse registers every command first)
HEAVY = ("mlflow", "pandas", "numpy", "matplotlib", "onnxruntime", "psycopg", "hydra", "omegaconf",
         "sqlalchemy", "scipy", "tokenizers", "anthropic", "openai", "httpx", "pyarrow", "torch")


def _python(code: str, *args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd or ROOT, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=600)


def test_the_parser_and_every_help_load_no_heavy_module():
    code = """
import json, sys
from rag_experiments.bench_startup import help_commands
from rag_experiments.cli import build_parser
parser = build_parser()
for cmd in help_commands():
    try:
        parser.parse_args([*cmd, "--help"])
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    modules = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    loaded = {m.split(".")[0] for m in modules}
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))
    # the benchmark importers (golden-set builder, corpus loader and converter): import-beir's
    # --grade-map choices come from benchmarks.grade_maps alone
    assert "rag_experiments.benchmarks.benchmark" not in modules


def test_help_commands_cover_every_command_and_golden_subcommand():
    from rag_experiments.bench_startup import help_commands

    cmds = help_commands()
    assert [] in cmds and ["run"] in cmds and ["golden"] in cmds and ["golden", "add"] in cmds
    assert len(cmds) == len({tuple(c) for c in cmds})  # aliases counted once


_WATCH_EXIT = """
import atexit, gc, json, runpy, sys
atexit.register(lambda: print(json.dumps({"frozen": gc.get_freeze_count(), "gen0": gc.get_threshold()[0]}),
                              file=sys.stderr))
sys.argv = ["rag-exp", *sys.argv[1:]]
runpy.run_module("rag_experiments.cli", run_name="__main__")
"""


def test_the_console_command_leaves_the_interpreter_no_shutdown_collection():
    """``rag-exp`` freezes the heap before exit (its shut-down collections cost 0.6-0.7 s CPU after a
    run) and collects less often while libraries import; a library call of ``main(argv)`` does not."""
    proc = _python(_WATCH_EXIT, "db", "--help")
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stderr.strip().splitlines()[-1])
    assert seen["frozen"] > 0 and seen["gen0"] >= 100_000, seen
    library = _python("import gc\nfrom rag_experiments.cli import main\ntry:\n    main(['db', '--help'])\n"
                      "except SystemExit:\n    pass\nprint(gc.get_freeze_count(), gc.get_threshold()[0])")
    assert library.stdout.split()[-2:] == ["0", "700"], library.stdout + library.stderr


_COUNT_COMPOSITIONS = """
import json, sys
from hydra._internal.hydra import Hydra
import rag_experiments.hydra_app as app

calls = []
compose = Hydra.compose_config
def counting(self, *a, **k):
    calls.append(1)
    return compose(self, *a, **k)
Hydra.compose_config = counting
modes = []
def task(cfg):
    from hydra.core.hydra_config import HydraConfig
    modes.append(str(HydraConfig.get().mode))
    return 0.0
app._task = task
app.main(sys.argv[1:])
print(json.dumps({"compositions": len(calls), "modes": modes}))
"""


@pytest.mark.parametrize("project", [False, True], ids=["packaged-config", "project-conf"])
def test_a_plain_run_composes_the_config_once(tmp_path, project):
    """Hydra 1.3 composed the whole config twice per ``rag-exp run`` (once to read hydra.mode)."""
    if project:  # what rag-exp init writes, less the corpus and golden groups
        (tmp_path / "conf").mkdir()
        (tmp_path / "conf" / "project.yaml").write_text("defaults:\n  - config\n  - _self_\n\nhydra:\n  job:\n"
                                                        "    name: ours\n")
    env = {"RAG_EXP_HOME": str(tmp_path), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db"}
    proc = _python(_COUNT_COMPOSITIONS, "tracking.enabled=false", "fusion.rrf_k=30", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"compositions": 1, "modes": ["RunMode.RUN"]}, seen


def test_a_preset_that_sweeps_is_still_a_sweep(tmp_path):
    """``experiment=rrf_sweep`` sets hydra.mode=MULTIRUN in its file: Hydra must still read it."""
    # the repository's golden set (the sweep's preflight reads it); outputs in tmp_path
    env = {"RAG_EXP_HOME": str(ROOT), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db"}
    proc = _python(_COUNT_COMPOSITIONS, "experiment=rrf_sweep", "tracking.enabled=false", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["modes"] and set(seen["modes"]) == {"RunMode.MULTIRUN"}, seen


def test_plain_run_is_decided_from_the_arguments_and_the_config_folders(tmp_path):
    from rag_experiments.conf_source import PACKAGED_CONF, ConfigSource
    from rag_experiments.hydra_app import plain_run

    packaged = ConfigSource(PACKAGED_CONF, "config")
    assert plain_run([], packaged) and plain_run(["fusion.rrf_k=30", "retrieval=vector"], packaged)
    for args in (["-m", "fusion.rrf_k=1,2"], ["--cfg", "job"], ["experiment=rrf_sweep"], ["+experiment=x"],
                 ["hydra.mode=MULTIRUN"], ["hydra/sweeper=optuna"], ["++hydra.mode=MULTIRUN"]):
        assert not plain_run(args, packaged), args
    # a project's conf/ (what rag-exp init writes): plain, unless one of its files could make a sweep
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "promoted.yaml").write_text("# @package _global_\nhydra:\n  mode: MULTIRUN\n")
    (conf / "project.yaml").write_text("# a preset: rag-exp run experiment=NAME\ndefaults:\n  - config\n"
                                       "  - override corpus: ours\n  - _self_\n  - experiment: null\n")
    project = ConfigSource(conf, "project", (PACKAGED_CONF,))
    assert plain_run([*project.searchpath_overrides(), "fusion.rrf_k=30"], project)
    assert plain_run([], ConfigSource(PACKAGED_CONF, "config", (conf,)))
    assert not plain_run(["experiment=promoted"], project)
    (conf / "project.yaml").write_text("defaults:\n  - config\n  - override /experiment: rrf_sweep\n")
    assert not plain_run([], project)
    (conf / "project.yaml").write_text("defaults:\n  - config\n")
    (conf / "retrieval").mkdir()
    (conf / "retrieval" / "ours.yaml").write_text("# @package _global_\nhydra:\n  mode: MULTIRUN\n")
    assert not plain_run([], project)


_CREATE_RUN = """
import json, sys
sys.argv[0] = sys.argv[1]  # what MLflow's context providers read: the program Hydra shows, or a script
from mlflow.tracking import MlflowClient
from rag_experiments.tracking.mlflow_run import create_run
client = MlflowClient(tracking_uri=sys.argv[2])
exp = client.create_experiment("e")
run_id = create_run(client, exp, "r", {"variant": "hybrid"})
git_imported = "git" in sys.modules
from mlflow.tracking.context.registry import resolve_tags
print(json.dumps({"git_imported": git_imported, "logged": client.get_run(run_id).data.tags,
                  "resolved": resolve_tags({"variant": "hybrid", "mlflow.runName": "r"})}))
"""


@pytest.mark.parametrize("argv0", ["rag-exp run", "run.py"])
def test_a_run_gets_the_context_tags_mlflow_would_give_it_without_gitpython_when_it_finds_nothing(tmp_path, argv0):
    """``rag-exp run`` (``sys.argv[0]`` is the name Hydra shows, no path): MLflow's git context could
    only find nothing, and the logging process no longer imports GitPython to learn it; a script
    that exists (``python run.py``) is looked up as before. Either way the run's tags are those
    MLflow's full context resolution gives."""
    proc = _python(_CREATE_RUN, argv0, f"sqlite:///{tmp_path}/mlflow.db")
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["logged"] == seen["resolved"]
    if argv0 == "rag-exp run":
        assert not seen["git_imported"]
        assert not [t for t in seen["logged"] if t.startswith("mlflow.source.git")]
