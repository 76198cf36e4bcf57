"""The only module that talks to the Anthropic API (the real ``anthropic`` SDK, 2.x).

* :func:`make_client` builds a client from ``ANTHROPIC_API_KEY`` (and optionally
  ``ANTHROPIC_BASE_URL``). The SDK's own retries handle 408/409/429/5xx (529 = overloaded),
  honouring ``retry-after-ms`` / ``retry-after``; ``max_retries`` sets how many.
* :func:`complete` sends one Messages request and returns ``(text, usage)``.
* :func:`extract_json` reads the JSON a model answered: a single ```json fence is tolerated,
  nothing else (no prose around it, no trailing commas, no "best effort" repair).
* :data:`PRICES`, :func:`estimate_tokens`, :func:`cost_usd`, :func:`estimate_cost`: what a job
  will cost before it starts and what it cost at the end.
* :func:`create_batch`, :func:`poll_batch`, :func:`batch_results`: the Message Batches API
  (half price, results within 24 h) for bulk jobs.

The API key is never logged, printed or put in an error message.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from .errors import ConfigError, UserError

if TYPE_CHECKING:  # the SDK is imported lazily: commands that never call the API stay fast
    import anthropic

DEFAULT_MODEL = "claude-sonnet-4-6"
DEFAULT_MAX_RETRIES = 4
DEFAULT_TIMEOUT = 60.0
CHARS_PER_TOKEN = 3.5  # input-token estimate when no tokenizer is at hand (English prose + code)
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


def price_for(model: str) -> Price | None:
    """The price of ``model`` (a dated snapshot id falls back to its alias), or None if unknown."""
    name = _DATED.sub("", model)
    name = _ALIASES.get(name, name)
    return PRICES.get(model) or PRICES.get(name)


@dataclass(frozen=True)
class Usage:
    """Token usage of one or more requests (``requests`` counts billed responses)."""

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens,
                     self.requests + other.requests)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict | None) -> "Usage":
        if not obj:
            return cls()
        return cls(int(obj.get("input_tokens", 0)), int(obj.get("output_tokens", 0)), int(obj.get("requests", 0)))

    @classmethod
    def from_sdk(cls, usage: Any) -> "Usage":
        """From an SDK ``Usage``: cache reads/writes are counted as input tokens (upper bound)."""
        inp = (usage.input_tokens or 0) + (getattr(usage, "cache_creation_input_tokens", None) or 0) \
            + (getattr(usage, "cache_read_input_tokens", None) or 0)
        return cls(int(inp), int(usage.output_tokens or 0), 1)


def estimate_tokens(text: str) -> int:
    """Input tokens of ``text`` estimated as ``ceil(chars / 3.5)`` (no tokenizer needed)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def cost_usd(model: str, input_tokens: int, output_tokens: int, *, batch: bool = False,
             price: Price | None = None) -> float | None:
    """USD for the given token counts; None when the model has no known price."""
    price = price or price_for(model)
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

    def describe(self) -> str:
        money = f"~${self.usd:.2f}" if self.usd is not None else "unknown cost (no price for this model)"
        mode = " via the Message Batches API (50% off)" if self.batch else ""
        return (f"{self.requests} requests to {self.model}{mode}: ~{self.input_tokens:,} input + "
                f"~{self.output_tokens:,} output tokens, {money}")


def estimate_cost(model: str, prompts: Iterable[str], *, output_tokens_per_request: int,
                  batch: bool = False, price: Price | None = None) -> CostEstimate:
    """Estimate before starting: input tokens from the full prompt texts, output as given."""
    prompts = list(prompts)
    inp = sum(estimate_tokens(p) for p in prompts)
    out = output_tokens_per_request * len(prompts)
    return CostEstimate(model, len(prompts), inp, out, cost_usd(model, inp, out, batch=batch, price=price), batch)


# -- client ---------------------------------------------------------------------------------------
def make_client(api_key: str | None = None, base_url: str | None = None, max_retries: int = DEFAULT_MAX_RETRIES,
                timeout: float = DEFAULT_TIMEOUT) -> "anthropic.Anthropic":
    """An ``anthropic.Anthropic`` client; the key comes from ``api_key`` or ``$ANTHROPIC_API_KEY``.

    ``base_url`` (else ``$ANTHROPIC_BASE_URL``, else the SDK default) points it elsewhere, e.g.
    at a test stub. A missing key is a :class:`ConfigError` that names the variable only.
    """
    import anthropic

    key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
    if not key:
        raise ConfigError("ANTHROPIC_API_KEY is not set",
                          hint="export ANTHROPIC_API_KEY=<your key> (golden generate/label call the Anthropic API)")
    if max_retries < 0:
        raise ConfigError(f"max_retries must be >= 0, got {max_retries}")
    base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
    return anthropic.Anthropic(api_key=key, base_url=base_url, max_retries=max_retries, timeout=timeout)


class LLMFatalError(UserError):
    """An API error that will recur for every request (bad key, no permission, unknown model)."""


def fatal_api_error(exc: BaseException) -> LLMFatalError | None:
    """A :class:`LLMFatalError` if ``exc`` is an error that retrying other requests cannot fix."""
    import anthropic

    if isinstance(exc, (anthropic.AuthenticationError, anthropic.PermissionDeniedError)):
        return LLMFatalError(f"Anthropic API refused the credentials ({type(exc).__name__}, HTTP {exc.status_code})",
                             hint="check ANTHROPIC_API_KEY")
    if isinstance(exc, anthropic.APIConnectionError) and not isinstance(exc, anthropic.APITimeoutError):
        # refused / DNS / TLS after the SDK's own retries: every other request would wait out the
        # same retries and fail the same way. (A timeout is one slow request: not fatal.)
        return LLMFatalError(f"Anthropic API unreachable at {_base_url(exc)}: {_short(exc.__cause__ or exc)}",
                             hint="check the network or ANTHROPIC_BASE_URL (golden generate/label keep every "
                             "finished answer: rerun to resume)")
    if isinstance(exc, anthropic.NotFoundError):
        return LLMFatalError(f"Anthropic API: not found (HTTP 404): {_short(exc)}",
                             hint="check the model name (--model)")
    return None


def _base_url(exc: BaseException) -> str:
    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    if url is None:
        return "the configured base URL"
    return f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port else "")


def describe_api_error(exc: BaseException) -> str:
    """One line for a failed request (never contains the key: the SDK does not echo it)."""
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "") + f": {_short(exc)}"


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text[:limit] + ("..." if len(text) > limit else "")


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


def complete(client: "anthropic.Anthropic", prompt: str, *, model: str = DEFAULT_MODEL, system: str | None = None,
             max_tokens: int = 1024) -> tuple[str, Usage]:
    """Send one Messages request; return the answer's text and its token usage.

    SDK errors propagate (after the SDK's own retries): callers decide per request.
    """
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
