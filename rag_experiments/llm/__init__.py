"""The only module (with its sibling :mod:`.openai_provider`) that talks to an LLM API.

Two providers (:data:`PROVIDERS`), each through its real SDK:

* ``anthropic`` (the default): the ``anthropic`` SDK 2.x, the Messages API.
* ``openai``: the ``openai`` SDK's ``chat.completions.create`` against any OpenAI-compatible
  server (``base_url``: vLLM, Ollama, LM Studio, a gateway, or OpenAI itself); see
  :mod:`.openai_provider` for the key rule (a placeholder key for a self-hosted server).

* :func:`make_client` builds a client: ``provider="anthropic"`` from ``ANTHROPIC_API_KEY`` (and
  optionally ``ANTHROPIC_BASE_URL``), ``provider="openai"`` from ``OPENAI_API_KEY`` and
  ``base_url`` (else ``OPENAI_BASE_URL``). The SDKs' own retries handle 408/409/429/5xx
  (529 = overloaded), honouring ``retry-after-ms`` / ``retry-after``; ``max_retries`` sets how many.
* :func:`complete` sends one request (whichever provider the client speaks) and returns
  ``(text, usage)``; :func:`is_api_error`, :func:`fatal_api_error` and
  :func:`describe_api_error` sort either SDK's errors the same way (401/403/404 and an
  unreachable server are fatal; the rest were already retried by the SDK).
* :class:`LLMParams` is the ``llm`` config node (``llm.provider``, ``llm.base_url``,
  ``llm.price``) read by the ``llm`` reranker and query rewriting.
* :func:`extract_json` reads the JSON a model answered: a single ```json fence is tolerated,
  nothing else (no prose around it, no trailing commas, no "best effort" repair).
* :data:`PRICES`, :func:`estimate_tokens`, :func:`cost_usd`, :func:`estimate_cost`: what a job
  will cost before it starts and what it cost at the end. The table holds Anthropic's list
  prices only: with ``provider="openai"`` no model has a built-in price (the same name may be
  free on your own server or billed by a gateway), so the price must be given (``0,0`` for a
  self-hosted model); a cost is never assumed to be zero.
* :func:`create_batch`, :func:`poll_batch`, :func:`batch_results`: the Message Batches API
  (half price, results within 24 h) for bulk jobs (Anthropic only).

The API key is never logged, printed or put in an error message.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator
from urllib.parse import urlsplit

from ..errors import ConfigError, UserError
from .base import CHARS_PER_TOKEN, LLMFatalError, Usage, estimate_tokens, request_url_of, short_error  # noqa: F401 - re-exported

if TYPE_CHECKING:  # the SDK is imported lazily: commands that never call the API stay fast
    import anthropic

PROVIDERS = ("anthropic", "openai")
DEFAULT_PROVIDER = "anthropic"
DEFAULT_MODEL = "claude-sonnet-4-6"  # the anthropic provider's; provider openai has none (name the model)
DEFAULT_MAX_RETRIES = 4
DEFAULT_TIMEOUT = 60.0
BATCH_DISCOUNT = 0.5  # the Message Batches API bills input and output at half price


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float


# Standard (non-batch, non-cached) prices, USD per million input / output tokens, from the
# model pages on platform.claude.com. Dated snapshot ids (``claude-sonnet-4-5-20250929``) use
# their alias's price. A model missing here has no estimate: pass ``price=`` explicitly.
PRICES: dict[str, Price] = {
    "claude-fable-5-1": Price(10.0, 50.0),
    "claude-opus-5-5": Price(4.0, 20.0),
    "claude-sonnet-5-5": Price(2.0, 10.0),
    "claude-opus-5": Price(5.0, 25.0),
    "claude-sonnet-5": Price(2.0, 10.0),
    "claude-opus-4-6": Price(5.0, 25.0),
    "claude-sonnet-4-6": Price(3.0, 15.0),
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-sonnet-4-5": Price(3.0, 15.0),
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-opus-4-0": Price(15.0, 75.0),
    "claude-sonnet-4-0": Price(3.0, 15.0),
}
_DATED = re.compile(r"-\d{8}$")
_ALIASES = {"claude-sonnet-4": "claude-sonnet-4-0", "claude-opus-4": "claude-opus-4-0"}


def price_for(model: str, provider: str = DEFAULT_PROVIDER) -> Price | None:
    """The price of ``model`` (a dated snapshot id falls back to its alias), or None if unknown.
    Only Anthropic's models have built-in prices: any other provider's is None (pass a price)."""
    if provider != "anthropic":
        return None
    name = _DATED.sub("", model)
    name = _ALIASES.get(name, name)
    return PRICES.get(model) or PRICES.get(name)


def cost_usd(model: str, input_tokens: int, output_tokens: int, *, batch: bool = False,
             price: Price | None = None, provider: str = DEFAULT_PROVIDER) -> float | None:
    """USD for the given token counts; None when the model has no known price (``price`` wins,
    ``Price(0, 0)`` included)."""
    price = price if price is not None else price_for(model, provider)
    if price is None:
        return None
    usd = (input_tokens * price.input + output_tokens * price.output) / 1_000_000
    return usd * BATCH_DISCOUNT if batch else usd


@dataclass(frozen=True)
class CostEstimate:
    model: str
    requests: int
    input_tokens: int
    output_tokens: int
    usd: float | None
    batch: bool = False
    provider: str = DEFAULT_PROVIDER

    def describe(self) -> str:
        money = f"~${self.usd:.2f}" if self.usd is not None else "unknown cost (no price for this model)"
        mode = " via the Message Batches API (50% off)" if self.batch else ""
        via = f" ({self.provider} provider)" if self.provider != DEFAULT_PROVIDER else ""
        return (f"{self.requests} requests to {self.model}{via}{mode}: ~{self.input_tokens:,} input + "
                f"~{self.output_tokens:,} output tokens, {money}")


def estimate_cost(model: str, prompts: Iterable[str], *, output_tokens_per_request: int,
                  batch: bool = False, price: Price | None = None,
                  provider: str = DEFAULT_PROVIDER) -> CostEstimate:
    """Estimate before starting: input tokens from the full prompt texts, output as given."""
    prompts = list(prompts)
    inp = sum(estimate_tokens(p) for p in prompts)
    out = output_tokens_per_request * len(prompts)
    usd = cost_usd(model, inp, out, batch=batch, price=price, provider=provider)
    return CostEstimate(model, len(prompts), inp, out, usd, batch, provider)


# -- provider and config ---------------------------------------------------------------------------
def check_provider(provider: str, key: str = "llm.provider") -> str:
    """``provider`` if it is one of :data:`PROVIDERS`, else a ConfigError naming ``key``."""
    if provider not in PROVIDERS:
        raise ConfigError(f"{key}: unknown provider {provider!r}; use one of {', '.join(PROVIDERS)}",
                          hint="openai = any OpenAI-compatible server (vLLM, Ollama, a gateway) with a base URL")
    return provider


def check_base_url(url: str | None, key: str = "llm.base_url") -> str | None:
    """``url`` if it is None or an ``http(s)://host...`` URL, else a ConfigError naming ``key``."""
    if url is None:
        return None

    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(f"{key}: {url!r} is not an http(s) URL",
                          hint="e.g. http://localhost:8000/v1 (vLLM) or http://localhost:11434/v1 (Ollama)")
    return url


