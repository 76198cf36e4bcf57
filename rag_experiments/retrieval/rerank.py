"""Rerankers: re-order the top ``cutoff`` fused candidates; the rest keep their fused order.

A reranker never changes the candidate set (a test checks recall@cutoff is identical before
and after). Implementations:

* ``maxsim`` (offline default): late-interaction MaxSim over the bundled MiniLM's contextual
  token vectors (ColBERT-style scoring with a model not trained for it). No cross-encoder
  weights can be installed from package registries, so this is the only reranker that runs
  on a fresh offline machine. Measured on the demo its recall@5 is not better than its input
  (0.780 vs hybrid's 0.786; an earlier golden version saw it rank better on mrr@10 and ndcg@10)
  and it costs ~2 s a query cold: it says so when it loads (:data:`MAXSIM_NOTE`), and
  ``experiment=compare_variants`` leaves it out unless asked for.
* ``cross-encoder``: sentence-transformers ``CrossEncoder`` by hub name or local path
  (``cross-encoder/ms-marco-MiniLM-L-6-v2`` is the usual choice where there is network);
  needs the ``rerank`` extra (torch).
* ``llm``: asks an LLM to grade each passage 0-10 (through :mod:`rag_experiments.llm`): an
  Anthropic model, or with ``llm.provider=openai llm.base_url=...`` any OpenAI-compatible
  server (``rerank.model`` is then required: the name the server serves). Usage is logged per
  run (``rerank.requests``, ``rerank.input_tokens``, ``rerank.output_tokens``,
  ``rerank.malformed``, ``rerank.cost_usd`` when the price is known: the table, or ``llm.price``).
* ``voyage`` (``rerank-2.5`` / ``rerank-2.5-lite``) and ``cohere`` (``rerank-v3.5``): hosted
  rerankers through their SDKs (:mod:`.api_rerank`); usage and cost are reported per run.

Scores are cached by (model, query, chunk text) in the ``rerank_cache`` table.
"""

from __future__ import annotations

import sys
from typing import Callable, Protocol, Sequence

import numpy as np

from .. import llm
from ..embedding.base import load_embedder
from ..embedding.onnx_minilm import OnnxMiniLM
from ..embedding.sentence_transformers_embedder import weights_digest
from ..errors import ConfigError, UserError
from ..install_hint import install_hint
from ..llm import LLMParams
from ..types import sha256_text
# the config values, in a module of their own so that api_rerank reads them without importing
# this one (which loads it): no import circle. Re-exported: callers import them from here.
from .rerank_params import RERANKERS, RerankParams

__all__ = ["RERANKERS", "Reranker", "RerankParams", "cached_scores", "load_reranker", "rerank_order"]


class Reranker(Protocol):
    model_id: str

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """Higher is more relevant; one score per text."""


# Said when the offline reranker loads (once per process): what it was measured to be worth (issue 58).
MAXSIM_NOTE = ("rerank=maxsim: MaxSim over the bundled MiniLM's token vectors (a model not trained to rerank) costs "
               "~2 s a query cold on 2 cores; on the demo its recall@5 was not better than its input (0.780 vs "
               "hybrid's 0.786, paired p=0.757), while on an earlier golden version it ranked better on mrr@10 and "
               "ndcg@10: compare this run with retrieval=hybrid on your metric before trusting it "
               "(docs/concepts/retrieval.md, Reranking)")
_NOTED: set[str] = set()


class MaxSimReranker:
    def __init__(self) -> None:
        if "maxsim" not in _NOTED:
            _NOTED.add("maxsim")
            print(MAXSIM_NOTE, file=sys.stderr, flush=True)
        emb = load_embedder("minilm-onnx")
        assert isinstance(emb, OnnxMiniLM)
        self._emb = emb
        self.model_id = f"maxsim:{emb.model_id}"
        # Chunk token vectors do not depend on the query, and the same candidates recur across
        # queries: compute each chunk's once per process.
        self._doc_vectors: dict[str, np.ndarray] = {}

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        q = self._emb.token_vectors([query])[0]
        missing = list(dict.fromkeys(t for t in texts if t not in self._doc_vectors))
        if missing:
            self._doc_vectors.update(zip(missing, self._emb.token_vectors(missing)))
        docs = [self._doc_vectors[t] for t in texts]
        return [float((q @ d.T).max(axis=1).mean()) if len(d) else 0.0 for d in docs]


class CrossEncoderReranker:
    def __init__(self, model: str) -> None:
        if not model:
            raise ConfigError(
                "rerank.model: the cross-encoder reranker needs a model name or local path",
                hint="e.g. rerank.model=cross-encoder/ms-marco-MiniLM-L-6-v2 (downloads where there is "
                "network) or rerank.model=/path/to/a/saved/CrossEncoder",
            )
        try:
            from sentence_transformers import CrossEncoder
        except ImportError:
            raise ConfigError("rerank.name=cross-encoder needs sentence-transformers and torch",
                              hint=install_hint("rerank")) from None
        try:
            self._model = CrossEncoder(model, device="cpu")
        except Exception as exc:  # noqa: BLE001 - loader raises many types; name the model
            raise ConfigError(
                f"rerank.model: cannot load cross-encoder {model!r} ({type(exc).__name__}: {str(exc)[:200]})",
                hint="no cross-encoder weights ship with this package: pass a local folder saved with "
                "CrossEncoder.save(), or a hub name on a machine with network (HF_HUB_OFFLINE must be unset)",
            ) from None

        # name + weights: the score cache must not serve a model retrained into the same folder
        module = self._model if hasattr(self._model, "state_dict") else self._model.model
        self.model_id = f"cross-encoder:{model}@{weights_digest(module)[:12]}"

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [float(s) for s in self._model.predict([(query, t) for t in texts], show_progress_bar=False)]


