"""The case explorer: two runs' cases side by side, the cases the pair differs on first.

For a baseline A and a candidate B scored on one golden set, every shared case shows its
question, kind and segment (doc type), its evidence passage(s) with the labelled span
highlighted, and both runs' top k (k of the compared metric, recall_at_5 -> 5) side by side:
each hit's text excerpt, its verdict under the golden set's labels (relevant / partial / not /
unjudged, by the overlap rule evaluation credits with, :mod:`rag_experiments.span_match`), its
rank in the other run's list, and who gave the label (the case's author, a person, an LLM judge).
Cases are ordered lost first (B below A on the metric, the largest loss first), then won (the
largest win first), then tied, the same win/tie/loss split as compare's W/T/L
(:func:`rag_experiments.stats.paired.win_tie_loss`).

Inputs are what a run logs: ``per_case.json`` (the per-case metric), ``run.trec`` (the ranked
lists as character spans), the golden set at the run's version (:func:`.export.golden_for_run`)
and the corpus the run's config names (the text the spans index into). The page itself is
:mod:`.explorer_page`. ``rag-exp compare`` logs it to the candidate run as
``explorer/cases_vs_<baseline id>.html``; ``rag-exp explore A B`` writes the same page to a file.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd
import yaml

from ..corpus.loader import load_corpus
from ..errors import UserError
from ..evaluation.metric_key import MetricKey
from ..golden.records import Case, Judgement
from ..golden.resolve import GoldenSet
from ..paths import project_path
from ..span_match import matches
from ..types import RankedList
from .compare import run_labels
from .explorer_page import page_html
from .export import golden_for_run
from .runs import RunView, client, load_config_text
from .ui_links import line, run_route
from .versioned import load_ranked_lists

#: characters of a hit's text shown, and of the document around an evidence span
EXCERPT_CHARS = 320
CONTEXT_CHARS = 160
#: how deep the other run's list is searched for a hit's rank there
OTHER_DEPTH = 100
#: compare's tolerance for a tie (stats.paired.win_tie_loss)
TIE_EPS = 1e-12
EXPLORER_DIR = "explorer"


def artifact_path(baseline_id: str) -> str:
    """Where the page for ``(baseline, this run)`` lives among the candidate run's artifacts."""
    return f"{EXPLORER_DIR}/cases_vs_{baseline_id[:8]}.html"


@dataclass(frozen=True)
class Side:
    """One run's part: its name, per-case table and ranked lists (None when it stored none)."""

    label: str
    per_case: pd.DataFrame
    ranked: Mapping[str, RankedList] | None


class _Table:
    """Strings stored once and referred to by index (a passage both runs retrieved, a judge's name)."""

    def __init__(self) -> None:
        self.items: list = []
        self.index: dict = {}

    def add(self, key, value) -> int:
        if key not in self.index:
            self.index[key] = len(self.items)
            self.items.append(value)
        return self.index[key]


def provenance_of(golden: GoldenSet) -> dict[str, str]:
    """Label reference (``<case id>#<i>`` or a judgement id) -> who labelled it, as a line."""
    out: dict[str, str] = {}
    for r in golden.records:
        if isinstance(r, Case):
            prov = r.raw.get("provenance") or {}
            who = prov.get("method") or "unknown"
            for i in range(len(r.evidence)):
                out[f"{r.id}#{i}"] = f"the case's evidence ({who}{', ' + prov['author'] if prov.get('author') else ''})"
        elif isinstance(r, Judgement):
            judge = r.raw.get("judge") or {}
            name = judge.get("name") or judge.get("model") or ""
            out[r.id] = f"a judgement by {r.judge_kind}{': ' + name if name else ''}"
    return out


def _verdict(judged, doc_id: str, start: int, end: int, min_coverage: float):
    """(grade, label ref) of the best label in ``judged`` (a case's live labels) covering the hit
    (relevant before partial before not), or (None, None): unjudged."""
    found = [e for e in judged
             if matches(doc_id, start, end, e.span.doc_id, e.span.start, e.span.end, min_coverage)]
    if not found:
        return None, None
    best = max(found, key=lambda e: e.grade)
    return best.grade, best.ref


