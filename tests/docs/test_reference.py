"""The generated reference (devtools/docs_reference.py): nothing goes undocumented.

Every config key, every packaged group option, every ``rag-exp`` command and option, and every
metric name a real run logs must have documentation text; a new knob, option or metric without
it fails here (add a trailing comment in its YAML file or dataclass, a ``help=``, or a family in
docs_reference.metric_families()).
"""

from __future__ import annotations

import argparse
import dataclasses

import mlflow
from mlflow.tracking import MlflowClient

from devtools import docs_reference as D
from rag_experiments.config import Settings, settings_from_cfg

from ..test_config import _compose
from ..test_pipeline import _mini_overrides


def test_every_config_key_has_documentation_text():
    keys = D.config_keys()
    assert len(keys) > 90, len(keys)
    assert D.undocumented_config_keys() == [], (
        "config keys without documentation text: add a trailing comment on the key in its "
        "rag_experiments/conf/<group>/*.yaml file or on the field in its params dataclass")
    assert len({k.path for k in keys}) == len(keys)


def test_the_keys_are_the_whole_settings_tree_and_the_yaml_files_name_only_known_keys():
    paths = {k.path for k in D.config_keys()}
    assert {f.name for f in dataclasses.fields(Settings)} <= {p.split(".")[0] for p in paths}
    assert {"fusion.rrf_k", "retrieval.keyword.rank", "retrieval.hnsw.ef_search", "llm.provider", "objective",
            "eval.unjudged", "query.rewrite", "ingest.executor"} <= paths
    free = tuple(p + "." for p in paths if next(k for k in D.config_keys() if k.path == p).free_mapping)
    for opt in D.group_options():
        if opt.group == "experiment" or opt.group.startswith("hydra"):
            continue
        unknown = [p for p in opt.doc.values if p not in paths and not p.startswith(free)]
        assert not unknown, f"{opt.path}: {unknown}"


def test_every_packaged_group_option_has_a_description():
    assert D.undocumented_group_options() == [], "add a comment at the top of the option's YAML file"
    groups = {o.group for o in D.group_options()}
    assert {"chunking", "retrieval", "fusion", "rerank", "experiment", "hydra/launcher"} <= groups


def test_the_check_that_rejects_a_bad_value_comes_from_the_code():
    keys = {k.path: k for k in D.config_keys()}
    assert keys["chunking.name"].allowed == ("heading", "fixed", "paragraph")
    assert keys["eval.level"].allowed == ("chunk", "document")
    assert "fusion.rrf_k: must be > 0" in " ".join(m for _, m in keys["fusion.rrf_k"].rejections)
    # a check that spans groups (Settings.__post_init__) is found too
    assert any("below the largest eval k" in m for _, m in keys["fusion.depth"].rejections)
    assert keys["fusion.rrf_k"].type == "int" and keys["fusion.rrf_k"].default == 60
    assert ("convex", "convex") in keys["fusion.method"].option_values


def test_a_missing_comment_or_help_is_detected():
    doc = D.parse_yaml_comments("# header\nname: x   # the name\nnested:\n  a: 1\n  # above b\n  b: 2\n", "g.")
    assert doc.header == "header"
    assert doc.keys == {"g.name": "the name", "g.nested.b": "above b"}
    assert doc.values == {"g.name": "x", "g.nested.a": 1, "g.nested.b": 2}
    parser = argparse.ArgumentParser(prog="tool")
    sub = parser.add_subparsers()
    p = sub.add_parser("go", help="does it")
    p.add_argument("--fast", help="quickly")
    p.add_argument("--slow")
    sub.add_parser("bare")
    docs = D._commands(parser, "tool")
    missing = [c.name for c in docs[1:] if not (c.help or c.description)]
    missing += [f"{c.name}: {o[0]}" for c in docs for o in c.options if not o[1]]
    assert sorted(missing) == ["tool bare", "tool go: --slow SLOW"]


def test_every_command_and_option_has_help():
    cmds = D.commands()
    names = {c.name for c in cmds}
    assert {"rag-exp golden add", "rag-exp compare", "rag-exp db start", "rag-exp run"} <= names, names
    assert D.undocumented_commands() == [], "add help= to the add_parser / add_argument call"
    assert sum(len(c.options) for c in cmds) > 100


def test_every_metric_family_has_text():
    fams = D.metric_families()
    assert all(f.text.strip() for f in fams), [f.pattern for f in fams if not f.text.strip()]
    from rag_experiments.tracking.run_record import RESULT_EXTRAS

    # the measures' texts are their registry entries' descriptions (evaluation/measures.py): checked above
    assert set(RESULT_EXTRAS) <= set(D.RESULT_TEXT)


