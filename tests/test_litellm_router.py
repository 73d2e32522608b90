"""Replicas of one model behind the litellm Router, against two fake servers."""

from __future__ import annotations

import asyncio

from emobench.endpoints.binding import parse_binding
from emobench.endpoints.litellm_client import LiteLLMClient
from emobench.records import Sampling
from tests.fake_openai import FakeOpenAIServer, FakeState


def test_router_spreads_calls_over_replicas() -> None:
    with FakeOpenAIServer(FakeState(latency_s=0.05)) as one, FakeOpenAIServer(FakeState(latency_s=0.05)) as two:
        binding = parse_binding(f"openai:fake-model@{one.base_url},{two.base_url}")
        client = LiteLLMClient(binding.model, base_urls=binding.base_urls, max_concurrency=8, timeout_s=10)

        async def go() -> list[str]:
            done = await asyncio.gather(
                *(client.complete([{"role": "user", "content": f"hi {i}"}], Sampling(), seed=i) for i in range(16))
            )
            return [d.text for d in done]

        texts = asyncio.run(go())
        assert len(texts) == 16 and all(texts)
        assert len(one.state.requests) + len(two.state.requests) == 16
        assert one.state.requests and two.state.requests  # both replicas served
        assert {r["body"]["seed"] for r in one.state.requests + two.state.requests} == set(range(16))
