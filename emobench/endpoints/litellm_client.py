"""litellm-backed endpoints: any litellm provider, and a Router over replicas of one model.

litellm is imported lazily (its import costs seconds) and only on these paths; the hot path to
vLLM uses the lean client instead.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from emobench.endpoints.client import Completion, EndpointStats, chat_params
from emobench.errors import EndpointError
from emobench.records import Sampling


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map fetch at import
    import litellm

    return litellm


def _completion(resp: Any, latency: float) -> Completion:
    choice = resp.choices[0]
    usage = getattr(resp, "usage", None)
    return Completion(
        text=choice.message.content or "",
        finish_reason=choice.finish_reason,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        latency_s=latency,
    )


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
        retries: int = 5,
    ) -> None:
        self.model = model
        self.name = ",".join(base_urls) if base_urls else f"litellm:{model}"
        self._sem = asyncio.Semaphore(max_concurrency)
        self._timeout = timeout_s
        self._api_key_env = api_key_env
        self._retries = retries
        self._router: Any = None
        self._base_urls = base_urls
        self.stats = EndpointStats()

    def _get_router(self) -> Any:
        if self._router is None:
            litellm = _litellm()
            key = os.environ.get(self._api_key_env or "", "") or "none"
            deployments = [
                {"model_name": self.model, "litellm_params": {"model": f"openai/{self.model}", "api_base": url, "api_key": key}}
                for url in self._base_urls
            ]
            self._router = litellm.Router(
                model_list=deployments, routing_strategy="least-busy", num_retries=self._retries, timeout=self._timeout
            )
        return self._router

    async def complete(
        self, messages: list[dict[str, str]], sampling: Sampling, seed: int, response_format: dict[str, Any] | None = None
    ) -> Completion:
        params = chat_params(messages, sampling, seed, response_format)
        async with self._sem:
            started = time.perf_counter()
            try:
                if self._base_urls:
                    resp = await self._get_router().acompletion(model=self.model, **params)
                else:
                    key = os.environ.get(self._api_key_env) if self._api_key_env else None
                    resp = await _litellm().acompletion(
                        model=self.model, timeout=self._timeout, num_retries=self._retries,
                        **({"api_key": key} if key else {}), **params,
                    )
            except Exception as exc:  # litellm maps every provider error onto its own classes
                raise EndpointError(self.name, f"{type(exc).__name__}: {str(exc)[:300]}") from exc
        self.stats.calls += 1
        return _completion(resp, time.perf_counter() - started)

    async def aclose(self) -> None:
        return None
