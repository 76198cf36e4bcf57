"""The config tree as typed values: each Hydra config group *is* the frozen dataclass it builds.

:class:`Settings` is the root, registered in Hydra's ConfigStore as ``base_config``; its fields
are the groups' params dataclasses (``ChunkingParams``, ``FusionParams``, ``HnswParams`` ...), each
the one place its knobs are declared, defaulted and checked (``__post_init__`` raises a
ConfigError naming the key). OmegaConf rejects wrong *types* at composition;
:func:`settings_from_cfg` rejects unknown keys, then ``OmegaConf.to_object`` builds the
dataclasses (each checking its values) and ``Settings.__post_init__`` checks what spans groups.
A new knob is a dataclass field (plus its line in the group's YAML, where that file lists its
knobs). Below this module nothing imports hydra or omegaconf.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import sys
import typing
import warnings
from dataclasses import dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import Any, Sequence

import yaml

from .cache_key import canonical_json
from .chunk_index import HnswParams
from .chunking import ChunkingParams
from .corpus.copies import COPIES_MODES
from .embedding.options import EmbeddingParams
from .errors import ConfigError
from .redaction import redact_text
from .evaluation.evaluate import EvalParams
from .evaluation.metric_key import MetricKey
from .llm import LLMParams
from .paths import project_path  # where a project's files are: one module (paths.py)
from .retrieval.external_params import ExternalParams, HttpParams, StoredParams
from .retrieval.filters import Filters
from .retrieval.fusion import FusionParams
from .retrieval.legs import KeywordParams, VectorSearchParams
from .retrieval.query_rewrite import QueryParams
from .retrieval.rerank import RerankParams
from .retrieval.retriever import RetrievalParams
from .retrieval.systems import system_type
from .scale.executors import IngestParams

# A text search configuration's name as corpus.language takes it: a bare or schema-qualified
# SQL identifier (whether PostgreSQL has it is checked against pg_ts_config before the ingest).
_LANGUAGE_NAME = re.compile(r"^(?:[a-z_][a-z0-9_$]*\.)?[a-z_][a-z0-9_$]*$")


@dataclass(frozen=True)
class CorpusParams:
    path: str = "demo"  # 'demo' = the shipped corpus, else a folder of .md files
    name: str | None = "demo"  # the database keys documents by corpus name
    # the PostgreSQL text search configuration of the keyword leg (stemming, stop words), its BM25
    # statistics and RM3: english, german, french, spanish, simple... (rag-exp corpus languages)
    language: str = "english"
    # documents that are mostly copies of others (rag_experiments.corpus.copies): report (find and
    # report them, index everything), exclude (index without them), keep (do not look)
    copies: str = "report"
    copy_threshold: float = 0.8  # a copy: at least this share of its words is in 5-word runs of kept documents

    def __post_init__(self) -> None:
        if not isinstance(self.language, str) or not _LANGUAGE_NAME.match(self.language):
            raise ConfigError(f"corpus.language: {self.language!r} is not a text search configuration name "
                              "(lower-case, e.g. english, german, french, simple; rag-exp corpus languages lists them)")
        if self.copies not in COPIES_MODES:
            raise ConfigError(f"corpus.copies: {self.copies!r} is not one of {', '.join(COPIES_MODES)}")
        if not 0 < self.copy_threshold <= 1:
            raise ConfigError(f"corpus.copy_threshold: {self.copy_threshold!r} must be in (0, 1] "
                              "(the share of a document's text found in others that makes it a copy; default 0.8)")


@dataclass(frozen=True)
class RetrievalConfig:
    """The ``retrieval`` group. With ``fusion`` and ``rerank`` it makes the Retriever's
    :class:`RetrievalParams` (:attr:`Settings.retriever_params`), which checks ``variant``."""

    variant: str = "hybrid"  # the retrieval system: one of rag_experiments/retrieval/systems/ (presets: conf/retrieval/)
    keyword: KeywordParams = field(default_factory=KeywordParams)
    filters: Filters = field(default_factory=Filters)
    hnsw: HnswParams = field(default_factory=HnswParams)
    vector: VectorSearchParams = field(default_factory=VectorSearchParams)  # exact scan or HNSW (auto: by size)
    use_cache: bool = True
    external: ExternalParams = field(default_factory=ExternalParams)  # variant=external: a team's Python target
    http: HttpParams = field(default_factory=HttpParams)  # variant=http: a team's search service
    stored: StoredParams = field(default_factory=StoredParams)  # variant=stored: a run file (rag-exp import-run)

    def __post_init__(self) -> None:
        if not self.filters.is_empty() and not system_type(self.variant).filters:
            raise ConfigError(f"retrieval.filters: apply to the built-in variants only, not {self.variant!r} "
                              "(a team's system filters itself: pass its filter in its params)")


@dataclass(frozen=True)
class GoldenParams:
    path: str = "experiments/golden/demo.jsonl"

    @property
    def file(self) -> Path:
        return project_path(self.path)


@dataclass(frozen=True)
class DbParams:
    url: str | None = None  # None: $DATABASE_URL, else the embedded server
    pgdata: str | None = None  # embedded server data folder (default .rag-exp/pgdata)

    @property
    def pgdata_dir(self) -> Path | None:
        return project_path(self.pgdata) if self.pgdata else None


@dataclass(frozen=True)
class TrackingParams:
    enabled: bool = True
    uri: str | None = None  # None: $MLFLOW_TRACKING_URI, else sqlite under ./mlruns
    experiment: str = "rag-experiments"
    log_per_case: bool = True
    plots: bool = True
    child_plots: bool = False  # per-run plots for each sweep point (they cost ~1 s a point)
    sweep_summary: bool = True  # at the end of a sweep: comparison plots + table on the parent run
    log_intervals: bool = False  # every 95% interval as metrics too (default: the objective's; all in intervals.json)


@dataclass(frozen=True)
class Settings:
    """The whole config tree (``settings.fusion.rrf_k`` is ``fusion.rrf_k``)."""

    corpus: CorpusParams = field(default_factory=CorpusParams)
    chunking: ChunkingParams = field(default_factory=ChunkingParams)
    embedding: EmbeddingParams = field(default_factory=EmbeddingParams)
    ingest: IngestParams = field(default_factory=IngestParams)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    fusion: FusionParams = field(default_factory=FusionParams)
    rerank: RerankParams = field(default_factory=RerankParams)
    golden: GoldenParams = field(default_factory=GoldenParams)
    eval: EvalParams = field(default_factory=EvalParams)
    db: DbParams = field(default_factory=DbParams)
    tracking: TrackingParams = field(default_factory=TrackingParams)
    query: QueryParams = field(default_factory=QueryParams)  # the query side: LLM rewriting (retrieval.query_rewrite)
    llm: LLMParams = field(default_factory=LLMParams)  # the API of rerank=llm and query.rewrite (llm.provider, base_url)
    objective: str = "recall_at_5"
    run_name: str | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        """The checks that span groups (each group checks its own values)."""
        # the llm node reaches the two users of an LLM (they check what needs a model name)
        object.__setattr__(self, "rerank", replace(self.rerank, llm=self.llm))
        object.__setattr__(self, "query", replace(self.query, llm=self.llm))
        largest_k = max(self.eval.ks)
        if self.fusion.depth < largest_k:
            raise ConfigError(
                f"fusion.depth: {self.fusion.depth} is below the largest eval k ({largest_k}); "
                f"recall@{largest_k} would be capped. Set fusion.depth >= {largest_k}"
            )
        self.retriever_params  # noqa: B018 - checks retrieval.variant (and fusion.engine with it)
        if MetricKey.parse(self.objective).on(None) not in self.eval.metric_keys():
            raise ConfigError(f"objective: {self.objective!r} is not a logged metric; choose one of "
                              f"{', '.join(self.eval.metric_names())} (optionally with a .segment suffix)")

    @property
    def retriever_params(self) -> RetrievalParams:
        r = self.retrieval
        return RetrievalParams(variant=r.variant, keyword=r.keyword, fusion=self.fusion, rerank=self.rerank,
                               filters=r.filters, ef_search=r.hnsw.ef_search, use_cache=r.use_cache,
                               query=self.query, vector=r.vector)


@cache
def schema() -> Any:
    """``Settings`` as an OmegaConf node that Hydra can merge into: frozen dataclasses make
    read-only nodes, so the flag is cleared (``to_object`` still builds frozen values)."""
    from omegaconf import OmegaConf

    return _writable(OmegaConf.structured(Settings))


def register_schema() -> None:
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="base_config", node=schema())
    quiet_schema_matching()


def quiet_schema_matching() -> None:
    """conf/hydra/launcher/{ray,basic}.yaml and conf/hydra/sweeper/basic.yaml share their names
    with Hydra's structured configs (the Ray launcher plugin's; Hydra's basic sweeper and
    launcher, replaced on purpose: they compose each sweep point once), so Hydra validates ours
    against those schemas (same keys) and warns on every composition that such matching is
    deprecated. They are the names users type: keep them, without the warning."""
    warnings.filterwarnings("ignore", message=r"(?s).*'hydra/(launcher/ray|launcher/basic|sweeper/basic)' is "
                            "validated against ConfigStore schema")


def reject_unknown_keys(c: dict, node: type = Settings, prefix: str = "") -> None:
    """A key the schema does not know is a typo, never a setting: Hydra's own hint for
    ``fusion.rrfk=3`` is ``+fusion.rrfk=3``, which appends the key and leaves ``rrf_k`` at its
    default while the run logs ``fusion.rrfk=3``. ConfigError names the key (and the closest known)."""
    hints = typing.get_type_hints(node)
    known = [f.name for f in dataclasses.fields(node) if not f.metadata.get("omegaconf_ignore")]
    for key, value in c.items():
        path = f"{prefix}{key}"
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {prefix}{close[0]}?" if close else f"known keys: {', '.join(known)}"
            where = prefix.rstrip(".") or "the top level"
            raise ConfigError(f"{path}: unknown key ({where} has no {key!r}; {hint})")
        sub = hints[key]
        if dataclasses.is_dataclass(sub) and isinstance(value, dict):
            reject_unknown_keys(value, sub, f"{path}.")


#: config keys holding free mappings (a team's own knobs): any key below them is accepted
FREE_MAPPINGS = ("retrieval.external.params.", "retrieval.external.init.", "retrieval.http.params.")


def free_mapping_overrides(overrides: list[str]) -> list[str]:
    """``retrieval.external.params.chunk_size=256`` as Hydra must read it: ``++`` (add or
    override), since a key of a free mapping is in no schema and usually in no YAML file
    (Hydra's struct mode refuses it without ``+``, and ``+`` refuses a key that exists)."""
    out = []
    for arg in overrides:
        if arg.startswith(FREE_MAPPINGS):
            arg = "++" + arg
        elif arg.startswith("+") and not arg.startswith("++") and arg[1:].startswith(FREE_MAPPINGS):
            arg = "+" + arg
        out.append(arg)
    return out


def check_override_keys(overrides: list[str], conf_dir: Path | Sequence[Path]) -> None:
    """Command-line overrides of keys the schema does not know, in the same one-line form as
    :func:`reject_unknown_keys` (Hydra itself prints a multi-line hint to append the key with
    ``+``, which would be accepted and ignored); a group option that does not exist
    (``retrieval=nosuch``); and a value of the wrong type (``fusion.rrf_k=abc``: Hydra's own
    five-line message, exit 1). ``hydra.*`` and ``+``/``~`` overrides are left to Hydra and to the
    check of the composed config; values are checked as OmegaConf would convert them into the
    schema, every value of a sweep (``-m fusion.rrf_k=30,abc``) alike."""
    dirs = [conf_dir] if isinstance(conf_dir, Path) else list(conf_dir)
    groups = {p.name for d in dirs if d.is_dir() for p in d.iterdir() if p.is_dir()}
    for arg in overrides:
        if arg.lstrip("+").startswith(FREE_MAPPINGS):
            continue  # a team's own knob: any name, any value
        m = re.match(r"([A-Za-z_][\w.]*)=", arg)
        if not m or m.group(1).startswith("hydra."):
            continue
        key = m.group(1)
        if key in groups:
            _check_group_option(key, arg[m.end():], dirs)
            for line in pinned_keys(key, arg[m.end():], overrides, dirs):
                print(f"warning: {redact_text(line)}", file=sys.stderr)  # a preset's or option's value may be a secret
            continue
        nested: dict = {}
        node = nested
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = None
        reject_unknown_keys(nested)
        _check_override_type(arg, key)


def _override_values(arg: str) -> list | None:
    """The value(s) Hydra's grammar reads from ``arg`` (each element of a choice/range sweep), or
    None when it is not a plain value to check here (an interval sweep, an interpolation). An
    override Hydra cannot parse (a mis-quoted value) is a ConfigError in one line; the caller
    prints it redacted (it may quote a password)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        ov = OverridesParser.create().parse_override(arg)
    except HydraException as exc:
        raise ConfigError(f"{arg}: cannot be parsed ({describe_hydra_error(exc)})",
                          hint="quote a value holding spaces, '=' or '?' as key='value' (and the whole "
                          "override for the shell: \"key='value'\")") from None
    try:
        values = list(ov.sweep_iterator()) if ov.is_sweep_override() else [ov.value()]
    except Exception:  # noqa: BLE001 - an interval sweep (Optuna): not a list of values
        return None
    values = [_plain(v) for v in values]
    if any(isinstance(v, str) and "${" in v for v in values):
        return None
    return values


def _plain(value):
    """A swept element as the value Hydra will set: a quoted element of a choice sweep
    (``a=1,'b c'``) comes as a QuotedString, which OmegaConf would read as a mapping."""
    from hydra.core.override_parser.types import QuotedString

    if isinstance(value, QuotedString):
        return value.text
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _check_override_type(arg: str, key: str) -> None:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    values = _override_values(arg)
    for value in values or ():
        nested: dict = {}
        node = nested
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
        try:
            OmegaConf.merge(schema(), nested)
        except OmegaConfBaseException as exc:
            reason = (str(exc).strip().splitlines() or [""])[0]
            raise ConfigError(f"{key}: {reason}") from None


def _check_group_option(group: str, raw: str, dirs: Sequence[Path]) -> None:
    """``group=option`` names a file <conf>/<group>/<option>.yaml in one of the config folders
    (the packaged ones and the project's; every option of a sweep too)."""
    values = _override_values(f"{group}={raw}")
    if values is None:
        return
    known = sorted({p.stem for d in dirs for p in (d / group).glob("*.yaml")})
    for value in values:
        if value is None or not isinstance(value, str):
            continue
        if not any((d / group / f"{value}.yaml").is_file() for d in dirs):
            import difflib

            close = difflib.get_close_matches(value, known, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ConfigError(f"{group}={value}: no such option ({hint}options of {group}: {', '.join(known)})")


def pinned_keys(group: str, raw: str, overrides: Sequence[str], dirs: Sequence[Path]) -> list[str]:
    """``group=option`` with an ``experiment=X`` whose file sets keys of ``group`` itself: Hydra applies the
    preset after the groups, so its keys win over the option's, and that was silent (``gate --run-now --set
    retrieval=keyword`` on ``experiment=promoted`` measured hybrid: a new user's trial, 2026-12-07). A line
    per option naming the keys the preset keeps and the overrides that set them. A warning, not an error:
    often the preset's value is the one wanted (``experiment=cranfield fusion=convex`` keeps Cranfield's
    fusion.depth=200 for recall@100)."""
    lines: list[str] = []
    presets = [v for a in overrides if (m := re.match(r"\+?experiment=(.+)$", a))
               for v in (_override_values(f"experiment={m.group(1)}") or []) if isinstance(v, str)]
    for preset in presets:
        path = next((d / "experiment" / f"{preset}.yaml" for d in dirs if (d / "experiment" / f"{preset}.yaml").is_file()),
                    None)
        try:
            pinned = (yaml.safe_load(path.read_text()) or {}).get(group) if path is not None else None
        except (OSError, yaml.YAMLError):
            continue  # an unreadable preset: Hydra's own error follows
        if not isinstance(pinned, dict) or not pinned:
            continue
        for option in _override_values(f"{group}={raw}") or []:
            if not isinstance(option, str):
                continue
            opt_path = next((d / group / f"{option}.yaml" for d in dirs if (d / group / f"{option}.yaml").is_file()), None)
            try:
                own = (yaml.safe_load(opt_path.read_text()) or {}) if opt_path is not None else {}
            except (OSError, yaml.YAMLError):
                own = {}
            lost = {k: v for k, v in own.items() if k in pinned and pinned[k] != v and not isinstance(v, dict)}
            if lost:
                direct = " ".join(f"{group}.{k}={v}" for k, v in lost.items())
                kept = ", ".join(f"{group}.{k}={pinned[k]}" for k in lost)
                lines.append(f"{group}={option}: experiment={preset} sets {kept} itself, and a preset's own keys win "
                             f"over a group's option, so the run keeps {'it' if len(lost) == 1 else 'them'}; to use "
                             f"{group}={option}'s, set {direct}")
    return lines


def describe_hydra_error(exc: BaseException) -> str:
    """One line for a Hydra or OmegaConf composition error (their messages run to several lines:
    the full key, the object type, the available options)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    first = lines[0]
    if any(line.startswith("Available options") for line in lines):
        i = next(i for i, line in enumerate(lines) if line.startswith("Available options"))
        first += f" ({lines[i].rstrip(':')}: {', '.join(lines[i + 1:])})"
    full_key = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("full_key:")), None)
    return f"{full_key}: {first}" if full_key else first


def exit_on_unknown_override_keys(argv: list[str], conf_dir: Path | Sequence[Path]) -> None:
    """For ``run.py``: before Hydra composes anything, one ``error:`` line and exit 2."""
    try:
        check_override_keys([a for a in argv if not a.startswith("-")], conf_dir)
    except ConfigError as exc:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)


def settings_from_cfg(cfg: Any) -> Settings:
    """Reject unknown keys, then build the typed settings: every group checks its values, then
    :class:`Settings` what spans groups; ConfigError names the offending key."""
    from omegaconf import OmegaConf

    # the hydra node (present with return_hydra_config) holds job-time interpolations: skip it
    c = {k: OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k]) else cfg[k]
         for k in cfg if k != "hydra"}
    reject_unknown_keys(c)
    if any(k in _GROUP_TYPES and not isinstance(v, dict) for k, v in c.items()):
        return OmegaConf.to_object(OmegaConf.merge(schema(), c))  # a group that is not a mapping: OmegaConf's own error
    groups = {k: _typed_group(k, v) for k, v in c.items() if k in _GROUP_TYPES}
    scalars = {k: v for k, v in c.items() if k in _TOP_FIELDS}
    top = OmegaConf.to_object(OmegaConf.merge(_node(_TopLevel), scalars))
    return Settings(**groups, **{k: getattr(top, k) for k in scalars})


@dataclass
class _TopLevel:
    """Settings' scalar fields, typed and converted the way the full schema does."""

    objective: str = "recall_at_5"
    run_name: str | None = None
    progress: bool = True


_TOP_FIELDS = frozenset(f.name for f in fields(_TopLevel))
_GROUP_TYPES = {f.name: f.default_factory for f in fields(Settings) if f.name not in _TOP_FIELDS}
_GROUPS: dict[tuple[str, str], Any] = {}


def _typed_group(name: str, value: dict) -> Any:
    """One group's frozen dataclass from its plain values. A sweep point changes one or two groups:
    the others are reused (built once per distinct value; merging the whole schema cost ~30 ms a
    point). Same conversions and errors as merging the whole tree, group by group."""
    from omegaconf import OmegaConf

    try:
        key = (name, canonical_json(value))
    except (TypeError, ValueError):  # not JSON-able (NaN): build it, do not memoise
        key = None
    built = _GROUPS.get(key) if key else None
    if built is None:
        built = OmegaConf.to_object(OmegaConf.merge(_node(_GROUP_TYPES[name]), value))
        if key:
            if len(_GROUPS) >= 512:
                _GROUPS.clear()
            _GROUPS[key] = built
    return built


@cache
def _node(cls: type) -> Any:
    """``cls`` as a writable structured node (see :func:`schema`)."""
    from omegaconf import OmegaConf

    return _writable(OmegaConf.structured(cls))


def _writable(node: Any) -> Any:
    from omegaconf import OmegaConf

    OmegaConf.set_readonly(node, None)
    for key in node:
        if OmegaConf.is_dict(node[key]):
            _writable(node[key])
    return node
