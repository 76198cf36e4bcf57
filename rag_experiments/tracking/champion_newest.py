"""The champion's value on the newest golden version: its stored ranked lists rescored.

A champion keeps the metrics it was promoted with, measured on the golden version of its day (the
value of record). When the golden set grows (cases appended, labels added or superseded), every
later run is measured on a newer version, and the two numbers sit side by side in the runs list
and in promote's and the gate's tables while measuring different things. So wherever the
champion's value of record is shown, its value on the **newest** version is shown next to it:
its ranked lists (``run.trec``) scored against the current golden file by
:func:`rag_experiments.evaluation.rescore.rescore`, on the cases the two versions share (cases
added since were never retrieved by the champion; retired ones are out), with the newest labels.

Where the ranked lists come from: the champion's run in this store (artifact ``run.trec``), else
the committed ``experiments/promoted/<name>.run.trec.gz`` that promote writes beside the record
(so a fresh clone, whose store never saw the run, still has them). A champion promoted before
promote kept them has neither: it is then said so, never shown with a number it does not have.

* :func:`on_newest`: the rescoring (None when the champion was measured on the newest version);
* :func:`refresh_ui`: the tags of the champion's run in the runs list (its stand-in's, for a
  champion of record) and of its registry version: ``on_newest_golden`` (a column of the
  opening view) and the provenance (``newest.*``: golden version, cases, source of the lists);
  then the champion's name, which says first when its value of record is not comparable
  (:func:`name_prefix`, :mod:`.champion_mark`).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

import yaml

from ..errors import GoldenSetError
from ..evaluation.metric_key import metric_title
from ..evaluation.rescore import params_from_flat, rescore
from ..evaluation.runfile import ARTIFACT, parse_run_file
from ..golden.resolve import load_golden
from ..golden.versions import GoldenVersion, NotAnAncestor
from ..paths import project_root
from .champion import ALIAS, PROMOTED_DIR, Champion, current_champion, model_name, promoted_file
from .champion_mark import champion_prefix, mark_champion
from .configured import headline_metrics
from .runs import client
from .versioned import candidate_files, find_chain, load_ranked_lists

RANKED_SUFFIX = ".run.trec.gz"
#: the runs list's column (ui_links.VIEW_TAGS) and the provenance tags beside it
TAG = "on_newest_golden"
PREFIX = "newest."
MEASURED_ON_NEWEST = "measured on the newest golden version"


def ranked_path(name: str, *, for_writing: bool = False) -> Path:
    """The champion's ranked lists committed beside its record: ``experiments/promoted/<stem>.run.trec.gz``
    (champion.promoted_file: named for the model)."""
    return promoted_file(name, RANKED_SUFFIX, for_writing=for_writing)


def write_ranked(name: str, text: str, depth: int) -> Path:
    """Keep the first ``depth`` hits of each case of a ``run.trec`` text (what the metrics read),
    gzipped with no timestamp (the same lists give the same bytes)."""
    kept = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[3].isdigit() and int(parts[3]) <= depth:
            kept.append(" ".join(parts[:5] + ["champion"]))
    path = ranked_path(name, for_writing=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(("\n".join(kept) + "\n").encode("utf-8"), mtime=0))
    return path


@dataclass(frozen=True)
class OnNewest:
    """The champion on the newest golden version. ``metrics`` is None when it could not be
    rescored (``reason`` says why)."""

    newest_sha: str
    newest_records: int
    measured_sha: str  # the version of the value of record
    measured_records: int | None
    metrics: dict[str, float] | None = field(default=None, repr=False)
    cases: int = 0  # shared cases scored
    total: int = 0  # the newest version's scorable cases
    source: str = ""  # where the ranked lists came from
    reason: str = ""

    def value(self, key: str) -> float | None:
        return None if self.metrics is None else self.metrics.get(key)

    def where(self) -> str:
        return f"golden {self.newest_sha[:12]} ({self.newest_records} records)"

    def cell(self, metric: str) -> str:
        """The runs list's column, the value first (MLflow's column shows about 12 characters):
        ``0.7960 = recall@5 on golden 1a2b3c4d5e6f (2589 records), 230 shared cases``."""
        v = self.value(metric)
        if v is None:
            return f"not rescored on {self.where()}: {self.reason.split(':')[0]}"
        return f"{v:.4f} = {metric_title(metric)} on {self.where()}, {self.cases} shared cases"

    def line(self, metric: str, record_value: float | None) -> str:
        """One sentence: the value of record, where it was measured, and the value on the newest version."""
        measured = f"golden {self.measured_sha[:12]}" + (f" ({self.measured_records} records)"
                                                          if self.measured_records is not None else "")
        head = (f"the champion's {metric_title(metric)} of record"
                + (f", {record_value:.4f}," if record_value is not None else "") + f" was measured on {measured}")
        v = self.value(metric)
        if v is None:
            return f"{head}; on the newest version, {self.where()}, it is not rescored: {self.reason}"
        added = self.total - self.cases
        return (f"{head}; on the newest version, {self.where()}, it is {v:.4f} on the {self.cases} cases the "
                f"versions share (newest labels; rescored from {self.source}"
                + (f"; {added} case(s) added since were never retrieved by it" if added > 0 else "") + ")")

    def tags(self, metric: str, headline: tuple[str, ...] = ()) -> dict[str, str]:
        out = {TAG: self.cell(metric)[:5000], PREFIX + "golden_sha256": self.newest_sha,
               PREFIX + "golden_records": str(self.newest_records), PREFIX + "cases": str(self.cases),
               PREFIX + "rescored_from": self.source or "-"}
        for key in dict.fromkeys((metric, *headline)):
            v = self.value(key)
            if v is not None:
                out[PREFIX + key] = f"{v:.6f}"
        return out


def _flat_config(champion: Champion) -> dict[str, str]:
    """The champion's logged params; for a champion of record (no params), the golden path and
    the ``eval`` group of its committed ``experiments/promoted/<name>.yaml``, flattened alike."""
    if champion.run.params:
        return dict(champion.run.params)

    path = promoted_file(champion.name, ".yaml")
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, ValueError):
        return {}
    out: dict[str, str] = {}
    golden = (config.get("golden") or {}).get("path") if isinstance(config, dict) else None
    if golden:
        out["golden.path"] = str(golden)
    for key, value in ((config.get("eval") or {}) if isinstance(config, dict) else {}).items():
        out[f"eval.{key}"] = json.dumps(value) if isinstance(value, (list, dict)) else str(value)
    return out


def eval_params(flat: Mapping[str, str]):
    """The champion's EvalParams: cutoffs by :func:`params_from_flat`, and the settings that change a
    score besides them (``level``, ``unjudged``)."""
    p = params_from_flat(flat)
    changes = {k: flat[f"eval.{k}"] for k in ("level", "unjudged") if flat.get(f"eval.{k}") not in (None, "", "None")}
    return replace(p, **changes) if changes else p


def champion_ranked(champion: Champion, c=None):
    """(case id -> ranked list, where they came from), or (None, why there are none)."""
    ranked = load_ranked_lists(champion.run, c)
    if ranked is not None:
        return ranked, f"run {champion.run.id[:12]} {ARTIFACT}"
    path = ranked_path(champion.name)
    if path.is_file():
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
        rel = path.relative_to(project_root()) if path.is_relative_to(project_root()) else path
        return parse_run_file(text, str(rel)), str(rel)
    return None, (f"no ranked lists: run {champion.run.id[:12]} is not in this store and {PROMOTED_DIR}/"
                  f"{champion.name}{RANKED_SUFFIX} does not exist (promoted before promote kept them; promote "
                  f"again, or re-run it: rag-exp run experiment=promoted)")


def on_newest(champion: Champion | None, c=None) -> OnNewest | None:
    """The champion rescored on the newest version of its golden file (see the module docstring);
    None when it was measured on the newest version, or recorded no version."""
    if champion is None:
        return None
    version = GoldenVersion.from_tags(champion.run.tags)
    if version is None:
        return None
    flat = _flat_config(champion)
    probe = champion.run if champion.run.params else _with_params(champion.run, flat)
    try:
        path, _ = find_chain([version], candidate_files([probe]))
        newest = load_golden(path)
    except (NotAnAncestor, GoldenSetError, OSError):
        return None  # compare, promote and the gate say why the versions do not chain
    if newest.digest == version.sha256:
        return None
    base = OnNewest(newest.digest, len(newest.records), version.sha256, version.records, total=len(newest.scorable))
    ranked, source = champion_ranked(champion, c)
    if ranked is None:
        return _replace(base, reason=source)
    result, _missing = rescore(newest, ranked, eval_params(flat))
    metrics = {k: float(v) for k, v in result.metrics.items() if isinstance(v, (int, float))}
    return _replace(base, metrics=metrics, cases=int(result.n_cases), source=source)


def _file_digest(champion: Champion) -> str | None:
    """sha256 of the champion's golden file as it is now (the version a run on it records)."""
    flat = _flat_config(champion)
    probe = champion.run if champion.run.params else _with_params(champion.run, flat)
    for path in candidate_files([probe]):
        if path.is_file():
            return hashlib.sha256(path.read_bytes()).hexdigest()
    return None