class _OtherList:
    """The other run's list for one case, searched for a hit's rank there: the same span first (a
    dict, built once per case), else the first hit of the same document that covers it by the
    overlap rule."""

    def __init__(self, other: RankedList | None) -> None:
        self.hits = other.hits[:OTHER_DEPTH] if other is not None else None
        self.exact: dict = {}
        for i, h in enumerate(self.hits or (), start=1):
            self.exact.setdefault((h.doc_id, h.start, h.end), i)

    def rank(self, hit, min_coverage: float) -> int | None:
        if self.hits is None:
            return None
        found = self.exact.get((hit.doc_id, hit.start, hit.end))
        if found is not None:
            return found
        doc = hit.doc_id
        for i, h in enumerate(self.hits, start=1):  # in list order: the first that covers it
            if h.doc_id == doc and matches(h.doc_id, h.start, h.end, doc, hit.start, hit.end, min_coverage):
                return i
        return None


def _number(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def explorer_data(a: Side, b: Side, golden: GoldenSet, texts: Mapping[str, str], metric: str,
                  min_coverage: float = 0.5) -> dict:
    """The page's data: the shared cases (ordered lost, won, tied; see the module's docstring),
    passages and label provenance stored once. ``texts``: doc id -> document text (may be empty:
    hits then show no excerpt). Pure: no MLflow, no files."""
    key = MetricKey.parse(metric)
    k = key.k or 5
    if key.column not in a.per_case or key.column not in b.per_case:
        raise UserError(f"the case explorer needs {key.column} in both runs' per-case tables")
    cases_by_id = {c.case_id: c for c in golden.cases}
    prov_text = provenance_of(golden)
    passages, provs = _Table(), _Table()
    # plain dicts: a pandas row lookup per case was most of a 10,000-case page's 15 s build
    wanted = ("case_id", "query", "kind", "doc_type", "first_relevant_rank", key.column)
    a_rows = {r["case_id"]: r for r in a.per_case[[c for c in wanted if c in a.per_case]].to_dict("records")}
    b_rows = {r["case_id"]: r for r in b.per_case[[c for c in wanted if c in b.per_case]].to_dict("records")}
    shared = [cid for cid in a_rows if cid in b_rows]

    def passage(doc_id: str, start: int, end: int) -> int:
        found = passages.index.get((doc_id, start, end))
        if found is not None:
            return found
        text = texts.get(doc_id)
        excerpt = (None if text is None
                   else text[start:min(end, start + EXCERPT_CHARS)] + ("…" if end - start > EXCERPT_CHARS else ""))
        return passages.add((doc_id, start, end), [doc_id, start, end, excerpt])

    def prov(ref: str | None) -> int | None:
        # stored once per distinct line (hundreds of judgements share a judge)
        return None if ref is None or ref not in prov_text else provs.add(prov_text[ref], prov_text[ref])

    def hits(side: Side, other: Side, judged, cid: str, seen: dict):
        """``seen``: the case's spans already placed (both lists often hold the same passage)."""
        if side.ranked is None:
            return None, False
        mine = side.ranked.get(cid)
        theirs = _OtherList(other.ranked.get(cid) if other.ranked is not None else None)
        out, unjudged = [], False
        for rank, h in enumerate(mine.hits[:k] if mine else (), start=1):
            span = (h.doc_id, h.start, h.end)
            if span not in seen:
                grade, ref = _verdict(judged, h.doc_id, h.start, h.end, min_coverage)
                seen[span] = (passage(*span), grade, prov(ref))
            at, grade, by = seen[span]
            unjudged = unjudged or grade is None
            out.append([at, grade, theirs.rank(h, min_coverage), by, rank])
        return out, unjudged

    rows = []
    for cid in shared:
        ra, rb = a_rows[cid], b_rows[cid]
        va, vb = _number(ra[key.column]), _number(rb[key.column])
        d = (vb - va) if va is not None and vb is not None else 0.0
        outcome = "won" if d > TIE_EPS else "lost" if d < -TIE_EPS else "tied"
        case = cases_by_id.get(cid)
        judged = case.judged if case else ()  # a property that builds a tuple: once per case
        seen: dict = {}
        hits_a, unj_a = hits(a, b, judged, cid, seen)
        hits_b, unj_b = hits(b, a, judged, cid, seen)
        evidence = []
        for e in (case.relevant if case else ()):
            text = texts.get(e.span.doc_id)
            s, t = e.span.start, e.span.end
            if text is not None and 0 <= s < t <= len(text):
                before, quote, after = text[max(0, s - CONTEXT_CHARS):s], text[s:t], text[t:t + CONTEXT_CHARS]
            else:
                before, quote, after = "", e.span.quote, ""
            evidence.append([e.span.doc_id, s, t, e.grade, ("…" if s > CONTEXT_CHARS else "") + before, quote,
                             after + ("…" if text is not None and t + CONTEXT_CHARS < len(text) else ""), prov(e.ref)])
        rows.append({"id": cid, "q": str(ra.get("query", case.query if case else "")),
                     "kind": str(ra.get("kind", "")), "seg": str(ra.get("doc_type", "")),
                     "a": va, "b": vb, "d": round(d, 6), "o": outcome, "u": unj_a or unj_b,
                     "fa": _rank(ra.get("first_relevant_rank")), "fb": _rank(rb.get("first_relevant_rank")),
                     "ev": evidence, "A": hits_a, "B": hits_b})
    order = {"lost": 0, "won": 1, "tied": 2}
    # lost: the largest loss first; won: the largest win first; tied: as the golden set lists them
    rows.sort(key=lambda r: (order[r["o"]], -abs(r["d"])))
    counts = {o: sum(r["o"] == o for r in rows) for o in order}
    return {"cases": rows, "passages": passages.items, "provenance": provs.items, "labels": [a.label, b.label],
            "metric": key.column, "k": k, "counts": counts, "other_depth_label": f"the top {OTHER_DEPTH}",
            "kinds": sorted({r["kind"] for r in rows}), "segments": sorted({r["seg"] for r in rows})}


def _rank(v) -> int | None:
    f = _number(v)
    return None if f is None else int(f)


def render(data: dict) -> str:
    a, b = data["labels"]
    c = data["counts"]
    title = f"Cases: {b} vs {a} (baseline)"
    sub = (f"{data['metric']} per case: {c['lost']} lost, {c['won']} won, {c['tied']} tied of {len(data['cases'])} "
           f"(W/T/L {c['won']}/{c['tied']}/{c['lost']}); lost first, the largest difference first; "
           f"top {data['k']} of each run, each hit's verdict under the golden set's labels")
    return page_html(data, title, sub)


# -- from logged runs -----------------------------------------------------------------------------
def _corpus_texts(run: RunView) -> dict[str, str]:
    """doc id -> text of the corpus the run's config names; {} when it cannot be read here (the
    page then shows the spans without text)."""
    path = run.params.get("corpus.path")
    if not path:
        return {}
    try:
        docs = load_corpus(path if path == "demo" else str(project_path(path)), run.params.get("corpus.name") or None)
    except Exception:  # noqa: BLE001 - a corpus moved or unreadable: the page still shows ranks and labels
        return {}
    return {d.doc_id: d.text for d in docs}


class Baseline:
    """What every page of one baseline shares, read once: its golden set (at its version), corpus
    text, ranked lists and overlap rule."""

    def __init__(self, run: RunView, c) -> None:
        if run.per_case is None:
            raise UserError(f"run {run.id} ({run.label}) has no per-case table (per_case.json): no case explorer")
        self.run, self.c = run, c
        config = yaml.safe_load(load_config_text(run.id, c)) or {}
        self.golden = golden_for_run(config, run.tags, run.id)
        self.texts = _corpus_texts(run)
        self.ranked = load_ranked_lists(run, c)
        self.min_coverage = _number(run.params.get("eval.min_coverage")) or 0.5

    def page(self, cand: RunView, metric: str, labels: tuple[str, str]) -> tuple[str, dict]:
        if cand.per_case is None:
            raise UserError(f"run {cand.id} ({cand.label}) has no per-case table (per_case.json): no case explorer")
        data = explorer_data(Side(labels[0], self.run.per_case, self.ranked),
                             Side(labels[1], cand.per_case, load_ranked_lists(cand, self.c)),
                             self.golden, self.texts, metric, self.min_coverage)
        return render(data), data


def runs_page(base: RunView, cand: RunView, metric: str, c=None,
              labels: tuple[str, str] | None = None) -> tuple[str, dict]:
    """The page for two logged runs (their per-case tables as given: compare passes them aligned
    on one golden version) and its data. ``labels``: the runs' names as compare's table gives
    them (default: the params that differ, :func:`.compare.run_labels`)."""
    c = c or client()
    return Baseline(base, c).page(cand, metric, labels or tuple(run_labels([base, cand])))


def log_page(c, run_id: str, name: str, page: str) -> None:
    with tempfile.TemporaryDirectory(prefix="rag_exp_explorer_") as tmp:
        (Path(tmp) / Path(name).name).write_text(page, encoding="utf-8")
        c.log_artifact(run_id, str(Path(tmp) / Path(name).name), str(Path(name).parent))


#: pages one compare logs at most (a 100-point sweep: the baseline against the first 10 others)
MAX_PAGES = 10


def log_pairs(runs: Sequence[RunView], metric: str, c=None,
              labels: Sequence[str] | None = None) -> list[tuple[RunView, str | None, str | None]]:
    """The baseline (``runs[0]``) against each other run (at most :data:`MAX_PAGES`), each page
    logged to that run: (run, artifact path or None, why not). ``labels``: the runs' names in
    compare's table, in the same order."""
    c = c or client()
    labels = list(labels or run_labels(runs))
    try:
        base = Baseline(runs[0], c)
    except UserError as exc:
        return [(r, None, str(exc)) for r in runs[1:MAX_PAGES + 1]]
    out = []
    for i, r in enumerate(runs[1:MAX_PAGES + 1], start=1):
        try:
            page, _ = base.page(r, metric, (labels[0], labels[i]))
            name = artifact_path(runs[0].id)
            log_page(c, r.id, name, page)
            out.append((r, name, None))
        except UserError as exc:
            out.append((r, None, str(exc)))
    return out


def compare_lines(cmp, c=None) -> list[str]:
    """What ``rag-exp compare`` prints after its table: for each run against the baseline, the
    link to its case explorer beside its W/T/L (the page lists those cases, lost first), or why
    there is none. Logs the pages (:func:`log_pairs`)."""
    rows = list(cmp.rows)
    c = c or client()
    out = []
    for (run, path, why), row in zip(log_pairs([r.run for r in rows], cmp.primary, c, [r.label for r in rows]), rows[1:]):
        what = f"{row.label} vs {rows[0].label}"
        if path is None:
            out.append(f"no case explorer for {what}: {why}")
            continue
        wtl = f"W/T/L {row.wtl} " if row.wtl is not None else ""
        out.append(line(f"the cases behind {wtl}of {what} (lost first)", run_route(run.experiment_id, run.id, path),
                        c.tracking_uri))
    if len(rows) > MAX_PAGES + 1:
        out.append(f"case explorers: the baseline against the first {MAX_PAGES} runs of {len(rows) - 1} "
                   "(rag-exp explore BASELINE RUN for another pair)")
    return out


def sweep_lines(cmp, best: RunView, parent_id: str, c=None) -> list[str]:
    """A sweep's best point against each other point (at most :data:`MAX_PAGES`), each page logged
    to the sweep parent as ``explorer/best_vs_<point>.html``; the Markdown line for the parent's
    description that links them (relative links: the description is read inside MLflow's UI).
    Never fails the sweep: a page that cannot be built is left out, a failure is one printed line."""
    rows = list(cmp.rows)
    best_row = next((r for r in rows if r.run.id == best.id), None)
    if best_row is None or len(rows) < 2:
        return []
    c = c or client()
    try:
        base = Baseline(best_row.run, c)
    except UserError:
        return []  # no golden file or per-case table here: the sweep has no pages to show
    links = []
    try:
        for row in [r for r in rows if r.run.id != best.id][:MAX_PAGES]:
            try:
                page, data = base.page(row.run, cmp.primary, (best_row.label, row.label))
            except UserError:
                continue
            name = f"{EXPLORER_DIR}/best_vs_{row.run.id[:8]}.html"
            log_page(c, parent_id, name, page)
            n = data["counts"]
            links.append(f"[`{row.label}`]({run_route(row.run.experiment_id, parent_id, name)}) "
                         f"(W/T/L {n['won']}/{n['tied']}/{n['lost']})")
    except Exception as exc:  # noqa: BLE001 - the pages are a convenience, the sweep is logged
        print(f"warning: could not log the case explorers to {parent_id}: {exc}")
    if not links:
        return []
    return [f"Cases side by side, `{best_row.label}` against each point (the cases each lost first): "
            + ", ".join(links) + "."]
