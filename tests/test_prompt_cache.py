"""Cached prompt tokens: the granularity rule, the usage blocks of each API, their price, and a run
against the fake server reporting OpenAI-style cached_tokens that records, totals and shows them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from emobench.cli import app
from emobench.config import Price
from emobench.endpoints.client import OpenAICompatClient, prompt_cache_usage
from emobench.endpoints.litellm_client import LiteLLMClient
from emobench.endpoints.prompt_cache import CacheRule, PrefixCache, prompt_tokens
from emobench.records import EpisodeJudgement, Sampling
from emobench.rundir import RunDir, read_records
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder

tokens = st.lists(st.integers(0, 50), max_size=1400)


@given(st.lists(tokens, min_size=1, max_size=6))
def test_cached_tokens_are_whole_blocks_of_a_prefix_seen_before_and_never_below_the_minimum(prompts: list[list[int]]) -> None:
    cache, seen = PrefixCache(), []
    for prompt in prompts:
        cached = cache.admit(prompt)
        shared = max((_common(prompt, earlier) for earlier in seen), default=0)
        assert cached % 128 == 0 and cached <= len(prompt)
        assert cached == (shared // 128 * 128 if shared >= 1024 else 0)
        seen.append(prompt)


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_a_prompt_sent_again_is_cached_to_its_last_whole_block() -> None:
    cache, prompt = PrefixCache(CacheRule(minimum=1024, block=128)), list(range(1300))
    assert cache.admit(prompt) == 0 and cache.admit(prompt) == 1280
    assert cache.admit(prompt[:1000]) == 0  # below the minimum, though every token was seen
    assert cache.admit([7, *prompt[1:]]) == 0  # a prefix breaks at its first token


def test_the_prompt_is_counted_message_by_message() -> None:
    one = [{"role": "system", "content": "You rate replies."}, {"role": "user", "content": "Hello there."}]
    assert prompt_tokens(one[:1]) == prompt_tokens(one)[: len(prompt_tokens(one[:1]))]
    assert prompt_tokens([{"role": "user", "content": [{"type": "text", "text": "Hello there."}]}]) == prompt_tokens(one[1:])


@pytest.mark.parametrize(("usage", "expected"), [
    ({"prompt_tokens": 2000, "prompt_tokens_details": {"cached_tokens": 1536}}, (1536, 0)),  # OpenAI, vLLM
    ({"prompt_tokens": 2000, "prompt_cache_hit_tokens": 1920, "prompt_cache_miss_tokens": 80}, (1920, 0)),  # DeepSeek
    ({"prompt_tokens": 2000, "prompt_tokens_details": None}, (0, 0)),
    ({"prompt_tokens": 10}, (0, 0)),
    (None, (0, 0)),
    (SimpleNamespace(prompt_tokens=3000, prompt_tokens_details=SimpleNamespace(cached_tokens=2048),
                     cache_read_input_tokens=2048, cache_creation_input_tokens=512), (2048, 512)),  # Anthropic via litellm
    (SimpleNamespace(prompt_tokens=3000, prompt_tokens_details=None, cache_read_input_tokens=1024), (1024, 0)),
    ({"prompt_tokens_details": {"cached_tokens": "many"}}, (0, 0)),  # a server's nonsense is no count
])
def test_each_apis_cached_tokens_are_read(usage: Any, expected: tuple[int, int]) -> None:
    assert prompt_cache_usage(usage) == expected


@given(st.integers(0, 10**7), st.integers(0, 10**6), st.floats(0, 1), st.floats(0, 1),
       st.floats(0.01, 100), st.floats(0, 1), st.floats(1, 2))
def test_cached_tokens_cost_what_their_price_says(prompt: int, completion: int, read_share: float, write_share: float,
                                                 rate: float, discount: float, premium: float) -> None:
    cached = int(prompt * read_share)
    written = int((prompt - cached) * write_share)
    full = Price(input_per_mtok=rate, output_per_mtok=2 * rate)
    priced = Price(input_per_mtok=rate, output_per_mtok=2 * rate, cached_prompt_per_mtok=rate * discount,
                   cache_write_per_mtok=rate * premium)
    # No cache rate: every prompt token at the input price, as before.
    assert full.cost_usd(prompt, completion, cached, written) == pytest.approx((prompt * rate + completion * 2 * rate) / 1e6)
    expected = ((prompt - cached - written) * rate + cached * rate * discount + written * rate * premium
                + completion * 2 * rate) / 1e6
    assert priced.cost_usd(prompt, completion, cached, written) == pytest.approx(expected)
    assert priced.cost_usd(prompt, completion, cached, written, batched=True) == pytest.approx(expected / 2)


LONG = "I keep going over what happened at work and I cannot put it down at night. " * 40  # ~700 tokens


def test_both_clients_record_the_servers_cached_tokens() -> None:
    messages = [{"role": "system", "content": LONG}, {"role": "user", "content": LONG}]

    async def twice(client: Any) -> list[Any]:
        done = [await client.complete(messages, Sampling(), seed=i) for i in range(2)]
        await client.aclose()
        return done

    with FakeOpenAIServer(FakeState(prompt_cache=True)) as server:
        lean = asyncio.run(twice(OpenAICompatClient(server.base_url, "fake-model")))
        routed = asyncio.run(twice(LiteLLMClient("fake-model", base_urls=(server.base_url,))))
    size = len(prompt_tokens(messages))
    assert size > 1024 and [d.prompt_tokens for d in lean + routed] == [size] * 4
    assert [d.cached_prompt_tokens for d in lean] == [0, size // 128 * 128]
    assert [d.cached_prompt_tokens for d in routed] == [size // 128 * 128] * 2  # the server had seen it


def long_replies(body: dict[str, Any]) -> str:
    """default_responder, with a subject reply long enough that the judge's prompts pass 1,024 tokens."""
    return LONG if body.get("response_format") is None else default_responder(body)


