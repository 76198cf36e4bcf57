"""One labelling depth: without -k, `golden label` labels to the cut-off of the objective the labels
serve (the pooled runs' with --pool / --sweep), the depth `--decide` labels and compare checks
judged@k at. Before, -k defaulted to 20 whatever the objective: recall@5 runs were pooled to their
top 20."""

from __future__ import annotations

from rag_experiments.golden.resolve import EvalCase
from rag_experiments.types import Hit

from ..conftest import FIXTURES
from ..tracking.conftest import _template_db, cli, store  # noqa: F401 - fixtures
from ..tracking.golden_runs import log_golden_run


def test_label_without_k_pools_to_the_objectives_depth(store, mini_golden, mini_docs, capsys):
    def run(case: EvalCase):  # the evidence first, then every document's title line (no case's evidence)
        s = case.relevant[0].span
        titles = [Hit(f"t{i}", d.doc_id, d.source_uri, d.doc_type, 0, 20, 1.0, i + 2) for i, d in enumerate(mini_docs)]
        return (Hit("e", s.doc_id, s.source_uri, case.doc_type, s.start, s.end, 2.0, 1), *titles)

    rid = log_golden_run(mini_golden, run, name="a")  # objective recall_at_5 (the default config)
    sets = ["--set", f"corpus.path={FIXTURES / 'mini_corpus'}", "--set", "corpus.name=mini"]
    base = ["golden", "label", "--golden", str(mini_golden), "--by-hand", "--pool", rid, "--dry-run", *sets]
    assert cli(*base) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "labelling depth 5: the cut-off of recall_at_5, the pooled runs' objective (-k to change it)" in out
    n = out.split(" cases: ")[0].split()[-1]
    assert f"{n} cases: {4 * int(n)} passage(s) to label" in out  # ranks 2-5; it pooled all {len(mini_docs)} titles
    assert cli(*base, "-k", "20") == 0
    assert f"{len(mini_docs) * int(n)} passage(s) to label" in capsys.readouterr().out
