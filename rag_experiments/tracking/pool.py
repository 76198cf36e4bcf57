"""Pooling (TREC's way of judging what several systems retrieved): the union of every listed
run's top k per case, from the ranked lists each run stored (``run.trec``), as hits with their
text, for :func:`rag_experiments.golden.label.plan_labelling`.

Each run contributes its own top k (depth-k pooling), or, where the budget is tight, the depth
TREC gives each run separately (``--per-run-depth RUN_ID=N``: a priority run pooled deeper, a
cheap one shallower; the depths are recorded in the pool's definition). The lists are interleaved by rank (every
run's rank 1, then every run's rank 2, ...), so a budget cut keeps the hits all runs rank
highest. Duplicates across runs and chunkings are dropped by labelling's own span rule: a span
overlapping one already judged or queued for the case is not judged again, so a chunk judged
under one chunking is not paid for again under another. A run's hit that is not a span of a
corpus document (an unplaced external passage) is left out.

The judge is told the language of the text (:func:`pool_language`): the ``corpus.language`` the
pooled runs were scored with (their tag; a run logged before the setting existed: english).
"""

from __future__ import annotations

import re
from typing import Callable, Mapping, Sequence

from ..errors import UserError
from ..evaluation import bounds as B
from ..evaluation.rescore import params_from_flat
from ..golden.resolve import GoldenSet
from .runs import RunView, get_run, search, sweep_children
from .versioned import load_ranked_lists


def pool_runs(run_ids: Sequence[str] = (), sweep: str | None = None) -> list[RunView]:
    runs = [get_run(r, per_case=False) for r in run_ids]
    if sweep:
        runs += [r for r in sweep_children(sweep, per_case=False) if r.status == "FINISHED"]
    if not runs:
        raise UserError("--pool: no runs to pool", hint="give run ids (--pool RUN_ID ...) or --sweep PARENT_ID")
    return runs


LANGUAGE_TAG = "corpus.language"  # rag_experiments.tracking.mlflow_run logs it as a tag and a param
NAMES_NO_LANGUAGE = ("english", "simple")  # the prompts' default; simple (no stemmer) names no language


def pool_language(runs: Sequence[RunView]) -> str:
    """The corpus.language of a pool's text, for the judge's prompt: the one language the runs'
    ``corpus.language`` names. A pool may hold strategies of one corpus under several
    configurations (english beside german for a German corpus: english and simple name no language
    and give way); two named languages (german and french) are refused with one line naming the
    runs, as a judge told the wrong language is silently wrong."""
    by_lang: dict[str, list[str]] = {}
    for r in runs:
        lang = r.tags.get(LANGUAGE_TAG) or r.params.get(LANGUAGE_TAG) or "english"
        by_lang.setdefault(lang, []).append(r.id)
    named = sorted(lang for lang in by_lang if lang.rsplit(".", 1)[-1] not in NAMES_NO_LANGUAGE)
    if len(named) > 1:
        listed = "; ".join(f"{lang}: {', '.join(by_lang[lang])}" for lang in named)
        raise UserError(f"--pool: the runs were scored in different corpus.language settings ({listed}); "
                        "the judge is told the one language the question and passages are in",
                        hint="pool the runs of one language (english runs of the same corpus may join them)")
    if named:
        return named[0]
    return "simple" if set(by_lang) == {"simple"} else "english"


def parse_depths(specs: Sequence[str], runs: Sequence[RunView]) -> dict[str, int]:
    """``RUN_ID=N`` (a run of the pool, N >= 1) -> {run id: N}; a clear error naming the bad one."""
    ids = {r.id for r in runs}
    out: dict[str, int] = {}
    for spec in specs:
        run_id, sep, depth = spec.partition("=")
        run_id = run_id.strip().lower()
        if not sep or not depth.strip().isdigit() or int(depth) < 1:
            raise UserError(f"--per-run-depth {spec!r}: expected RUN_ID=N with N >= 1",
                            hint="e.g. --per-run-depth 6d7c5ed8fd004abd8c1fbe0fa828e1ba=20")
        if run_id not in ids:
            raise UserError(f"--per-run-depth {spec!r}: run {run_id} is not in the pool",
                            hint="list it with --pool, or pool its sweep with --sweep")
        out[run_id] = int(depth)
    return out


