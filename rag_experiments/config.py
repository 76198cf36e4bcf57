"""The Hydra structured-config schema, and its conversion to plain typed settings.

Two layers on purpose: the schema (OmegaConf-typed dataclasses, registered in Hydra's
ConfigStore as ``base_config``) rejects wrong *types* at composition time; converting it
with :func:`settings_from_cfg` into the frozen value dataclasses of the lower layers rejects
wrong *values* (``rrf_k <= 0``, negative weights, ``depth`` below the largest k, unknown
variant) before any work starts, with a message naming the key. Below this module nothing
imports hydra or omegaconf.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .chunking import ChunkingParams
from .embedding.options import EmbeddingOptions
from .embedding.base import check_embedder_name
from .errors import ConfigError
from .evaluation.evaluate import EvalParams
from .evaluation.metric_key import MetricKey
from .retrieval.filters import Filters
from .retrieval.fusion import FusionParams
from .retrieval.legs import KeywordParams
from .retrieval.rerank import RerankParams
from .scale.executors import IngestParams
from .retrieval.retriever import RetrievalParams
from .store import HnswParams


# -- schema (what Hydra composes) ---------------------------------------------------------------
@dataclass
class CorpusSchema:
    path: str = "demo"  # 'demo' = the shipped corpus, else a folder of .md files
    name: Optional[str] = None


@dataclass
class ChunkingSchema:
    name: str = "heading"
    max_tokens: int = 200
    overlap: int = 0
    breadcrumbs: bool = True


@dataclass
class EmbeddingSchema:
    name: str = "minilm-onnx"  # minilm-onnx | st:<model or path> | voyage | openai
    batch_size: int = 16
    # API embedders (embedding=voyage / embedding=openai); keys come from the environment only
    model: str = ""
    dimensions: Optional[int] = None
    input_types: bool = True
    base_url: Optional[str] = None
    query_prefix: str = ""
    document_prefix: str = ""
    price_per_mtok: Optional[float] = None
    confirm: bool = True
    max_batch_texts: Optional[int] = None
    max_batch_tokens: Optional[int] = None
    max_retries: int = 4
    timeout: float = 60.0


@dataclass
class IngestSchema:
    executor: str = "local"  # local | ray: who embeds the documents (ingest.executor=ray: a Ray cluster)
    ray_address: Optional[str] = None  # None: $RAY_ADDRESS, else a local Ray


@dataclass
class KeywordSchema:
    tsquery: str = "or"
    rank: str = "ts_rank"  # ts_rank | ts_rank_cd | bm25
    normalization: int = 1  # ts_rank's
    identifier_boost: float = 1.0
    k1: float = 0.9  # bm25's (Anserini's defaults)
    b: float = 0.4


@dataclass
class FiltersSchema:
    doc_types: list[str] = field(default_factory=list)
    source_uri_prefix: Optional[str] = None


@dataclass
class HnswSchema:
    m: int = 16
    ef_construction: int = 64
    ef_search: Optional[int] = None  # None: max(40, depth)


@dataclass
class RetrievalSchema:
    variant: str = "hybrid"
    keyword: KeywordSchema = field(default_factory=KeywordSchema)
    filters: FiltersSchema = field(default_factory=FiltersSchema)
    hnsw: HnswSchema = field(default_factory=HnswSchema)
    use_cache: bool = True


@dataclass
class FusionSchema:
    rrf_k: int = 60
    vector_weight: float = 1.0
    keyword_weight: float = 1.0
    depth: int = 50
    engine: str = "python"


@dataclass
class RerankSchema:
    name: str = "maxsim"
    model: str = ""
    cutoff: int = 20
    base_url: Optional[str] = None  # rerank=voyage / cohere: another endpoint (a test stub)
    price: Optional[float] = None  # voyage: USD per million tokens; cohere: USD per 1,000 searches
    max_retries: int = 4


@dataclass
class GoldenSchema:
    path: str = "experiments/golden/demo.jsonl"


@dataclass
class EvalSchema:
    ks: list[int] = field(default_factory=lambda: [5, 20])
    mrr_k: int = 10
    ndcg_k: int = 10
    judged_k: int = 10
    min_coverage: float = 0.5
    level: str = "chunk"  # chunk | document (collapse chunk hits to documents: benchmarks)
    bootstrap_samples: int = 1000
    seed: int = 13
    ann_recall_queries: int = 50  # queries for the vector leg's ANN recall vs exact KNN (0: skip)


@dataclass
class DbSchema:
    url: Optional[str] = None  # None: $DATABASE_URL, else the embedded server
    pgdata: Optional[str] = None  # embedded server data folder (default .rag-exp/pgdata)


@dataclass
class TrackingSchema:
    enabled: bool = True
    uri: Optional[str] = None  # None: $MLFLOW_TRACKING_URI, else sqlite under ./mlruns
    experiment: str = "rag-experiments"
    log_per_case: bool = True
    plots: bool = True
    child_plots: bool = False  # per-run plots for each sweep point (they cost ~1 s a point)
    sweep_summary: bool = True  # at the end of a sweep: comparison plots + table on the parent run
    log_intervals: bool = False  # every 95% interval as metrics too (default: the objective's; all in intervals.json)


@dataclass
class RootSchema:
    corpus: CorpusSchema = field(default_factory=CorpusSchema)
    chunking: ChunkingSchema = field(default_factory=ChunkingSchema)
    embedding: EmbeddingSchema = field(default_factory=EmbeddingSchema)
    ingest: IngestSchema = field(default_factory=IngestSchema)
    retrieval: RetrievalSchema = field(default_factory=RetrievalSchema)
    fusion: FusionSchema = field(default_factory=FusionSchema)
    rerank: RerankSchema = field(default_factory=RerankSchema)
    golden: GoldenSchema = field(default_factory=GoldenSchema)
    eval: EvalSchema = field(default_factory=EvalSchema)
    db: DbSchema = field(default_factory=DbSchema)
    tracking: TrackingSchema = field(default_factory=TrackingSchema)
    objective: str = "recall_at_5"
    run_name: Optional[str] = None
    progress: bool = True


def register_schema() -> None:
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="base_config", node=RootSchema)


# -- typed settings (what the pipeline uses) -------------------------------------------------
@dataclass(frozen=True)
class Settings:
    corpus_path: str
    corpus_name: str | None
    chunking: ChunkingParams
    embedding_name: str
    embedding_batch_size: int
    ingest: IngestParams
    retrieval: RetrievalParams
    hnsw: HnswParams
    golden_path: Path
    eval: EvalParams
    eval_level: str
    bootstrap_samples: int
    seed: int
    ann_recall_queries: int
    db_url: str | None
    pgdata: Path | None
    tracking: dict
    objective: str
    run_name: str | None
    progress: bool
    embedding_options: EmbeddingOptions = EmbeddingOptions()


def project_root() -> Path:
    return Path(os.environ.get("RAG_EXP_HOME", os.getcwd())).resolve()


def _abs(path: str) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else project_root() / p


def reject_unknown_keys(c: dict, schema: type = RootSchema, prefix: str = "") -> None:
    """A key the schema does not know is a typo, never a setting: Hydra's own hint for
    ``fusion.rrfk=3`` is ``+fusion.rrfk=3``, which appends the key and leaves ``rrf_k`` at its
    default while the run logs ``fusion.rrfk=3``. ConfigError names the key (and the closest known)."""
    import dataclasses
    import difflib
    import typing

    hints = typing.get_type_hints(schema)
    known = [f.name for f in dataclasses.fields(schema)]
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


def check_override_keys(overrides: list[str], conf_dir: Path) -> None:
    """Command-line overrides of keys the schema does not know, in the same one-line form as
    :func:`reject_unknown_keys` (Hydra itself prints a multi-line hint to append the key with
    ``+``, which would be accepted and ignored). Group choices, ``hydra.*`` and ``+``/``~``
    overrides are left to Hydra and to the check of the composed config."""
    import re

    groups = {p.name for p in conf_dir.iterdir() if p.is_dir()} if conf_dir.is_dir() else set()
    for arg in overrides:
        m = re.match(r"([A-Za-z_][\w.]*)=", arg)
        if not m or m.group(1).startswith("hydra.") or m.group(1) in groups:
            continue
        nested: dict = {}
        node = nested
        *parents, last = m.group(1).split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = None
        reject_unknown_keys(nested)


def exit_on_unknown_override_keys(argv: list[str], conf_dir: Path) -> None:
    """For ``run.py``: before Hydra composes anything, one ``error:`` line and exit 2."""
    import sys

    try:
        check_override_keys([a for a in argv if not a.startswith("-")], conf_dir)
    except ConfigError as exc:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)


def settings_from_cfg(cfg: Any) -> Settings:
    """Validate every value and build the typed settings; ConfigError names the offending key."""
    from omegaconf import OmegaConf

    # the hydra node (present with return_hydra_config) holds job-time interpolations: skip it
    c = {k: OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k]) else cfg[k]
         for k in cfg if k != "hydra"}
    reject_unknown_keys(c)
    ev = c["eval"]
    r = c["retrieval"]
    f = c["fusion"]
    eval_params = EvalParams(
        ks=tuple(int(k) for k in ev["ks"]), mrr_k=ev["mrr_k"], ndcg_k=ev["ndcg_k"],
        judged_k=ev["judged_k"], min_coverage=ev["min_coverage"],
    )
    if ev["level"] not in ("chunk", "document"):
        raise ConfigError(f"eval.level: must be 'chunk' or 'document', got {ev['level']!r}")
    fusion = FusionParams(rrf_k=f["rrf_k"], vector_weight=f["vector_weight"],
                          keyword_weight=f["keyword_weight"], depth=f["depth"])
    largest_k = max(eval_params.ks)
    if fusion.depth < largest_k:
        raise ConfigError(
            f"fusion.depth: {fusion.depth} is below the largest eval k ({largest_k}); "
            f"recall@{largest_k} would be capped. Set fusion.depth >= {largest_k}"
        )
    rr = c["rerank"]
    rerank = RerankParams(name=rr["name"], model=rr["model"] or "", cutoff=rr["cutoff"],
                          base_url=rr.get("base_url") or None, price=rr.get("price"),
                          max_retries=rr.get("max_retries", 4))
    hn = r["hnsw"]
    if hn["m"] < 2 or hn["ef_construction"] < 4:
        raise ConfigError(f"retrieval.hnsw: m must be >= 2 and ef_construction >= 4, got m={hn['m']}, "
                          f"ef_construction={hn['ef_construction']}")
    if hn["ef_search"] is not None and not 1 <= hn["ef_search"] <= 1000:
        raise ConfigError(f"retrieval.hnsw.ef_search: must be in 1..1000, got {hn['ef_search']}")
    retrieval = RetrievalParams(
        variant=r["variant"],
        keyword=KeywordParams(**r["keyword"]),
        fusion=fusion,
        rerank=rerank,
        filters=Filters(doc_types=tuple(r["filters"]["doc_types"] or ()),
                        source_uri_prefix=r["filters"]["source_uri_prefix"]),
        ef_search=hn["ef_search"],
        engine=f["engine"],
        use_cache=r["use_cache"],
    )
    ch = c["chunking"]
    chunking = ChunkingParams(name=ch["name"], max_tokens=ch["max_tokens"], overlap=ch["overlap"],
                              breadcrumbs=ch["breadcrumbs"])
    check_embedder_name(c["embedding"]["name"])
    if c["embedding"]["batch_size"] <= 0:
        raise ConfigError(f"embedding.batch_size: must be > 0, got {c['embedding']['batch_size']}")
    embedding_options = _embedding_options(c["embedding"])
    if ev["bootstrap_samples"] < 0:
        raise ConfigError(f"eval.bootstrap_samples: must be >= 0, got {ev['bootstrap_samples']}")
    objective = c["objective"]
    if MetricKey.parse(objective).on(None) not in eval_params.metric_keys():
        raise ConfigError(f"objective: {objective!r} is not a logged metric; choose one of "
                          f"{', '.join(eval_params.metric_names())} (optionally with a .segment suffix)")
    return Settings(
        corpus_path=c["corpus"]["path"], corpus_name=c["corpus"]["name"],
        chunking=chunking, embedding_name=c["embedding"]["name"],
        embedding_batch_size=c["embedding"]["batch_size"], ingest=IngestParams(**c["ingest"]), retrieval=retrieval,
        hnsw=HnswParams(m=hn["m"], ef_construction=hn["ef_construction"]),
        golden_path=_abs(c["golden"]["path"]), eval=eval_params, eval_level=ev["level"],
        bootstrap_samples=ev["bootstrap_samples"], seed=ev["seed"], ann_recall_queries=ev["ann_recall_queries"],
        db_url=c["db"]["url"], pgdata=_abs(c["db"]["pgdata"]) if c["db"]["pgdata"] else None,
        tracking=dict(c["tracking"]), objective=objective, run_name=c["run_name"], progress=c["progress"],
        embedding_options=embedding_options,
    )


def _embedding_options(e: dict) -> EmbeddingOptions:
    from .embedding.options import check_embedding_config

    fields = set(EmbeddingOptions.__dataclass_fields__)
    options = EmbeddingOptions(**{k: v for k, v in e.items() if k in fields})
    check_embedding_config(e["name"], options)
    return options
