"""Replicas of one model behind the litellm Router, against two fake servers."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from emobench.config import load_config_data, validate_config
from emobench.endpoints.binding import parse_binding
from emobench.endpoints.client import Completion, RetryPolicy
from emobench.endpoints.litellm_client import LiteLLMClient
from emobench.errors import EndpointError
from emobench.records import Sampling
from emobench.run.runner import run_benchmark
from emobench.rundir import RunDir
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState

MSG = [{"role": "user", "content": "hi"}]
RETRY = RetryPolicy(attempts=10, backoff_max_s=0.02, backoff_multiplier_s=0.01, retry_after_cap_s=0.02)


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


KIND = {"429": "http_429", "500": "http_500", "timeout": "timeout", "truncated": "truncated", "malformed": "malformed"}


@pytest.mark.parametrize("kind", ["429", "500", "timeout", "truncated", "malformed"])
def test_replicas_retry_every_transient_fault_and_count_it(kind: str) -> None:
    # Issue 13: three 429s used to bench both replicas ("No deployments available") and abort.
    states = [FakeState(fault_rate=0.5, fault_kinds=(kind,), fault_seed=s, timeout_sleep_s=1.0) for s in (1, 2)]
    with FakeOpenAIServer(states[0]) as one, FakeOpenAIServer(states[1]) as two:
        client = LiteLLMClient(
            "fake-model", base_urls=(one.base_url, two.base_url), timeout_s=0.5 if kind == "timeout" else 10, retry=RETRY
        )

        async def go() -> list[Completion]:
            return await asyncio.gather(*(client.complete(MSG, Sampling(), seed=i) for i in range(12)))

        done = asyncio.run(go())
    injected = sum(s.injected[kind] for s in states)
    assert len(done) == 12 and all(d.text for d in done) and injected > 0
    assert client.stats.faults == {KIND[kind]: injected}
    assert sum(d.attempts for d in done) == 12 + injected


def test_a_replica_error_is_one_line() -> None:
    with FakeOpenAIServer(FakeState()) as one:
        url = one.base_url.replace("/v1", "/nope/v1")  # 404: no retry can help
        client = LiteLLMClient("fake-model", base_urls=(url, url), retry=RETRY)
        with pytest.raises(EndpointError) as info:
            asyncio.run(client.complete(MSG, Sampling(), seed=0))
    assert "\n" not in str(info.value) and url in str(info.value) and client.stats.faults == {}


@pytest.mark.soak
def test_replicas_at_20_percent_faults_lose_nothing_over_200_episodes(tmp_path: Path) -> None:
    states = [FakeState(fault_rate=0.2, fault_seed=s, timeout_sleep_s=0.8) for s in (7, 8)]
    with FakeOpenAIServer(states[0]) as one, FakeOpenAIServer(states[1]) as two:
        data = load_config_data(write_config(tmp_path / "run.yaml", "http://127.0.0.1:9/v1", seeds=list(range(100))))
        binding = f"openai:fake-model@{one.base_url},{two.base_url}"
        for role in (*data["subjects"], data["user"], *data["judges"]):
            role.update(binding=binding, timeout_s=0.5, retries=8)
        # Short episodes (one turn, no probe, no holistic pass): the faults are what is tested.
        panel = {"name": "inline", "judges": data.pop("judges"), "holistic": False, "pairwise": False}
        data.update(panel=panel, max_turns=1, min_turns=1, probe=False)
        result = asyncio.run(run_benchmark(validate_config(data, "run.yaml"), tmp_path / "r", show_progress=False))
    rd = RunDir(result.run_dir)
    episodes = rd.read_episodes()
    assert len(episodes) == 200 and len({e.key for e in episodes}) == 200  # 2 demo cases x 100 seeds
    assert one.state.requests and two.state.requests  # both replicas served
    injected = Counter(one.state.injected) + Counter(two.state.injected)
    assert set(injected) == set(KIND) and sum(injected.values()) > 100
    counted = Counter(rd.fault_counts())
    # Every failed attempt is in the run's fault log. A client meets every injected fault but a
    # delay as that fault or, on a slow machine, as its own timeout first; an injected delay it
    # waits out (litellm's timeout bounds reads, not the whole call) is no fault.
    calls = [c for e in episodes for c in e.calls]
    assert sum(counted.values()) == sum(c.attempts - 1 for c in calls)
    assert counted["http_429"] <= injected["429"] and counted["http_500"] <= injected["500"]
    torn = counted["malformed"] + counted["truncated"] + counted["connection"]
    assert torn <= injected["malformed"] + injected["truncated"]
    assert sum(counted.values()) >= sum(injected.values()) - injected["timeout"]
    assert counted["http_429"] > 0 and counted["timeout"] > 0
