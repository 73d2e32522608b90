"""A lean async client for OpenAI-compatible chat completions.

The ``openai`` package spends ~10 ms of CPU per call on request and response handling; this
path uses one pooled aiohttp session and orjson, and tenacity for the retry policy:
429 honours Retry-After, 5xx / timeouts / torn or malformed bodies back off with jitter,
other 4xx fail fast.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import aiohttp
import orjson
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from emobench.endpoints.keys import key_variable, read_key
from emobench.errors import EndpointError, InputError
from emobench.records import Sampling


@dataclass(frozen=True)
class Completion:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    attempts: int = 1
    cached_prompt_tokens: int = 0
    cache_write_tokens: int = 0
    batched: bool = False
    cached: bool = False
    template: str | None = None  # an endpoint with its own versioned text (a scripted subject)


@dataclass
class EndpointStats:
    calls: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    # Told of each fault as it happens (the run's fault log); an awaitable it returns is awaited
    # before the call goes on, so a ledger in another process has heard before anything else can die.
    sink: Callable[[str], Awaitable[None] | None] | None = None

    async def fault(self, kind: str) -> None:
        self.faults[kind] += 1
        if self.sink is not None and (told := self.sink(kind)) is not None:
            await told


class ChatEndpoint(Protocol):
    name: str
    model: str

    @property
    def stats(self) -> EndpointStats: ...

    async def complete(
        self, messages: list[dict[str, str]], sampling: Sampling, seed: int, response_format: dict[str, Any] | None = None
    ) -> Completion: ...

    async def aclose(self) -> None: ...


def chat_params(
    messages: list[dict[str, str]], sampling: Sampling, seed: int, response_format: dict[str, Any] | None
) -> dict[str, Any]:
    """The chat-completions body every client sends, so all of them send the same request."""
    params: dict[str, Any] = {
        "messages": messages,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_tokens,
        "seed": seed,
    }
    for penalty in ("frequency_penalty", "presence_penalty"):
        if getattr(sampling, penalty) is not None:
            params[penalty] = getattr(sampling, penalty)
    if response_format is not None:
        params["response_format"] = response_format
    return params


def _count(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def prompt_cache_usage(usage: Any) -> tuple[int, int]:
    """(cached, written) prompt tokens from a usage block, a dict or litellm's object: OpenAI's,
    vLLM's and Gemini's (through litellm) prompt_tokens_details.cached_tokens, DeepSeek's
    prompt_cache_hit_tokens, Anthropic's cache_read_input_tokens and cache_creation_input_tokens."""
    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)

    if usage is None:
        return 0, 0
    details = get(usage, "prompt_tokens_details")
    cached = _count(get(details, "cached_tokens")) if details is not None else 0
    cached = cached or _count(get(usage, "prompt_cache_hit_tokens")) or _count(get(usage, "cache_read_input_tokens"))
    return cached, _count(get(usage, "cache_creation_input_tokens"))


class TransientError(Exception):
    """A failure worth retrying; ``kind`` feeds the fault counters."""

    def __init__(self, kind: str, detail: str, retry_after: float | None = None) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.retry_after = retry_after


@dataclass
class RetryPolicy:
    attempts: int = 6
    backoff_max_s: float = 20.0
    backoff_multiplier_s: float = 0.5
    retry_after_cap_s: float = 60.0


def _retry_after(headers: Any) -> float | None:
    value = headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


_JSON: dict[str, str] = {"Content-Type": "application/json"}

T = TypeVar("T")


async def retry_transient(
    attempt: Callable[[], Awaitable[T]], first: TransientError, policy: RetryPolicy, stats: EndpointStats, name: str
) -> tuple[T, int]:
    """Retry after a failed first attempt (tenacity sees that failure as its attempt 1): 429
    waits Retry-After, other transient faults back off with jitter; every failure is counted."""

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, TransientError) and exc.retry_after is not None:
            return min(exc.retry_after, policy.retry_after_cap_s)
        return float(wait_random_exponential(multiplier=policy.backoff_multiplier_s, max=policy.backoff_max_s)(state))

    async def count(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, TransientError):
            await stats.fault(exc.kind)

    attempts = 0
    try:
        async for tried in AsyncRetrying(
            retry=retry_if_exception_type(TransientError),
            wait=wait,
            stop=stop_after_attempt(policy.attempts),
            after=count,
            reraise=True,
        ):
            with tried:
                attempts += 1
                if attempts == 1:
                    raise first
                result = await attempt()
    except TransientError as exc:
        raise EndpointError(name, f"gave up after {attempts} attempts: {exc}") from exc
    return result, attempts