def _replace(x: OnNewest, **changes) -> OnNewest:
    return replace(x, **changes)


def _with_params(run, flat: Mapping[str, str]):
    return replace(run, params=dict(flat))


def refresh_ui(name: str = "default", c=None) -> OnNewest | None:
    """Tag the champion's row in the runs list (the run behind alias ``champion``: its stand-in for a
    champion of record) and its registry version with its value on the newest golden version
    (:data:`TAG` and the ``newest.*`` provenance); a champion measured on the newest version gets
    ``on_newest_golden`` = :data:`MEASURED_ON_NEWEST`. Then mark it by name where it sits
    (:func:`.champion_mark.mark_champion`), the name saying first when its value of record is not
    comparable (:func:`name_prefix`). Returns what it tagged."""
    from mlflow.exceptions import MlflowException

    c = c or client()
    try:
        mv = c.get_model_version_by_alias(model_name(name), ALIAS)
    except MlflowException:
        return None
    champion = current_champion(name, c)
    if champion is None or not mv.run_id:
        return None
    current = c.get_run(mv.run_id).data.tags
    found = None
    # tagged for the golden file as it is: nothing grew since (a hash, not a rescoring)
    if not (current.get(TAG) and _file_digest(champion) in (current.get(PREFIX + "golden_sha256"), champion.run.golden)):
        found = on_newest(champion, c)
        metric = champion.metric or "recall_at_5"
        tags = {TAG: MEASURED_ON_NEWEST} if found is None else found.tags(metric, tuple(headline_metrics(champion.run)))
        for k, v in tags.items():
            if current.get(k) != v:
                c.set_tag(mv.run_id, k, v)
                c.set_model_version_tag(mv.name, mv.version, k, v)
        current = {**current, **tags}
    mark_champion(c, mv.run_id, name_prefix(current, champion.run.golden))
    return found


def name_prefix(tags: Mapping[str, str], measured_sha: str | None) -> str:
    """The champion's name prefix from its :data:`TAG`: ``champion: `` when measured on the newest
    golden version; else what makes its value of record not comparable, first
    (``champion (older golden d1895783, not rescored): ``, ``champion (older golden d1895783;
    0.7960 on the newest): ``)."""
    cell = tags.get(TAG, "")
    if not cell or cell == MEASURED_ON_NEWEST:
        return champion_prefix()
    older = f"older golden {str(measured_sha or '?')[:8]}"
    if cell.startswith("not rescored"):
        return champion_prefix(f"{older}, not rescored")
    return champion_prefix(f"{older}; {cell.split(' ', 1)[0]} on the newest")
