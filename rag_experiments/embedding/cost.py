"""Before paying: the estimated tokens and cost of embedding a corpus, and a confirmation.
After: the usage the provider reported, priced the same way.

Tokens are estimated with the bundled WordPiece tokenizer (:mod:`.tokens`), not the provider's
own; the real count comes back with every answer and is what :func:`usage_metrics` reports
(and the run logs to MLflow).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, Sequence

from ..errors import UserError


@dataclass(frozen=True)
class EmbeddingEstimate:
    model_id: str
    texts: int
    tokens: int
    requests: int
    price_per_mtok: float | None

    def __add__(self, other: "EmbeddingEstimate") -> "EmbeddingEstimate":
        """Two parts of one ingest (its groups of documents: chunk_index._build)."""
        return EmbeddingEstimate(self.model_id, self.texts + other.texts, self.tokens + other.tokens,
                                 self.requests + other.requests, self.price_per_mtok)

    @property
    def usd(self) -> float | None:
        return None if self.price_per_mtok is None else self.tokens * self.price_per_mtok / 1_000_000

    def describe(self) -> str:
        money = (f"~${self.usd:.4f} at ${self.price_per_mtok:g} per million tokens" if self.usd is not None
                 else "unknown cost (no list price for this model: set embedding.price_per_mtok)")
        return (f"embedding {self.texts:,} texts through {self.model_id}: ~{self.tokens:,} tokens "
                f"(estimated) in {self.requests} requests, {money}")


def estimate(embedder, texts: Sequence[str], input_type: str = "document") -> EmbeddingEstimate:
    texts = list(texts)
    return EmbeddingEstimate(embedder.model_id, len(texts), embedder.estimate_tokens(texts, input_type),
                             len(embedder.plan_requests(texts, input_type)), embedder.price_per_mtok)


class EstimateOnly(UserError):
    """``--dry-run``: the estimate was printed; stop before paying (exit 0)."""

    exit_code = 0


def confirm_payment(what: str, who: str, hint: str, ask: Callable[[str], str] | None = None) -> None:
    """Ask before paying (after the estimate is printed): ``ask`` (default: the terminal); with no
    terminal, one line saying how to go on; anything but yes cancels before a request is sent."""
    if ask is None:
        if not sys.stdin or not sys.stdin.isatty():
            raise UserError(f"{what} needs a confirmation and there is no terminal to ask", hint=hint)
        ask = input
    if ask("Proceed? [y/N] ").strip().lower() not in ("y", "yes"):
        raise UserError(f"{who}: cancelled at the cost confirmation; nothing was paid")


class CostGate:
    """The ``before_paying`` hook of :func:`rag_experiments.chunk_index.ingest`: print the estimate, then
    ask (a terminal), or go on (``confirm=False`` / ``--yes``), or stop (``dry_run``)."""

    def __init__(self, embedder, *, confirm: bool = True, dry_run: bool = False,
                 ask: Callable[[str], str] | None = None, out=None) -> None:
        self.embedder = embedder
        self.confirm = confirm
        self.dry_run = dry_run
        self._ask = ask
        self._out = out
        self.estimates: list[EmbeddingEstimate] = []

    def __call__(self, est: EmbeddingEstimate) -> None:
        self.estimates.append(est)
        out = self._out or sys.stderr
        print(est.describe(), file=out, flush=True)
        if self.dry_run:
            raise EstimateOnly("dry run: stopped before paying")
        if not self.confirm or est.usd == 0:
            return
        confirm_payment("embedding: paying for this corpus", "embedding",
                        "rerun with --yes (rag-exp) or embedding.confirm=false (run.py)", self._ask)

    def metrics(self) -> dict[str, float]:
        out = {}
        if self.estimates:
            out["embedding.estimated_tokens"] = float(sum(e.tokens for e in self.estimates))
            usd = [e.usd for e in self.estimates]
            if all(u is not None for u in usd):
                out["embedding.estimated_cost_usd"] = float(sum(usd))
        return out


def usage_metrics(embedder, before) -> dict[str, float]:
    """What the provider reported since ``before`` (a snapshot of ``embedder.usage``)."""
    if not getattr(embedder, "paid", False):
        return {}
    used = embedder.usage - before
    out = {"embedding.tokens": float(used.tokens), "embedding.requests": float(used.requests),
           "embedding.texts_sent": float(used.texts)}
    cost = embedder.cost_usd(used.tokens)
    if cost is not None:
        out["embedding.cost_usd"] = cost
    return out


def describe_usage(metrics: dict[str, float]) -> str | None:
    """One line for the end of a run, or None when nothing was paid for."""
    parts = []
    if "embedding.tokens" in metrics:
        cost = metrics.get("embedding.cost_usd")
        parts.append(f"embedding {int(metrics['embedding.tokens']):,} tokens in {int(metrics['embedding.requests'])} "
                     f"requests" + (f" (${cost:.4f})" if cost is not None else ""))
    if "rerank.requests" in metrics:
        units = (f"{int(metrics['rerank.tokens']):,} tokens" if "rerank.tokens" in metrics
                 else f"{int(metrics.get('rerank.search_units', 0))} searches")
        cost = metrics.get("rerank.cost_usd")
        parts.append(f"rerank {units} in {int(metrics['rerank.requests'])} requests"
                     + (f" (${cost:.4f})" if cost is not None else ""))
    return "API usage: " + "; ".join(parts) if parts else None