def parse_price(value: Any, key: str = "--price") -> Price | None:
    """``"IN,OUT"`` or a pair of numbers (USD per million input, output tokens) as a Price."""
    if value is None or value == "":
        return None
    try:
        parts = [float(x) for x in (value.split(",") if isinstance(value, str) else value)]
    except (TypeError, ValueError):
        parts = []
    if len(parts) != 2 or any(p < 0 or p != p for p in parts):
        raise ConfigError(f"{key}: expected IN,OUT in USD per million tokens (>= 0), got {value!r}",
                          hint="e.g. 3,15; 0,0 for a model on your own server")
    return Price(parts[0], parts[1])


@dataclass(frozen=True)
class LLMParams:
    """The ``llm`` config node: which API the LLM features of a run call (the ``llm`` reranker,
    ``query.rewrite``); ``rag-exp golden generate|label`` take it as their default too.

    ``provider``: anthropic | openai. ``base_url``: the server (None: the SDK's default, or
    ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL``). ``price``: ``[IN, OUT]`` USD per million
    tokens, overriding the table (needed for any openai-provider model; ``[0, 0]`` for your own
    server)."""

    provider: str = DEFAULT_PROVIDER
    base_url: str | None = None
    price: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        check_provider(self.provider, "llm.provider")
        check_base_url(self.base_url, "llm.base_url")
        if self.price is not None:
            parse_price(list(self.price), "llm.price")
            object.__setattr__(self, "price", tuple(float(x) for x in self.price))  # hashable, as declared

    @property
    def price_override(self) -> Price | None:
        return parse_price(list(self.price), "llm.price") if self.price is not None else None

    def model_key(self, model: str) -> str:
        """What identifies ``model`` in caches and ids: the bare name for Anthropic (as before
        providers existed), ``<provider>:<model>`` for the others."""
        return model if self.provider == DEFAULT_PROVIDER else f"{self.provider}:{model}"


def provider_of(client: Any) -> str:
    """Which provider an SDK client speaks (by the SDK it comes from)."""
    return "openai" if type(client).__module__.split(".")[0] == "openai" else "anthropic"


