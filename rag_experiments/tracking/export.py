"""Export a logged run as TREC files, so trec_eval / ir_measures / pytrec_eval can re-score it.

Written to ``OUT`` (default ``exports/<run id>/`` under the project root):

``run.trec``
    ``qid Q0 docid rank score tag``, one line per ranked document, from the run's per-case table
    column :data:`RANKED_DOCS` (the doc ids of the top 100 hits in rank order, as evaluate.py
    logs them; for a document-level run each document once). ``scores="rank"`` (default)
    writes ``score = n - rank + 1``: evaluators sort by score and break ties by doc id, so only
    strictly decreasing scores reproduce our order exactly. ``scores="logged"`` writes the
    retrieval scores of an optional :data:`RANKED_SCORES` column (ties may then reorder).
``qrels.trec``
    ``qid 0 docid grade`` from the run's golden set, resolved as evaluation resolves it (retired
    cases out, judgements applied, stale evidence out), with the golden grades (2 = YES,
    1 = PART, 0 = judged not relevant). These are the grades our nDCG uses, so our metrics
    equal trec_eval's on ``run.trec`` + ``qrels.trec``.
``qrels.original.trec``
    when the golden set was imported from a benchmark (evidence carries ``qrel_gain``): the
    collection's own gains (Cranfield: ``5 - grade``), for the graded numbers a published
    trec_eval run would give. Recall and reciprocal rank are the same on both qrels files (the
    same documents are relevant); nDCG differs.

``qid`` is the benchmark's query id when the case has one (``benchmark.query_id``), else the
case id. The golden file is found through the run's ``config.yaml`` artifact (``golden.path``,
relative to the project root) and must have the sha256 the run logged (tag
``golden_sha256``), or have grown from it (the run's version is a prefix of the file: the
qrels are then that prefix's labels); exporting labels the run was not scored against is refused. Only
document-level runs (``eval.level=document``) are exported: at chunk level our relevance is
span overlap, which document qrels cannot express.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd
import yaml

from ..errors import GoldenSetError, UserError
from ..golden.records import Case
from ..golden.resolve import GoldenSet, load_golden
from ..golden.versions import GoldenVersion, NotAnAncestor, locate
from ..paths import project_root, tracking_uri
from .runs import client

RANKED_DOCS = "ranked_docs"
RANKED_SCORES = "ranked_scores"
PER_CASE_ARTIFACT = "per_case.json"
CONFIG_ARTIFACT = "config.yaml"
_RUN_ID = re.compile(r"^[0-9a-fA-F]{32}$")
_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]")


@dataclass
class ExportReport:
    run_id: str
    out: Path
    files: dict[str, Path] = field(default_factory=dict)
    queries: int = 0
    run_lines: int = 0
    qrels_lines: int = 0
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"run {self.run_id}: {self.queries} queries, {self.run_lines} ranked documents, "
                 f"{self.qrels_lines} qrels lines -> {self.out}"]
        lines += [f"  {role:15s} {path}" for role, path in self.files.items()]
        run, qrels = self.files.get("run"), self.files.get("qrels")
        if run and qrels:
            lines.append(f"  score: trec_eval -c -m ndcg_cut.10 -m recall.100 -m recip_rank {qrels} {run}")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _check_token(value: str, what: str) -> str:
    if not value or any(c.isspace() for c in value):
        raise UserError(f"{what} {value!r} is empty or contains whitespace: it cannot be written to a TREC file")
    return value


def query_ids(golden: GoldenSet) -> dict[str, str]:
    """case id -> TREC query id (the benchmark's own id when the case carries one)."""
    out: dict[str, str] = {}
    for rec in golden.records:
        if isinstance(rec, Case):
            bench = rec.raw.get("benchmark")
            qid = str(bench["query_id"]) if isinstance(bench, dict) and "query_id" in bench else rec.id
            out[rec.id] = _check_token(qid, f"query id of case {rec.id}")
    return out


def _as_list(value) -> list:
    if isinstance(value, str):
        value = json.loads(value)
    if value is None or (isinstance(value, float) and value != value):
        return []
    return list(value)


def trec_run_lines(per_case: pd.DataFrame, qid_of: Mapping[str, str], tag: str, scores: str = "rank") -> list[str]:
    """``qid Q0 docid rank score tag`` lines from a per-case table with a ``ranked_docs`` column."""
    if RANKED_DOCS not in per_case.columns:
        raise UserError(
            f"the run's per-case table has no {RANKED_DOCS!r} column (the ranked document ids); "
            f"it has: {', '.join(map(str, per_case.columns))}",
            hint="re-run the experiment with a version that logs ranked_docs (top5_docs holds only 5)")
    if scores not in ("rank", "logged"):
        raise UserError(f"scores must be 'rank' or 'logged', got {scores!r}")
    if scores == "logged" and RANKED_SCORES not in per_case.columns:
        raise UserError(f"scores=logged needs a {RANKED_SCORES!r} column in the per-case table")
    tag = _check_token(tag, "run tag")
    lines: list[str] = []
    seen_q: set[str] = set()
    for row in per_case.itertuples(index=False):
        case_id = getattr(row, "case_id")
        if case_id not in qid_of:
            raise GoldenSetError(f"case {case_id} of the run is not in its golden set")
        qid = qid_of[case_id]
        if qid in seen_q:
            raise UserError(f"query id {qid} appears twice in the run's per-case table")
        seen_q.add(qid)
        docs = [str(d) for d in _as_list(getattr(row, RANKED_DOCS))]
        if len(set(docs)) != len(docs):
            raise UserError(f"case {case_id}: a document appears twice in {RANKED_DOCS}; only "
                            "document-level runs (eval.level=document) can be exported")
        logged = [float(s) for s in _as_list(getattr(row, RANKED_SCORES))] if scores == "logged" else []
        n = len(docs)
        for i, doc in enumerate(docs):
            _check_token(doc, f"document id (case {case_id})")
            score = f"{logged[i]:.6f}" if scores == "logged" else str(n - i)
            lines.append(f"{qid} Q0 {doc} {i + 1} {score} {tag}")
    return lines


def trec_qrels_lines(golden: GoldenSet, qid_of: Mapping[str, str], case_ids: Iterable[str],
                     grades: str = "golden") -> tuple[list[str], list[str]]:
    """``qid 0 docid grade`` lines for ``case_ids`` and warnings.

    ``grades="golden"``: the resolved golden grades, per document the highest of its spans;
    ``"original"``: the ``qrel_gain`` of each imported evidence entry (an error when missing).
    """
    cases = {c.case_id: c for c in golden.cases}
    records = {r.id: r.raw for r in golden.records if isinstance(r, Case)}
    lines, warnings = [], []
    multi = 0
    for cid in case_ids:
        if cid not in cases:
            raise GoldenSetError(f"case {cid} of the run is not (or no longer) in golden set {golden.path}")
        case = cases[cid]
        qid = qid_of[cid]
        per_doc: dict[str, int] = {}
        if grades == "golden":
            counts: dict[str, int] = {}
            for ev in case.judged:
                doc = _check_token(ev.span.doc_id, f"document id (case {cid})")
                per_doc[doc] = max(per_doc.get(doc, 0), ev.grade)
                counts[doc] = counts.get(doc, 0) + (ev.grade > 0)
            multi += any(n > 1 for n in counts.values())
        elif grades == "original":
            for i, ev in enumerate(records[cid]["evidence"]):
                if "qrel_gain" not in ev:
                    raise GoldenSetError(f"case {cid} evidence[{i}] has no qrel_gain: the golden set was not "
                                         "imported from a benchmark")
                per_doc[ev["doc_id"]] = max(per_doc.get(ev["doc_id"], 0), int(ev["qrel_gain"]))
        else:
            raise UserError(f"grades must be 'golden' or 'original', got {grades!r}")
        lines += [f"{qid} 0 {doc} {g}" for doc, g in per_doc.items()]
    if multi:
        warnings.append(f"{multi} cases have several relevant spans in one document: document qrels merge them "
                        "(highest grade), so trec_eval numbers will differ from the logged span-level ones")
    return lines, warnings


def has_original_grades(golden: GoldenSet, case_ids: Iterable[str]) -> bool:
    records = {r.id: r.raw for r in golden.records if isinstance(r, Case)}
    return all("qrel_gain" in ev for cid in case_ids for ev in records[cid]["evidence"])


def golden_for_run(config: Mapping, tags: Mapping[str, str], run_id: str) -> GoldenSet:
    """The run's golden set as the run scored it: the file when its sha256 is the one the run
    logged, else the run's version found as a prefix of the grown file (the labels appended
    since do not apply); refused when the run's version is not an ancestor of the file."""
    try:
        rel = config["golden"]["path"]
    except (KeyError, TypeError):
        raise UserError(f"run {run_id}: its {CONFIG_ARTIFACT} has no golden.path") from None
    path = Path(str(rel)).expanduser()
    path = path if path.is_absolute() else project_root() / path
    if not path.is_file():
        raise GoldenSetError(f"run {run_id}: golden set {path} (golden.path in its {CONFIG_ARTIFACT}) does not exist",
                             hint="run the export from the run's project root (or set RAG_EXP_HOME)")
    expected = tags.get("golden_sha256")
    if not expected:
        raise UserError(f"run {run_id} has no golden_sha256 tag: cannot tell which golden-set version scored it")
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    if actual == expected:
        return load_golden(path)

    try:
        return locate(path, GoldenVersion.from_tags(tags))  # the file grew since the run: its prefix
    except NotAnAncestor as exc:
        raise GoldenSetError(
            f"golden set {path} has sha256 {actual[:16]}..., but run {run_id} was scored against "
            f"{expected[:16]}...: refusing to export qrels the run was not evaluated with ({exc})",
            hint="check out the golden file's version from that run (git log -- FILE), or export a newer run") from None


def write_trec(per_case: pd.DataFrame, golden: GoldenSet, out: Path, *, run_id: str, tag: str,
               scores: str = "rank") -> ExportReport:
    """Write run.trec, qrels.trec (and qrels.original.trec for an imported benchmark) to ``out``."""
    qid_of = query_ids(golden)
    case_ids = [str(c) for c in per_case["case_id"]]
    run_lines = trec_run_lines(per_case, qid_of, tag, scores)
    qrels, warnings = trec_qrels_lines(golden, qid_of, case_ids, "golden")
    report = ExportReport(run_id, out, queries=len(case_ids), run_lines=len(run_lines), qrels_lines=len(qrels),
                          warnings=warnings)
    empty = [qid_of[c] for c, docs in zip(case_ids, per_case[RANKED_DOCS]) if not _as_list(docs)]
    if empty:
        report.warnings.append(f"{len(empty)} queries retrieved nothing (no run lines): score with trec_eval -c "
                               f"so they count as 0, as in the logged metrics ({', '.join(empty[:5])})")
    out.mkdir(parents=True, exist_ok=True)
    files = {"run": (out / "run.trec", run_lines), "qrels": (out / "qrels.trec", qrels)}
    if has_original_grades(golden, case_ids):
        original, _ = trec_qrels_lines(golden, qid_of, case_ids, "original")
        files["qrels_original"] = (out / "qrels.original.trec", original)
    for role, (path, lines) in files.items():
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        report.files[role] = path
    return report


# -- reading the run from MLflow ------------------------------------------------------------------
def _client():
    return client()  # the shared opener: it also closes runs whose process died (ownership.py)


def _artifact_text(c, run_id: str, name: str) -> str | None:
    if name not in {f.path for f in c.list_artifacts(run_id)}:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        return Path(c.download_artifacts(run_id, name, tmp)).read_text(encoding="utf-8")


def per_case_table(text: str) -> pd.DataFrame:
    data = json.loads(text)
    if not isinstance(data, dict) or "columns" not in data or "data" not in data:
        raise UserError(f"{PER_CASE_ARTIFACT}: not a table written by mlflow.log_table")
    return pd.DataFrame(data["data"], columns=data["columns"])


def export_run(run_id: str, out: str | Path | None = None, fmt: str = "trec", *, tag: str | None = None,
               scores: str = "rank") -> ExportReport:
    """Export one MLflow run (of the store :func:`tracking_uri` names) as TREC files."""
    from mlflow.exceptions import MlflowException

    if fmt != "trec":
        raise UserError(f"unknown export format {fmt!r}; supported: trec")
    run_id = run_id.strip().lower()
    if not _RUN_ID.match(run_id):
        raise UserError(f"{run_id!r} is not an MLflow run id (32 hex characters)")
    c = _client()
    try:
        run = c.get_run(run_id)
    except MlflowException:
        raise UserError(f"run {run_id} not found in {tracking_uri()}",
                        hint="is MLFLOW_TRACKING_URI (or RAG_EXP_HOME) pointing at the right store?") from None
    tags = dict(run.data.tags)
    if run.info.status != "FINISHED":
        why = tags.get("rag_exp.killed_reason")
        raise UserError(f"run {run_id} is {run.info.status}" + (f" ({why})" if why else "")
                        + ", not FINISHED: its per-case table may be partial or missing")
    config_text = _artifact_text(c, run_id, CONFIG_ARTIFACT)
    if config_text is None:
        raise UserError(f"run {run_id} has no {CONFIG_ARTIFACT} artifact")
    config = yaml.safe_load(config_text) or {}
    level = tags.get("eval_level") or (config.get("eval") or {}).get("level", "chunk")
    if level != "document":
        raise UserError(f"run {run_id} was evaluated at {level} level; only eval.level=document runs can be "
                        "exported as TREC runs (chunk-level relevance is span overlap, not document qrels)")
    golden = golden_for_run(config, tags, run_id)
    table = _artifact_text(c, run_id, PER_CASE_ARTIFACT)
    if table is None:
        raise UserError(f"run {run_id} logged no {PER_CASE_ARTIFACT}",
                        hint="tracking.log_per_case must be true for the run")
    per_case = per_case_table(table)
    out_dir = Path(out).expanduser() if out else project_root() / "exports" / run_id
    name = run.info.run_name or ""
    tag = tag or (_TAG_UNSAFE.sub("_", name)[:60] if name else f"rag-exp-{run_id[:8]}")
    return write_trec(per_case, golden, out_dir, run_id=run_id, tag=tag, scores=scores)