def pooled_hits(runs: Sequence[RunView], k: int, docs: Sequence,
                depths: dict[str, int] | None = None) -> tuple[dict[str, list[dict]], dict]:
    """case id -> the pool's hits (dicts with the fields labelling needs), and the pool's definition.
    ``depths``: run id -> its own pool depth (others: ``k``)."""
    depths = depths or {}
    per_run = [depths.get(r.id, k) for r in runs]
    by_id = {d.doc_id: d for d in docs}
    lists = []
    for r in runs:
        ranked = load_ranked_lists(r)
        if ranked is None:
            raise UserError(f"run {r.id} ({r.label}) has no stored ranked lists (run.trec): it cannot be pooled",
                            hint="re-run its config (runs log run.trec since the golden-versions release)")
        lists.append(ranked)
    out: dict[str, list[dict]] = {}
    for case_id in sorted(set().union(*[set(x) for x in lists])):
        merged: list[dict] = []
        for rank in range(max(per_run)):
            for ranked, depth in zip(lists, per_run):
                if rank >= depth:
                    continue
                hits = ranked[case_id].hits if case_id in ranked else ()
                if rank < len(hits):
                    h = hits[rank]
                    d = by_id.get(h.doc_id)
                    if d is None or not 0 <= h.start < h.end <= len(d.text):
                        continue
                    merged.append({"chunk_id": h.chunk_id, "doc_id": d.doc_id, "source_uri": d.source_uri,
                                   "start": h.start, "end": h.end, "text": d.text[h.start:h.end],
                                   "doc_hash": d.content_hash, "rank": rank + 1})  # rank: its best in the pool
        out[case_id] = merged
    definition = {"runs": [r.id for r in runs], "k": k}
    if depths:
        definition["per_run_depth"] = {r.id: d for r, d in zip(runs, per_run)}
    return out, definition


# -- a decision's pool (golden label --decide A B) ----------------------------------------------
_HEX = re.compile(r"^[0-9a-fA-F]{32}$")


def decide_run(ref: str) -> RunView:
    """A run by id, or by name (the newest finished run of that name)."""
    if _HEX.match(ref.strip()):
        return get_run(ref, per_case=False)
    named = [r for r in search(f"attributes.run_name = '{ref.replace(chr(39), '')}'", per_case=False, order="DESC")
             if r.status == "FINISHED"]
    if not named:
        raise UserError(f"--decide {ref!r}: no finished run has that id or name",
                        hint="give a run id or a run name as compare's table shows it (e.g. retrieval=hybrid): "
                        "rag-exp compare --last-sweep lists the last sweep's runs, the MLflow UI every run and its id")
    return named[0]


def ranked_of(run: RunView) -> dict:
    ranked = load_ranked_lists(run)
    if ranked is None and sweep_children(run.id, per_case=False):
        raise UserError(f"run {run.id} ({run.label}) is a sweep's parent: its points have the ranked lists, it has none",
                        hint=f"--decide --sweep {run.id} (the sweep's best point against the points it cannot be "
                        "told from), or --decide with two of its points")
    if ranked is None:
        raise UserError(f"run {run.id} ({run.label}) has no stored ranked lists (run.trec): it cannot be rescored",
                        hint="re-run its config (runs log run.trec since the golden-versions release)")
    return ranked


def decide_views(golden: GoldenSet, run: RunView, ranked: Mapping, metric: str) -> dict[str, B.CaseView]:
    """The run's cases as the newest labels see them, to the metric's cut-off."""
    _name, k = B.metric_parts(metric)
    return B.views(golden, ranked, k, params_from_flat(run.params).min_coverage)


def doc_text_of(docs: Sequence) -> Callable[[str], str]:
    """passage key (doc_id:start-end) -> its text in the corpus ("" when it is not a span of it)."""
    by_id = {d.doc_id: d.text for d in docs}

    def text(key: str) -> str:
        doc, _, span = key.rpartition(":")
        start, _, end = span.partition("-")
        body = by_id.get(doc)
        if body is None or not (start.isdigit() and end.isdigit()):
            return ""
        return body[int(start):int(end)]

    return text