def _sdk_of(exc: BaseException) -> str | None:
    root = type(exc).__module__.split(".")[0]
    if root == "openai":
        openai = sys.modules.get("openai")
        return "openai" if openai is not None and isinstance(exc, openai.APIError) else None
    anthropic = sys.modules.get("anthropic")
    return "anthropic" if anthropic is not None and isinstance(exc, anthropic.APIError) else None


def is_api_error(exc: BaseException) -> bool:
    """An SDK API error of either provider (raised after the SDK's own retries)."""
    return _sdk_of(exc) is not None


def api_name(exc_or_provider: Any) -> str:
    """``Anthropic API`` or ``OpenAI-compatible API`` (for messages)."""
    provider = exc_or_provider if isinstance(exc_or_provider, str) else _sdk_of(exc_or_provider)
    return "OpenAI-compatible API" if provider == "openai" else "Anthropic API"


# -- client ---------------------------------------------------------------------------------------
def make_client(api_key: str | None = None, base_url: str | None = None, max_retries: int = DEFAULT_MAX_RETRIES,
                timeout: float = DEFAULT_TIMEOUT, *, provider: str = DEFAULT_PROVIDER) -> Any:
    """An SDK client for ``provider``: ``anthropic.Anthropic`` (the default) or ``openai.OpenAI``
    (see :func:`rag_experiments.llm.openai_provider.make_openai_client`).

    Anthropic: the key comes from ``api_key`` or ``$ANTHROPIC_API_KEY``; ``base_url`` (else
    ``$ANTHROPIC_BASE_URL``, else the SDK default) points it elsewhere, e.g. at a test stub. A
    missing key is a :class:`ConfigError` that names the variable only.
    """
    check_provider(provider, "provider")
    check_base_url(base_url, "base_url")
    if provider == "openai":
        from .openai_provider import make_openai_client

        return make_openai_client(api_key, base_url, max_retries, timeout)
    import anthropic

    key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
    if not key:
        raise ConfigError("ANTHROPIC_API_KEY is not set",
                          hint="export ANTHROPIC_API_KEY=<your key> (golden generate/label call the Anthropic API)")
    if max_retries < 0:
        raise ConfigError(f"max_retries must be >= 0, got {max_retries}")
    base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
    return anthropic.Anthropic(api_key=key, base_url=base_url, max_retries=max_retries, timeout=timeout)


def fatal_api_error(exc: BaseException) -> LLMFatalError | None:
    """A :class:`LLMFatalError` if ``exc`` is an error that retrying other requests cannot fix."""
    if _sdk_of(exc) == "openai":
        from .openai_provider import fatal_api_error as openai_fatal

        return openai_fatal(exc)
    import anthropic

    if isinstance(exc, (anthropic.AuthenticationError, anthropic.PermissionDeniedError)):
        return LLMFatalError(f"Anthropic API refused the credentials ({type(exc).__name__}, HTTP {exc.status_code})",
                             hint="check ANTHROPIC_API_KEY")
    if isinstance(exc, anthropic.APIConnectionError) and not isinstance(exc, anthropic.APITimeoutError):
        # refused / DNS / TLS after the SDK's own retries: every other request would wait out the
        # same retries and fail the same way. (A timeout is one slow request: not fatal.)
        return LLMFatalError(f"Anthropic API unreachable at {request_url_of(exc)}: "
                             f"{short_error(exc.__cause__ or exc)}",
                             hint="check the network or ANTHROPIC_BASE_URL (golden generate/label keep every "
                             "finished answer: rerun to resume)")
    if isinstance(exc, anthropic.NotFoundError):
        return LLMFatalError(f"Anthropic API: not found (HTTP 404): {short_error(exc)}",
                             hint="check the model name (--model)")
    return None


def describe_api_error(exc: BaseException) -> str:
    """One line for a failed request (never contains the key: the SDK does not echo it)."""
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "") + f": {short_error(exc)}"


def message_params(prompt: str, *, model: str = DEFAULT_MODEL, system: str | None = None,
                   max_tokens: int = 1024) -> dict:
    """The Messages request body for one user prompt (used for direct calls and batches alike).

    No sampling parameters: the 2.x SDK's ``messages.create`` has no ``temperature``; outputs
    are not reproducible anyway, which is why every answer is checkpointed and never re-asked.
    """
    params: dict[str, Any] = {"model": model, "max_tokens": max_tokens,
                              "messages": [{"role": "user", "content": prompt}]}
    if system:
        params["system"] = system
    return params