class LLMReranker:
    """An LLM grades the candidates 0-10 in one request per query (``params``: the ``llm`` node;
    a given ``client`` decides the provider itself).

    A malformed answer (not a JSON list of one number per passage) keeps the fused order for that
    query (all scores 0, and the stable sort leaves the order alone) and is counted in
    ``malformed``. Anthropic API errors propagate after the SDK's retries (the retriever sorts
    them: :mod:`.failures`); an OpenAI-compatible server's end the run with one line (fatal
    ones naming the key, model or URL to check).

    ``model_id`` (the score cache's key) is ``llm:<model>:<prompt version>`` for Anthropic, as
    before providers existed, and ``llm:<provider>:<model>:<prompt version>`` otherwise.
    """

    PROMPT_VERSION = "rerank-v1"

    def __init__(self, model: str = "", client=None, params: LLMParams | None = None) -> None:
        self._llm = llm
        params = params or LLMParams()
        self.provider = llm.provider_of(client) if client is not None else params.provider
        if not model and self.provider != "anthropic":
            raise ConfigError(f"rerank.model: rerank=llm with llm.provider={self.provider} needs a model name")
        self._client = client or llm.make_client(provider=params.provider, base_url=params.base_url)
        self._model = model or llm.DEFAULT_MODEL
        self._price = params.price_override
        key = self._model if self.provider == "anthropic" else f"{self.provider}:{self._model}"
        self.model_id = f"llm:{key}:{self.PROMPT_VERSION}"
        self.malformed = 0
        self.requests = 0
        self.input_tokens = 0
        self.output_tokens = 0

    def prompt(self, query: str, texts: Sequence[str]) -> str:
        passages = "\n\n".join(f"[{i}] {t}" for i, t in enumerate(texts))
        return (
            "Grade how well each passage answers the question, 0 (useless) to 10 (fully answers it).\n"
            f"Question: {query}\n\nPassages:\n{passages}\n\n"
            f"Answer with only a JSON list of {len(texts)} numbers, in passage order."
        )

    def _complete(self, prompt: str, max_tokens: int):
        llm = self._llm
        try:
            return llm.complete(self._client, prompt, model=self._model, max_tokens=max_tokens)
        except Exception as exc:  # noqa: BLE001 - sorted below; anything not an API error re-raises
            if self.provider == "anthropic" or not llm.is_api_error(exc):
                raise
            raise llm.fatal_api_error(exc) or UserError(
                f"rerank=llm: the {llm.api_name(exc)} request for model {self._model!r} failed "
                f"(after the SDK's retries): {llm.describe_api_error(exc)}",
                hint="rerun: the scores already answered are cached") from None

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        text, usage = self._complete(self.prompt(query, texts), 20 + 8 * len(texts))
        self.requests += usage.requests
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        try:
            scores = self._llm.extract_json(text)
            if not isinstance(scores, list) or len(scores) != len(texts):
                raise ValueError("wrong shape")
            return [float(s) for s in scores]
        except (ValueError, TypeError):
            self.malformed += 1
            return [0.0] * len(texts)

    def usage(self) -> dict[str, float]:
        """What the run logs (the provider and base URL are the run's ``llm.*`` params)."""
        out = {"rerank.requests": float(self.requests), "rerank.input_tokens": float(self.input_tokens),
               "rerank.output_tokens": float(self.output_tokens), "rerank.malformed": float(self.malformed)}
        cost = self._llm.cost_usd(self._model, self.input_tokens, self.output_tokens, price=self._price,
                                  provider=self.provider)
        if cost is not None:
            out["rerank.cost_usd"] = float(cost)
        return out


def load_reranker(params: RerankParams) -> Reranker:
    if params.name == "maxsim":
        return MaxSimReranker()
    if params.name == "cross-encoder":
        return CrossEncoderReranker(params.model)
    if params.name in ("voyage", "cohere"):
        from .api_rerank import load_api_reranker

        return load_api_reranker(params)
    return LLMReranker(params.model, params=params.llm)


def cached_scores(conn, reranker: Reranker, query: str, texts: Sequence[str],
                  on_scored: Callable[[int], None] | None = None) -> list[float]:
    """Scores via the persistent (model, query hash, text hash) cache; only misses are scored
    (``on_scored`` hears how many: the ``cache.rerank_scored`` counter)."""
    qh = sha256_text(query)
    hashes = [sha256_text(t) for t in texts]
    rows = conn.execute(
        "SELECT text_hash, score FROM rerank_cache WHERE model = %s AND query_hash = %s AND text_hash = ANY(%s)",
        (reranker.model_id, qh, hashes),
    ).fetchall() if conn is not None else []
    known = dict(rows)
    missing = [i for i, h in enumerate(hashes) if h not in known]
    if missing:
        fresh = reranker.score(query, [texts[i] for i in missing])
        if on_scored is not None:
            on_scored(len(missing))
        for i, s in zip(missing, fresh):
            known[hashes[i]] = s
        if conn is not None:
            with conn.transaction():
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO rerank_cache (model, query_hash, text_hash, score) VALUES (%s, %s, %s, %s)"
                        " ON CONFLICT DO NOTHING",
                        [(reranker.model_id, qh, hashes[i], known[hashes[i]]) for i in missing],
                    )
    return [float(known[h]) for h in hashes]


def rerank_order(scores: Sequence[float], cutoff: int) -> list[int]:
    """New order of positions: the first ``cutoff`` by score (ties keep fused order), rest unchanged."""
    n = len(scores)
    top = sorted(range(min(cutoff, n)), key=lambda i: (-scores[i], i))
    return top + list(range(min(cutoff, n), n))
