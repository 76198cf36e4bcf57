"""LLM query rewriting: the query side's knob (``query.rewrite=none|multi_query|hyde``).

* ``multi_query``: the model writes ``query.n`` other search queries for the question; the
  original and each rewrite are searched (each through the variant's legs and the configured
  fusion) and the ``n + 1`` ranked lists are merged by the configured ``fusion.method`` too,
  each list a leg of weight 1 (:func:`rag_experiments.retrieval.fusion.fuse_lists`; the default,
  RRF with ``fusion.rrf_k``, combines ranks only: the lists rank one corpus for different
  queries, and their fused scores are not on one scale).
* ``hyde`` (Gao et al. 2022, "Precise Zero-Shot Dense Retrieval without Relevance Labels"): the
  model writes ``query.n`` short passages that would answer the question; the *vector* leg
  searches with each passage's embedding instead of the question's, the keyword leg keeps the
  question (BM25 on an invented passage rewards its invented words); each passage's fused list
  is then merged as above. A variant without a vector leg (keyword) is refused.

The reranker (``hybrid_rerank``) always scores the passages against the user's question.

Rewrites are asked through :mod:`rag_experiments.llm` (the one module that calls the API: an
Anthropic model, or with ``llm.provider=openai llm.base_url=...`` any OpenAI-compatible server,
``query.model`` then required) and cached in PostgreSQL (``query_rewrites``) by (model, prompt
version, mode, n, query; another provider's model as ``<provider>:<model>``), so a
sweep pays once and a re-run pays nothing; the cost of the uncached ones is estimated and
confirmed before the first request (:class:`RewriteGate`), and the tokens used are logged with
the run (``rewrite.*`` metrics).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, Sequence

from psycopg.types.json import Jsonb

from .. import llm
from ..cache_key import cache_key
from ..errors import ConfigError, UserError
from ..llm import LLMParams

MODES = ("none", "multi_query", "hyde")
PROMPT_VERSION = "rewrite-v1"
#: output tokens budgeted per rewrite for the estimate (a query is short, a passage ~3 sentences)
OUTPUT_TOKENS = {"multi_query": 40, "hyde": 160}


@dataclass(frozen=True)
class QueryParams:
    rewrite: str = "none"  # none | multi_query | hyde
    n: int = 3  # rewrites (multi_query) or passages (hyde) per query
    model: str = ""  # "" = rag_experiments.llm.DEFAULT_MODEL
    confirm: bool = True  # ask before paying (a run without a terminal then stops: set false)
    max_tokens: int = 800  # per request
    # the top-level ``llm`` node (provider, base_url, price), set by Settings: not a query.* key
    llm: LLMParams = field(default_factory=LLMParams, metadata={"omegaconf_ignore": True})

    def __post_init__(self) -> None:
        if self.rewrite not in MODES:
            raise ConfigError(f"query.rewrite: must be one of {', '.join(MODES)}, got {self.rewrite!r}")
        if not 1 <= self.n <= 10:
            raise ConfigError(f"query.n: must be within 1..10, got {self.n}")
        if self.max_tokens < 16:
            raise ConfigError(f"query.max_tokens: must be >= 16, got {self.max_tokens}")
        if self.enabled and not self.model and self.llm.provider != "anthropic":
            raise ConfigError(f"query.model: query.rewrite with llm.provider={self.llm.provider} needs a model name",
                              hint="the name your server serves, e.g. query.model=llama3.1:8b")

    @property
    def enabled(self) -> bool:
        return self.rewrite != "none"

    def model_id(self) -> str:
        return self.model or llm.DEFAULT_MODEL

    def model_key(self) -> str:
        """The model as caches know it: ``<provider>:<model>`` for a provider other than Anthropic."""
        return self.llm.model_key(self.model_id())


def prompt(mode: str, query: str, n: int) -> str:
    if mode == "multi_query":
        return (f"A user searches technical documentation with this question:\n\n{query}\n\n"
                f"Write {n} different search queries that would find the passages answering it: rephrase it, "
                "use the words the documentation would use, keep every identifier (names of settings, "
                "functions, error codes) exactly as written. Answer with a JSON list of "
                f"{n} strings and nothing else.")
    return (f"A user searches technical documentation with this question:\n\n{query}\n\n"
            f"Write {n} different short passages (2-3 sentences each) as the documentation might answer it, "
            "in its style and vocabulary; keep every identifier exactly as written. Answer with a JSON "
            f"list of {n} strings and nothing else.")


def parse(text: str, n: int, query: str) -> list[str]:
    """The model's answer as up to ``n`` non-empty strings; anything else is an error naming the query."""
    try:
        value = llm.extract_json(text)
    except llm.JSONExtractionError as exc:
        raise UserError(f"query.rewrite: the model's answer for {query[:60]!r} is not JSON ({exc})",
                        hint="try another query.model; nothing was cached for this query") from None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise UserError(f"query.rewrite: the model's answer for {query[:60]!r} is not a JSON list of strings",
                        hint="try another query.model; nothing was cached for this query")
    return [v.strip() for v in value[:n]]


def rewrite_key(params: QueryParams, query: str) -> str:
    return cache_key("query-rewrite", model=params.model_key(), prompt=PROMPT_VERSION, mode=params.rewrite,
                     n=params.n, q=query)


