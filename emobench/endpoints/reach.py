"""Reach an OpenAI-compatible endpoint before the first paid call: ``GET <base_url>/models``
costs nothing, needs the same key as a chat call, and lists the model ids the server serves."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import orjson

from emobench.endpoints.client import refusal

PROBE_TIMEOUT_S = 15.0
T = TypeVar("T")


@dataclass(frozen=True)
class Reached:
    base_url: str
    models: tuple[str, ...]  # the ids it lists; empty when it lists none
    roots: tuple[str, ...] = ()  # what vLLM lists as each model's source (its folder); absent elsewhere


class Unreachable(Exception):
    """The endpoint could not be reached or gave a bad answer; the message is one line."""


class Refused(Unreachable):
    """The endpoint answered 401."""


async def list_models(
    base_url: str, key: str | None, variable: str | None, timeout_s: float = PROBE_TIMEOUT_S
) -> Reached:
    """GET ``base_url``/models with ``key``, the one a chat call would carry (from ``variable``);
    raise Unreachable (Refused for a 401) with one line."""
    url = f"{base_url.rstrip('/')}/models"
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
            session.get(url, headers=headers) as resp,
        ):
            body = await resp.read()
            status = resp.status
    except (TimeoutError, aiohttp.ServerTimeoutError):
        raise Unreachable(f"GET {url} timed out after {timeout_s:g} s") from None
    except aiohttp.ClientError as exc:
        raise Unreachable(f"GET {url} failed: {' '.join(str(exc).split()) or type(exc).__name__}") from None
    if status == 401:
        raise Refused(refusal(variable))
    if status != 200:
        raise Unreachable(f"GET {url} answered HTTP {status}: {' '.join(body[:200].decode(errors='replace').split())}")
    try:
        listed = orjson.loads(body)["data"]
        return Reached(base_url, tuple(str(m["id"]) for m in listed), tuple(str(m["root"]) for m in listed if m.get("root")))
    except (orjson.JSONDecodeError, KeyError, TypeError):
        raise Unreachable(f"GET {url} answered with no model list (no data[].id): is it an OpenAI-compatible base URL?") from None


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to the end from sync code, also when called inside a running event loop
    (a run's preflight is): in a thread of its own."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