def refusal(variable: str | None) -> str:
    """What an endpoint's 401 means: with no key sent, the role must name the variable holding one."""
    if variable is None:
        return "answered HTTP 401 to a request with no key; name the variable holding its key in the role's api_key_env"
    return f"answered HTTP 401: it refused the key in {variable}"


def key_refused(endpoint: str, variable: str | None) -> InputError:
    """A 401 is a setting to fix, not a fault to retry or a run to resume."""
    return InputError(endpoint, "api_key_env", refusal(variable))


class SharedSessions:
    """One aiohttp session (its connection pool) per base URL, shared by every role that
    calls it; each role keeps its own client, key, timeout, cap and retries."""

    def __init__(self) -> None:
        self._sessions: dict[str, aiohttp.ClientSession] = {}

    def get(self, base_url: str) -> aiohttp.ClientSession:
        if base_url not in self._sessions:
            self._sessions[base_url] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300))
        return self._sessions[base_url]

    async def aclose(self) -> None:
        for session in self._sessions.values():
            await session.close()
        self._sessions.clear()


class OpenAICompatClient:
    """Chat completions against one ``base_url`` with a per-endpoint concurrency cap."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        max_concurrency: int = 16,
        timeout_s: float = 300.0,
        api_key_env: str | None = None,
        retry: RetryPolicy | None = None,
        sessions: SharedSessions | None = None,
    ) -> None:
        self.name = base_url.rstrip("/")
        self.model = model
        self._url = f"{self.name}/chat/completions"
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._sem = asyncio.Semaphore(max_concurrency)
        # Which variable may hold this URL's key is fixed; its value is read per call.
        self._key_variable = key_variable(self.name, api_key_env)
        self._retry_policy = retry or RetryPolicy()
        self._shared = sessions
        self._session: aiohttp.ClientSession | None = None
        self.stats = EndpointStats()

    def _headers(self) -> dict[str, str]:
        key = read_key(self._key_variable) if self._key_variable else None
        if key:  # read per call from the environment only; never stored on the client
            return {**_JSON, "Authorization": f"Bearer {key}"}
        return _JSON

    async def _post(self, payload: bytes) -> dict[str, Any]:
        if self._shared is not None:
            session = self._shared.get(self.name)
        elif self._session is None:
            session = self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300))
        else:
            session = self._session
        try:
            async with session.post(self._url, data=payload, headers=self._headers(), timeout=self._timeout) as resp:
                body = await resp.read()
                if resp.status == 429:
                    raise TransientError("http_429", "rate limited", _retry_after(resp.headers))
                if resp.status >= 500:
                    raise TransientError(f"http_{resp.status}", body[:200].decode(errors="replace"))
                if resp.status == 401:
                    raise key_refused(self.name, self._key_variable)
                if resp.status >= 400:
                    raise EndpointError(self.name, f"HTTP {resp.status}: {body[:300].decode(errors='replace')}")
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise TransientError("timeout", str(exc) or "request timed out") from exc
        except aiohttp.ClientPayloadError as exc:
            raise TransientError("truncated", str(exc)) from exc
        except aiohttp.ClientConnectionError as exc:
            raise TransientError("connection", str(exc)) from exc
        try:
            data: dict[str, Any] = orjson.loads(body)
            data["choices"][0]["message"]
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
            raise TransientError("malformed", f"unparseable response body ({len(body)} bytes)") from exc
        return data

    async def complete(
        self, messages: list[dict[str, str]], sampling: Sampling, seed: int, response_format: dict[str, Any] | None = None
    ) -> Completion:
        payload = orjson.dumps({"model": self.model, **chat_params(messages, sampling, seed, response_format)})
        async with self._sem:
            started = time.perf_counter()
            try:
                data, attempts = await self._post(payload), 1
            except TransientError as first:  # tenacity's per-call setup is paid only when a retry is due
                data, attempts = await retry_transient(
                    lambda: self._post(payload), first, self._retry_policy, self.stats, self.name
                )
            latency = time.perf_counter() - started
        self.stats.calls += 1
        choice = data["choices"][0]
        usage = data.get("usage") or {}
        cached, written = prompt_cache_usage(usage)
        return Completion(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            latency_s=latency,
            attempts=attempts,
            cached_prompt_tokens=cached,
            cache_write_tokens=written,
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
