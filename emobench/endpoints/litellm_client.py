"""litellm-backed endpoints: any litellm provider, and a Router over replicas of one model.

litellm is imported lazily (its import costs seconds) and only on these paths; the hot path to
vLLM uses the lean client instead. litellm's own retries and the Router's cooldowns are off:
every failure comes back here and meets the lean client's retry classes (429 waits
Retry-After, 5xx / timeouts / torn or malformed bodies back off), and is counted.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from emobench.endpoints.anthropic_cache import DROPPED, is_anthropic, with_breakpoints
from emobench.endpoints.client import (
    Completion,
    EndpointStats,
    RetryPolicy,
    TransientError,
    _retry_after,
    chat_params,
    key_refused,
    prompt_cache_usage,
    retry_transient,
)
from emobench.endpoints.keys import NO_KEY, import_litellm, key_for, key_variable, litellm_call_params
from emobench.errors import EndpointError, InputError
from emobench.records import Sampling


def _litellm() -> Any:
    return import_litellm()


def _completion(resp: Any, latency: float, attempts: int) -> Completion:
    choice = resp.choices[0]
    usage = getattr(resp, "usage", None)
    cached, written = prompt_cache_usage(usage)
    return Completion(
        text=choice.message.content or "",
        finish_reason=choice.finish_reason,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        latency_s=latency,
        attempts=attempts,
        cached_prompt_tokens=cached,
        cache_write_tokens=written,
    )


def one_line(exc: BaseException) -> str:
    """litellm's messages run over several lines; an error is reported on one."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def transient(exc: Exception) -> TransientError | None:
    """The retry class of a litellm failure, or None when retrying cannot help (other 4xx)."""
    litellm = _litellm()
    if isinstance(exc, litellm.Timeout):
        return TransientError("timeout", one_line(exc))
    if isinstance(exc, litellm.RateLimitError):
        headers = getattr(getattr(exc, "response", None), "headers", None) or {}
        return TransientError("http_429", "rate limited", _retry_after(headers))
    if isinstance(exc, litellm.APIConnectionError):
        return TransientError("connection", one_line(exc))
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and status >= 500:
        # A real 5xx carries the server's headers; a torn body, a dropped connection or an
        # unparseable 200 is reported as a 500 without them, its cause further down the chain.
        if getattr(exc, "litellm_response_headers", None) is None:
            return TransientError(_cause(exc), one_line(exc))
        return TransientError(f"http_{status}", one_line(exc))
    return None


def _cause(exc: BaseException) -> str:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, aiohttp.ClientPayloadError):
            return "truncated"
        if isinstance(seen, aiohttp.ClientConnectionError | ConnectionError):
            return "connection"
        seen = seen.__cause__ or seen.__context__
    return "malformed"


class LiteLLMClient:
    """One provider model through ``litellm.acompletion`` (or a Router when replicas are given)."""

    def __init__(
        self,
        model: str,
        *,
        base_urls: tuple[str, ...] = (),
        max_concurrency: int = 16,
        timeout_s: float = 300.0,
        api_key_env: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.model = model
        self.name = ",".join(base_urls) if base_urls else f"litellm:{model}"
        self._sem = asyncio.Semaphore(max_concurrency)
        self._timeout = timeout_s
        self._api_key_env = api_key_env
        self._retry_policy = retry or RetryPolicy()
        self._router: Any = None
        self._base_urls = base_urls
        self.stats = EndpointStats()

    def _get_router(self) -> Any:
        if self._router is None:
            litellm = _litellm()
            # max_retries 0: the openai SDK under litellm would otherwise retry unseen and uncounted.
            # A replica with no key of its own gets NO_KEY: litellm would fill in OPENAI_API_KEY.
            params = {"model": f"openai/{self.model}", "max_retries": 0}
            deployments = [
                {
                    "model_name": self.model,
                    "litellm_params": {**params, "api_base": url, "api_key": key_for(url, self._api_key_env) or NO_KEY},
                }
                for url in self._base_urls
            ]
            self._router = litellm.Router(
                model_list=deployments,
                routing_strategy="least-busy",
                num_retries=0,
                max_fallbacks=0,
                disable_cooldowns=True,  # a replica that answered 429 once is not benched for the run
                timeout=self._timeout,
            )
        return self._router

    async def _attempt(self, params: dict[str, Any]) -> Any:
        routed = bool(self._base_urls)
        reach = {} if routed else litellm_call_params(self.model, self._api_key_env)
        try:
            if routed:
                return await self._get_router().acompletion(model=self.model, **params)
            if is_anthropic(self.model):
                params = {k: v for k, v in params.items() if k not in DROPPED}
                params["messages"] = with_breakpoints(params["messages"])
            return await _litellm().acompletion(
                model=self.model, timeout=self._timeout, num_retries=0, max_retries=0, **reach, **params
            )
        except InputError:  # a key no header can carry, found before the call
            raise
        except Exception as exc:  # litellm maps every provider error onto its own classes
            if getattr(exc, "status_code", None) == 401 and (routed or reach.get("api_key") == NO_KEY):
                url = self._base_urls[0] if routed else reach["api_base"]
                raise key_refused(self.name, key_variable(url, self._api_key_env)) from None
            text = " ".join(str(exc).split())
            if "Missing credentials" in text:  # the SDK found no key before any request: a setting, not a fault
                found = text[text.index("Missing credentials"):]
                raise InputError(self.name, "api_key_env", f"no key to send: {found}") from None
            fault = transient(exc)
            if fault is None:
                raise EndpointError(self.name, one_line(exc)) from None
            raise fault from None

    async def complete(
        self, messages: list[dict[str, str]], sampling: Sampling, seed: int, response_format: dict[str, Any] | None = None
    ) -> Completion:
        params = chat_params(messages, sampling, seed, response_format)
        async with self._sem:
            started = time.perf_counter()
            try:
                resp, attempts = await self._attempt(params), 1
            except TransientError as first:
                resp, attempts = await retry_transient(
                    lambda: self._attempt(params), first, self._retry_policy, self.stats, self.name
                )
        self.stats.calls += 1
        return _completion(resp, time.perf_counter() - started, attempts)

    async def aclose(self) -> None:
        return None
