"""The ``openai`` provider of :mod:`rag_experiments.llm`: any OpenAI-compatible chat server
(vLLM, Ollama, LM Studio, llama.cpp's server, a LiteLLM gateway, or OpenAI itself) through the
real ``openai`` SDK (the ``api`` extra).

* :func:`make_openai_client`: ``openai.OpenAI(base_url=..., api_key=...)``. The base URL is
  the one given (``--base-url`` / ``llm.base_url``), else ``$OPENAI_BASE_URL``, else OpenAI's;
  it includes the API prefix (``http://localhost:8000/v1``). The key is ``$OPENAI_API_KEY``;
  when it is unset *and* a base URL is given, the placeholder :data:`PLACEHOLDER_KEY` is sent
  (self-hosted servers that check no key ignore it; one that does answers 401, which stops the
  run with one line naming ``OPENAI_API_KEY``). Without a base URL (OpenAI itself) a missing
  key is an error before any request.
* :func:`complete`: one ``chat.completions.create`` (a ``system`` message when given, the user
  prompt, ``max_tokens``; no sampling parameters, like the Anthropic path); the text is
  ``choices[0].message.content``, the usage ``usage.prompt_tokens`` / ``completion_tokens``
  (estimated as for the cost estimate when a server reports none).
* :func:`fatal_api_error`: 401/403 (credentials), 404 (model or path) and an unreachable server
  stop a job; 408/409/429/5xx were retried by the SDK (``max_retries``, honouring
  ``retry-after``) and count as one failed request.

The key is never logged, printed or put in an error message.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError
from ..install_hint import install_hint
from .base import LLMFatalError, Usage, estimate_tokens, request_url_of, short_error

PLACEHOLDER_KEY = "EMPTY"  # what vLLM's documentation passes to a server started without --api-key


def make_openai_client(api_key: str | None = None, base_url: str | None = None, max_retries: int = 4,
                       timeout: float = 60.0) -> Any:
    """An ``openai.OpenAI`` client for chat completions (see the module docstring for the key rule)."""
    try:
        import openai
    except ImportError:
        raise ConfigError("provider openai needs the openai SDK", hint=install_hint("api")) from None
    if max_retries < 0:
        raise ConfigError(f"max_retries must be >= 0, got {max_retries}")
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if not key:
        if base_url is None:
            raise ConfigError("OPENAI_API_KEY is not set (provider openai without a base URL calls OpenAI itself)",
                              hint="export OPENAI_API_KEY=<your key>, or name your own server with --base-url / "
                              "llm.base_url (e.g. http://localhost:8000/v1): a server that needs no key gets a "
                              "placeholder")
        key = PLACEHOLDER_KEY
    return openai.OpenAI(api_key=key, base_url=base_url, max_retries=max_retries, timeout=timeout)


def chat_params(prompt: str, *, model: str, system: str | None = None, max_tokens: int = 1024) -> dict:
    """The chat-completions request body for one user prompt."""
    messages: list[dict] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": prompt})
    return {"model": model, "messages": messages, "max_tokens": max_tokens}


def complete(client: Any, prompt: str, *, model: str, system: str | None = None,
             max_tokens: int = 1024) -> tuple[str, Usage]:
    """One chat completion: the first choice's text and the usage the server reported."""
    if not model:
        raise ConfigError("provider openai: no model named",
                          hint="pass the model name the server serves (--model, rerank.model, query.model)")
    resp = client.chat.completions.create(**chat_params(prompt, model=model, system=system, max_tokens=max_tokens))
    choices = getattr(resp, "choices", None) or []
    message = getattr(choices[0], "message", None) if choices else None
    text = getattr(message, "content", None) or ""
    usage = getattr(resp, "usage", None)
    inp = getattr(usage, "prompt_tokens", None)
    out = getattr(usage, "completion_tokens", None)
    if inp is None:  # a server that reports no usage: the estimate's rule, so costs are not zeroed
        inp = estimate_tokens((system or "") + "\n" + prompt)
    if out is None:
        out = estimate_tokens(text)
    return text, Usage(int(inp), int(out), 1)


def fatal_api_error(exc: BaseException) -> LLMFatalError | None:
    """A :class:`LLMFatalError` if the ``openai`` SDK error ``exc`` will recur for every request."""
    import openai

    where = request_url_of(exc)
    if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
        return LLMFatalError(f"OpenAI-compatible API at {where} refused the credentials "
                             f"({type(exc).__name__}, HTTP {exc.status_code})",
                             hint="check OPENAI_API_KEY (the key your server or gateway expects)")
    if isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError):
        return LLMFatalError(f"OpenAI-compatible API unreachable at {where}: {short_error(exc.__cause__ or exc)}",
                             hint="is the server running? check --base-url / llm.base_url (vLLM: "
                             "http://localhost:8000/v1, Ollama: http://localhost:11434/v1); golden generate/label "
                             "keep every finished answer: rerun to resume")
    if isinstance(exc, openai.NotFoundError):
        return LLMFatalError(f"OpenAI-compatible API at {where}: not found (HTTP 404): {short_error(exc)}",
                             hint="check the model name (--model, rerank.model, query.model: the name the server "
                             "serves) and that the base URL ends with the API prefix (usually /v1)")
    return None
