"""Anthropic models through litellm mark their prompt-cache breakpoints, and what the Messages API
reports as read from and written to its cache is recorded: request bodies checked on a loopback
server that speaks the Messages API and caches as it documents."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emobench.endpoints.anthropic_cache import is_anthropic, with_breakpoints
from emobench.endpoints.client import Completion
from emobench.endpoints.litellm_client import LiteLLMClient
from emobench.records import Sampling
from tests.fake_anthropic import FakeAnthropicServer

roles = st.sampled_from(["user", "assistant"])
messages = st.lists(st.fixed_dictionaries({"role": roles, "content": st.text(min_size=1, max_size=20)}), max_size=8)


@given(st.booleans(), messages)
def test_the_system_message_and_the_one_before_the_last_are_marked(system: bool, turns: list[dict[str, str]]) -> None:
    sent = ([{"role": "system", "content": "rules"}] if system else []) + turns
    marked = with_breakpoints(sent)
    flags = ["cache_control" in m["content"][-1] if isinstance(m["content"], list) else False for m in marked]
    expected = {i for i, m in enumerate(sent) if m["role"] == "system"} | ({len(sent) - 2} if len(sent) >= 3 else set())
    assert {i for i, f in enumerate(flags) if f} == expected and sum(flags) <= 4  # the API's limit
    texts = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in marked]
    assert texts == [m["content"] for m in sent] and [m["role"] for m in marked] == [m["role"] for m in sent]


@pytest.mark.parametrize(("model", "anthropic"), [
    ("anthropic/claude-sonnet-4-5", True), ("claude-3-5-haiku-20241022", True), ("openai/gpt-4.1", False),
    ("openrouter/anthropic/claude-sonnet-4-5", False), ("gpt-4o-mini", False),
])
def test_which_models_are_anthropics(model: str, anthropic: bool) -> None:
    assert is_anthropic(model) is anthropic


LONG = "I keep going over what happened at work and I cannot put it down at night. " * 40  # ~700 tokens


def test_a_growing_conversation_reads_its_prefix_from_anthropics_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeAnthropicServer() as server:
        monkeypatch.setenv("ANTHROPIC_API_BASE", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        client = LiteLLMClient("anthropic/claude-sonnet-4-5")
        conversation: list[dict[str, str]] = [{"role": "system", "content": "You are a kind listener. " + LONG * 2}]

        async def turns() -> list[Completion]:
            done = []
            for turn in range(3):
                conversation.append({"role": "user", "content": f"Turn {turn}. {LONG}"})
                done.append(await client.complete(list(conversation), Sampling(), seed=turn))
                conversation.append({"role": "assistant", "content": done[-1].text})
            return done

        done = asyncio.run(turns())
        bodies = [r["body"] for r in server.state.requests]
        headers = [r["headers"] for r in server.state.requests]
    assert all("seed" not in body for body in bodies)  # the Messages API has none
    assert all(h.get("x-api-key") == "sk-ant-test" for h in headers)
    for body in bodies:
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        last, before = body["messages"][-1], body["messages"][-2:-1]
        assert all("cache_control" not in block for block in _blocks(last))
        assert all("cache_control" in _blocks(m)[-1] for m in before)  # the end of what the next turn repeats
    # Turn 1 writes its system prompt; each later turn reads the prefix the turn before wrote and writes its own.
    assert done[0].cached_prompt_tokens == 0 and done[0].cache_write_tokens > 1024
    assert all(d.cached_prompt_tokens > 1024 and d.cache_write_tokens > 0 for d in done[1:])
    assert done[2].cached_prompt_tokens > done[1].cached_prompt_tokens
    assert all(d.prompt_tokens > d.cached_prompt_tokens + d.cache_write_tokens for d in done)  # litellm counts all three


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content