class RewriteGate:
    """Before the first paid request: print the estimate of the uncached rewrites, then ask (a
    terminal), or go on (``query.confirm=false``), or stop with one line saying how to go on."""

    def __init__(self, confirm: bool, ask: Callable[[str], str] | None = None, out=None) -> None:
        self.confirm = confirm
        self._ask = ask
        self._out = out
        self.estimated_usd: float | None = None
        self.estimated_tokens = 0

    def __call__(self, params: QueryParams, prompts: Sequence[str]) -> None:
        model = params.model_id()
        est = llm.estimate_cost(model, prompts, output_tokens_per_request=OUTPUT_TOKENS[params.rewrite] * params.n,
                                price=params.llm.price_override, provider=params.llm.provider)
        self.estimated_usd = est.usd
        self.estimated_tokens = est.input_tokens + est.output_tokens
        money = (f"~${est.usd:.4f}" if est.usd is not None
                 else "unknown cost (no list price for this model: set llm.price=[IN,OUT])")
        via = f" ({params.llm.provider} provider)" if params.llm.provider != "anthropic" else ""
        print(f"query.rewrite={params.rewrite}: {len(prompts)} uncached queries through {model}{via}, "
              f"~{self.estimated_tokens:,} tokens (estimated), {money}", file=self._out or sys.stderr, flush=True)
        if not self.confirm or est.usd == 0:
            return
        from ..embedding.cost import confirm_payment

        confirm_payment("query.rewrite: paying for rewrites", "query.rewrite",
                        "rerun with query.confirm=false to accept the estimate above", self._ask)


class QueryRewriter:
    """Rewrites per query, from the cache or the model (one request per uncached query)."""

    def __init__(self, params: QueryParams, conn=None, client=None, gate: RewriteGate | None = None) -> None:
        self.params = params
        self.conn = conn
        self._client = client
        self.gate = gate or RewriteGate(params.confirm)
        self._memo: dict[str, list[str]] = {}
        self.requests = 0
        self.cached = 0
        self.input_tokens = 0
        self.output_tokens = 0

    def _cached(self, keys: dict[str, str]) -> dict[str, list[str]]:
        if self.conn is None:
            return {}
        rows = self.conn.execute("SELECT cache_key, rewrites FROM query_rewrites WHERE cache_key = ANY(%s)",
                                 (list(set(keys.values())),)).fetchall()
        by_key = {k: list(v) for k, v in rows}
        return {q: by_key[k] for q, k in keys.items() if k in by_key}

    def rewrites(self, queries: Sequence[str]) -> dict[str, list[str]]:
        """query -> its rewrites (multi_query) or passages (hyde)."""
        p = self.params
        todo = [q for q in dict.fromkeys(queries) if q not in self._memo]
        if todo:
            keys = {q: rewrite_key(p, q) for q in todo}
            found = self._cached(keys)
            self.cached += len(found)
            self._memo.update(found)
            missing = [q for q in todo if q not in found]
            if missing:
                self.gate(p, [prompt(p.rewrite, q, p.n) for q in missing])
                client = self._client or llm.make_client(provider=p.llm.provider, base_url=p.llm.base_url)
                self._client = client
                for q in missing:
                    try:
                        text, usage = llm.complete(client, prompt(p.rewrite, q, p.n), model=p.model_id(),
                                                   max_tokens=p.max_tokens)
                    except Exception as exc:  # noqa: BLE001 - the SDK's errors, after its own retries
                        if not llm.is_api_error(exc):
                            raise
                        raise llm.fatal_api_error(exc) or UserError(
                            f"query.rewrite: the request for {q[:60]!r} failed: {llm.describe_api_error(exc)}",
                            hint=f"rerun to resume: the {self.requests} rewrites already answered are cached"
                        ) from None
                    self.requests += 1
                    self.input_tokens += usage.input_tokens
                    self.output_tokens += usage.output_tokens
                    out = parse(text, p.n, q)
                    self._memo[q] = out
                    if self.conn is not None:  # stored as soon as paid for: an interrupted run resumes
                        with self.conn.transaction():
                            self.conn.execute(
                                "INSERT INTO query_rewrites (cache_key, model, prompt_version, mode, n, query, rewrites)"
                                " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (cache_key) DO NOTHING",
                                (keys[q], p.model_key(), PROMPT_VERSION, p.rewrite, p.n, q, Jsonb(out)))
        return {q: self._memo[q] for q in queries}

    def usage(self) -> dict[str, float]:
        """What the run logs: requests made, queries answered from the cache, tokens and cost."""
        out = {"rewrite.requests": float(self.requests), "rewrite.cached": float(self.cached),
               "rewrite.input_tokens": float(self.input_tokens), "rewrite.output_tokens": float(self.output_tokens)}
        cost = llm.cost_usd(self.params.model_id(), self.input_tokens, self.output_tokens,
                            price=self.params.llm.price_override, provider=self.params.llm.provider)
        if cost is not None:
            out["rewrite.cost_usd"] = float(cost)
        if self.gate.estimated_usd is not None:
            out["rewrite.estimated_cost_usd"] = float(self.gate.estimated_usd)
        return out


def expansions(mode: str, query: str, rewrites: Sequence[str]) -> list[tuple[str, str]]:
    """(vector-leg text, keyword-leg text) pairs to search for one query."""
    if mode == "multi_query":
        return [(query, query)] + [(r, r) for r in rewrites if r != query]
    if mode == "hyde":
        return [(passage, query) for passage in rewrites]
    return [(query, query)]


def check_variant(params: QueryParams, variant: str, legs: Sequence[str]) -> None:
    """``hyde`` rewrites what the vector leg embeds: a variant without one cannot use it."""
    if params.rewrite == "hyde" and "vector" not in legs:
        raise ConfigError(f"query.rewrite=hyde changes what the vector leg embeds; retrieval={variant} has no vector leg",
                          hint="use query.rewrite=multi_query, or a variant with a vector leg (vector, hybrid)")