def message_text(message: Any) -> str:
    """The concatenated text blocks of an SDK ``Message``."""
    return "".join(getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text")


def complete(client: Any, prompt: str, *, model: str = DEFAULT_MODEL, system: str | None = None,
             max_tokens: int = 1024) -> tuple[str, Usage]:
    """Send one request; return the answer's text and its token usage. An Anthropic client sends
    a Messages request (:func:`message_params`); an OpenAI one a chat completion
    (:func:`rag_experiments.llm.openai_provider.complete`).

    SDK errors propagate (after the SDK's own retries): callers decide per request
    (:func:`is_api_error`, :func:`fatal_api_error`).
    """
    if provider_of(client) == "openai":
        from .openai_provider import complete as openai_complete

        return openai_complete(client, prompt, model=model, system=system, max_tokens=max_tokens)
    params = message_params(prompt, model=model, system=system, max_tokens=max_tokens)
    message = client.messages.create(**params)
    return message_text(message), Usage.from_sdk(message.usage)


# -- JSON answers --------------------------------------------------------------------------------
class JSONExtractionError(ValueError):
    """The model's text is not one JSON value (optionally inside one ```json fence)."""


_FENCE = re.compile(r"\A```(?:json|JSON)?[ \t]*\n(?P<body>.*?)\n?```\Z", re.DOTALL)


def extract_json(text: str) -> Any:
    """Parse a model's JSON answer. Strict: the whole text (stripped) must be one JSON value,
    or one fenced block ```` ```json ... ``` ```` (or a bare ```` ``` ```` fence) and nothing else."""
    body = text.strip()
    m = _FENCE.match(body)
    if m:
        body = m.group("body").strip()
    elif body.startswith("```"):
        raise JSONExtractionError("unterminated or malformed code fence")
    if not body:
        raise JSONExtractionError("empty answer")
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise JSONExtractionError(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


# -- Message Batches -----------------------------------------------------------------------------
_CUSTOM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def valid_custom_id(custom_id: str) -> bool:
    """The API accepts custom ids of 1-64 characters from ``[A-Za-z0-9_-]``."""
    return bool(_CUSTOM_ID.match(custom_id))


def batch_request(custom_id: str, prompt: str, **params: Any) -> dict:
    """One batch entry: ``{"custom_id", "params"}`` with the same body :func:`complete` sends."""
    if not valid_custom_id(custom_id):
        raise ValueError(f"custom_id {custom_id!r} must match [A-Za-z0-9_-]{{1,64}}")
    return {"custom_id": custom_id, "params": message_params(prompt, **params)}


def create_batch(client: "anthropic.Anthropic", requests: list[dict]) -> str:
    """Submit a Message Batch; return its id (checkpoint it at once: the batch is being paid for)."""
    ids = [r["custom_id"] for r in requests]
    if len(set(ids)) != len(ids):
        raise ValueError("custom_id values must be unique within a batch")
    return client.messages.batches.create(requests=requests).id


class BatchPending(UserError):
    """A batch did not end within the wait allowed; rerunning resumes polling the same batch."""


def poll_batch(client: "anthropic.Anthropic", batch_id: str, *, interval: float = 30.0,
               timeout: float | None = None, on_status: Callable[[Any], None] | None = None) -> Any:
    """Poll until the batch has ``processing_status == "ended"``; return the SDK ``MessageBatch``.

    Raises :class:`BatchPending` if ``timeout`` seconds pass first (nothing is lost: the id is in
    the caller's checkpoint and a rerun polls again instead of paying again).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        batch = client.messages.batches.retrieve(batch_id)
        if on_status:
            on_status(batch)
        if batch.processing_status == "ended":
            return batch
        if deadline is not None and time.monotonic() >= deadline:
            counts = batch.request_counts
            raise BatchPending(
                f"message batch {batch_id} is still {batch.processing_status} "
                f"({counts.processing} processing, {counts.succeeded} succeeded)",
                hint="rerun the same command later: it resumes polling this batch without resubmitting",
            )
        time.sleep(interval)


@dataclass(frozen=True)
class BatchResult:
    custom_id: str
    text: str | None  # None unless succeeded
    usage: Usage
    error: str | None  # None when succeeded; else errored / expired / canceled with details


def batch_results(client: "anthropic.Anthropic", batch_id: str) -> Iterator[BatchResult]:
    """The results of an ended batch, one per request (in no particular order)."""
    for line in client.messages.batches.results(batch_id):
        result = line.result
        if result.type == "succeeded":
            yield BatchResult(line.custom_id, message_text(result.message), Usage.from_sdk(result.message.usage), None)
        elif result.type == "errored":
            err = getattr(result.error, "error", None)
            detail = f"{getattr(err, 'type', 'error')}: {getattr(err, 'message', '')}" if err else "errored"
            yield BatchResult(line.custom_id, None, Usage(), f"batch request errored ({detail})")
        else:
            yield BatchResult(line.custom_id, None, Usage(), f"batch request {result.type}")