@pytest.fixture(scope="module")
def cached_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, FakeOpenAIServer]:
    out = tmp_path_factory.mktemp("cached")
    with FakeOpenAIServer(FakeState(prompt_cache=True, responder=long_replies)) as server:
        price = {"input_per_mtok": 2.0, "output_per_mtok": 8.0, "cached_prompt_per_mtok": 0.5}
        cfg = write_config(out / "c.yaml", server.base_url, split="test", max_turns=4, min_turns=2, seeds=[0, 1],
                           judges=[{"binding": f"openai:fake-model@{server.base_url}", "label": "judge-0", "price": price}])
        res = CliRunner().invoke(app, ["run", "--config", str(cfg), "--out", str(out), "--run-id", "r", "--no-progress",
                                       "--no-cache", "--limit", "1", "--no-references"], env={"COLUMNS": "250"})
        assert res.exit_code == 0, res.output
        return out / "r", res, server


def test_a_run_records_totals_prices_and_shows_the_cached_tokens(cached_run: tuple[Path, Any, FakeOpenAIServer]) -> None:
    run_dir, res, server = cached_run
    rd = RunDir(run_dir)
    judge = [c for e in rd.read_episodes() for c in e.calls if c.role == "judge"]
    assert any(c.cached_prompt_tokens for c in judge)  # each turn's judge prompt begins as the one before
    reported = [r["body"] for r in server.state.requests]
    assert len(reported) == sum(len(e.calls) for e in rd.read_episodes()) + sum(
        len(j.calls) for j in read_records(rd.judgements, EpisodeJudgement))
    accounting = rd.read_report()["accounting"]
    row = accounting["judge:fake-model"]
    calls = judge + [c for j in read_records(rd.judgements, EpisodeJudgement) for c in j.calls]
    assert row["cached_prompt_tokens"] == sum(c.cached_prompt_tokens for c in calls) > 0
    cost = sum((c.prompt_tokens - c.cached_prompt_tokens) * 2.0 + c.cached_prompt_tokens * 0.5 + c.completion_tokens * 8.0
               for c in calls) / 1e6
    assert row["cost_usd"] == pytest.approx(cost, abs=1e-6)
    assert rd.read_manifest()["accounting"] == accounting
    cached = sum(a["cached_prompt_tokens"] for a in accounting.values())
    assert f"{cached} read from the provider's prompt cache" in res.output
    shown = CliRunner().invoke(app, ["show", str(run_dir)], env={"COLUMNS": "250"})
    assert shown.exit_code == 0 and f"{cached} read from the provider's prompt cache" in shown.output, shown.output