def test_every_metric_a_real_run_logs_is_documented(project, mini_golden):
    from rag_experiments.experiment import run_experiment
    from rag_experiments.pipeline import log_result

    # every family a plain run can log: bpref on, all intervals as metrics
    cfg = _compose(_mini_overrides(mini_golden, "eval.bpref=true", "tracking.log_intervals=true",
                                   "tracking.plots=false"))
    result = run_experiment(settings_from_cfg(cfg))
    run_id = log_result(result, cfg, "docs")
    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    logged = sorted(MlflowClient().get_run(run_id).data.metrics)
    assert {"recall_at_5", "recall_at_5.exact", "recall_at_5.doc_type.config", "bpref", "n_cases",
            "recall_at_5.ci_low"} <= set(logged)
    unmatched = [n for n in logged if D.metric_family(n) is None]
    assert not unmatched, f"logged metrics no family in docs_reference.metric_families() documents: {unmatched}"
    # what a sweep's parent logs from such children (rag_experiments.tracking.sweep_parent)
    from rag_experiments.tracking.runs import RunView
    from rag_experiments.tracking.sweep_parent import best_per_segment

    child = RunView(run_id, "docs", "FINISHED", "0", 0, {}, MlflowClient().get_run(run_id).data.metrics, {})
    parent, _ = best_per_segment([child], "recall_at_5")
    assert "recall_at_5.exact" in parent
    unmatched = [n for n in parent if D.metric_family(n, where=("sweep parent",)) is None]
    assert not unmatched, f"a sweep parent's metrics without a documented family: {unmatched}"
    diag = mlflow.artifacts.load_dict(f"runs:/{run_id}/diagnostics.json")
    names = D.flatten_diagnostics(diag)
    assert any(n.startswith("time_s.") for n in names) and any(n.startswith("cache.") for n in names)
    undocumented = [n for n in names if D.metric_family(n, where=("diagnostics.json",)) is None]
    assert not undocumented, f"diagnostics.json entries without a documented family: {undocumented}"
    print(f"{len(logged)} logged metric names, {len(names)} diagnostics, all documented")


def test_the_pages_render():
    config, cli, metrics = D.render("config"), D.render("cli"), D.render("metrics")
    assert "#### `fusion.rrf_k`\n" in config and "[`rrf_k`](#fusionrrf_k)" in config  # a contents table per group
    assert "### `rag-exp golden add`\n" in cli and "`--debug`" in cli
    assert "`recall_at_<k>`" in metrics and "`ann_recall_at_depth`" in metrics
    # GitHub-readable: no attr_list ids, no backslash inside a code span of a table cell
    assert "{ #" not in config + cli + metrics
    assert "\\|`" not in config + cli and "<code>str &#124; None</code>" not in config


def test_the_committed_reference_pages_are_what_the_code_generates():
    """docs/reference/{config,cli,metrics}.md hold the generated text (they read on GitHub); a change
    to a YAML comment, a help= or a params dataclass without re-running the generator fails here."""
    stale = D.stale_pages()
    assert not stale, f"{stale} differ from the code: run python -m devtools.docs_reference --write"


def test_the_generated_markdown_keeps_examples_pipes_and_items_apart():
    """issue 48 item 8, on the Markdown: the gate's examples are a block of lines, a pipe in a
    table's code span is an entity (GitHub and Python-Markdown both show |), the launcher's
    header items are lines of their own and its continuation lines are not shown as commands."""
    cli = D.render("cli")
    gate = cli[cli.index("### `rag-exp gate`"):]
    assert "```text\nrag-exp gate --run-now" in gate and "\nrag-exp gate --run RUN_ID\n" in gate
    compare = cli[cli.index("### `rag-exp compare`"):]
    assert '--markdown >> "$GITHUB_STEP_SUMMARY"' in compare and "&gt;&gt;" not in compare
    assert "<code>--corpus demo&#124;FOLDER</code>" in cli
    launcher = next(o for o in D.group_options() if o.group == "hydra/launcher" and o.name == "basic")
    assert launcher.doc.examples == ()
    assert "\n* n_jobs:" in launcher.doc.header and "cost confirmation), the others" in launcher.doc.header
    beir = next(o for o in D.group_options() if o.group == "experiment" and o.name == "beir")
    assert any(e.startswith("python run.py experiment=beir") and e.endswith("golden.jsonl") for e in beir.doc.examples)
