"""What a retriever *is*, in words, from its resolved config: the champion's run name and its
registered version's description (pure functions over plain dicts).

``short`` names it in one line (``hybrid, heading-200, minilm-onnx, rrf_k=30``): the variant, the
chunking and its size, the embedding model, then the knobs of the parts it uses (fusion for
hybrid variants, the reranker and its cutoff, a team's system by its target). ``long`` says the
same as sentences, for the registry, where a reader has only the description to go on.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..retrieval.systems import registry
from ..retrieval.systems.builtin import fusion_text as _fusion_text


def _get(config: Mapping, dotted: str, default: Any = None) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def variant(config: Mapping, tags: Mapping[str, str] | None = None) -> str:
    return str((tags or {}).get("variant") or _get(config, "retrieval.variant", "") or "?")


def fusion_text(config: Mapping) -> str:
    """The method's own ``describe`` (:mod:`~rag_experiments.retrieval.fusion_methods`): ``rrf_k=30``
    (weights only when not 1), ``convex alpha=0.5 minmax``, ``combmnz zscore``, ``isr``."""
    return _fusion_text(_getter(config))


def _getter(config: Mapping):
    return lambda dotted, default=None: _get(config, dotted, default)


def _chunking(config: Mapping) -> str:
    name = _get(config, "chunking.name", "?")
    size = _get(config, "chunking.max_tokens")
    overlap = _get(config, "chunking.overlap") or 0
    return f"{name}-{size}" + (f"+{overlap}" if overlap else "") if size else str(name)


def _embedding(config: Mapping, tags: Mapping[str, str]) -> str:
    return str(_get(config, "embedding.name") or tags.get("embedding_model") or "?")


def _with_variant(config: Mapping, v: str):
    """A getter over ``config`` whose ``retrieval.variant`` is ``v`` (a tag may name it)."""
    get = _getter(config)
    return lambda dotted, default=None: v if dotted == "retrieval.variant" else get(dotted, default)


def short(config: Mapping, tags: Mapping[str, str] | None = None) -> str:
    """The system's own ``describe`` (:mod:`~rag_experiments.retrieval.systems`)."""
    tags = tags or {}
    v = variant(config, tags)
    system = registry().get(v)
    if system is None:  # a run logged by a version that had a system this one has not
        return f"{v}, {_chunking(config)}, {_embedding(config, tags)}"
    return system.describe(_with_variant(config, v), _chunking(config), _embedding(config, tags))


def long(config: Mapping, tags: Mapping[str, str], metric: str, metrics: Mapping[str, float],
         run_link: str | None, run_id: str) -> str:
    """The registered version's description (Markdown): what the retriever is, what it was
    measured on, its objective with interval, and where the run is."""
    v = variant(config, tags)
    system = registry().get(v)
    # plain first line: the registry's version list shows the description's start as text (raw `**`)
    lines = [short(config, tags), ""]
    lines.append("- retriever: " + (system.sentence(_with_variant(config, v)) if system else f"`{v}`"))
    chunk = _get(config, "chunking", {}) or {}
    lines.append(f"- chunking: {chunk.get('name', '?')}, {chunk.get('max_tokens', '?')} tokens, overlap "
                 f"{chunk.get('overlap', 0)}" + (", breadcrumbs" if chunk.get("breadcrumbs") else ""))
    if system is None or system.kind == "team" or system.embeds_queries:
        lines.append(f"- embedding model: {_embedding(config, tags)}")
    golden = tags.get("golden_sha256", "")
    records = tags.get("golden_records")
    lines.append(f"- measured on golden set {tags.get('golden_set') or _get(config, 'golden.path', '?')}, "
                 f"version {golden[:12] or '?'}" + (f" ({records} records)" if records else "")
                 + f", corpus {str(tags.get('corpus_digest', ''))[:12] or '?'}")
    value = metrics.get(metric)
    low, high = metrics.get(f"{metric}.ci_low"), metrics.get(f"{metric}.ci_high")
    if value is not None:
        lines.append(f"- objective {metric} = {value:.4f}"
                     + (f" [{low:.3f}, {high:.3f}] (95% bootstrap interval)" if low is not None and high is not None
                        else ""))
    lines.append(f"- measured in run [{run_id}]({run_link})" if run_link else
                 f"- measured in run {run_id}, which is not in this store (the committed record "
                 "experiments/promoted/ holds its metrics and per-case scores)")
    return "\n".join(lines)
