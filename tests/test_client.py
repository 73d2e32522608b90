"""The lean client against the fake server: retry classes, fail-fast, secrets, openai compatibility."""

from __future__ import annotations

import asyncio

import pytest

from emobench.endpoints.binding import parse_binding
from emobench.endpoints.client import OpenAICompatClient, RetryPolicy
from emobench.errors import EndpointError, InputError
from emobench.records import Sampling
from tests.conftest import FAST_RETRY
from tests.fake_openai import FakeOpenAIServer, FakeState

MSG = [{"role": "user", "content": "hi"}]


def _complete(client: OpenAICompatClient, n: int = 1) -> list:
    async def go() -> list:
        try:
            return await asyncio.gather(*(client.complete(MSG, Sampling(), seed=i) for i in range(n)))
        finally:
            await client.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("kind", ["429", "500", "timeout", "truncated", "malformed"])
def test_each_transient_fault_is_retried_and_counted(kind: str) -> None:
    state = FakeState(fault_rate=0.5, fault_kinds=(kind,), fault_seed=3, timeout_sleep_s=1.0)
    with FakeOpenAIServer(state) as server:
        retry = RetryPolicy(attempts=10, backoff_max_s=0.02, backoff_multiplier_s=0.01)
        client = OpenAICompatClient(server.base_url, "m", timeout_s=0.5 if kind == "timeout" else 10, retry=retry)
        results = _complete(client, n=12)
    assert len(results) == 12 and all(r.text for r in results)
    expected = {"429": "http_429", "500": "http_500", "timeout": "timeout", "truncated": "truncated", "malformed": "malformed"}[
        kind
    ]
    assert state.injected[kind] > 0
    assert client.stats.faults[expected] == state.injected[kind]
    assert sum(r.attempts for r in results) == 12 + sum(client.stats.faults.values())


def test_retry_after_is_honoured() -> None:
    state = FakeState(fault_rate=1.0, fault_kinds=("429",))
    with FakeOpenAIServer(state) as server:
        client = OpenAICompatClient(server.base_url, "m", retry=FAST_RETRY)
        with pytest.raises(EndpointError) as info:
            _complete(client)
    assert "gave up after 4 attempts" in str(info.value) and server.base_url in str(info.value)


def test_client_error_fails_fast_without_retry() -> None:
    with FakeOpenAIServer(FakeState()) as server:
        client = OpenAICompatClient(server.base_url.replace("/v1", "/nope"), "m", retry=FAST_RETRY)
        with pytest.raises(EndpointError, match=r"HTTP (404|405|501)"):
            _complete(client)
        assert client.stats.faults == {}


def test_api_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMOBENCH_TEST_KEY", "sk-secret-123")
    with FakeOpenAIServer(FakeState()) as server:
        client = OpenAICompatClient(server.base_url, "m", api_key_env="EMOBENCH_TEST_KEY")
        _complete(client)
        assert server.state.requests[0]["headers"]["Authorization"] == "Bearer sk-secret-123"
    assert "sk-secret" not in repr(vars(client))


def test_fake_server_speaks_the_openai_protocol() -> None:
    from openai import OpenAI

    with FakeOpenAIServer(FakeState()) as server:
        resp = OpenAI(base_url=server.base_url, api_key="x").chat.completions.create(model="m", messages=MSG)  # type: ignore[arg-type]
    assert resp.choices[0].message.content


@pytest.mark.parametrize(
    "spec, problem",
    [
        ("nonsense", "bad role binding"),
        ("gpt4:foo", "unknown kind"),
        ("openai:model", "expected openai:MODEL@BASE_URL"),
        ("openai:m@localhost:8000", "must start with http:// or https://"),
        ("openai:m@ftp://h/v1", "must start with http:// or https://"),
        ("openai:m@http://h/v1?key=x", "has a query or a fragment"),
        ("openai:m@http://h/v1#x", "has a query or a fragment"),
        ("litellm:gpt-4o", "PROVIDER/MODEL"),
    ],
)
def test_bad_bindings_name_the_field(spec: str, problem: str) -> None:
    with pytest.raises(InputError) as info:
        parse_binding(spec, source="run.yaml", field="judges[0].binding")
    assert str(info.value).startswith("run.yaml: judges[0].binding: ") and problem in str(info.value)


def test_good_bindings_parse() -> None:
    assert parse_binding("vllm:embedded").kind == "vllm"
    b = parse_binding("openai:qwen@http://a:1/v1,http://b:2/v1")
    assert b.base_urls == ("http://a:1/v1", "http://b:2/v1") and b.model == "qwen"
    assert parse_binding("litellm:anthropic/claude-x").model == "anthropic/claude-x"


@pytest.mark.parametrize(
    "url, base",
    [
        ("https://generativelanguage.googleapis.com/v1beta/openai/", "https://generativelanguage.googleapis.com/v1beta/openai"),
        ("https://api.deepseek.com", "https://api.deepseek.com"),
        ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1"),
        ("http://h:1/openai/v2", "http://h:1/openai/v2"),
    ],
)
def test_any_http_base_url_is_accepted_and_its_trailing_slash_dropped(url: str, base: str) -> None:
    assert parse_binding(f"openai:m@{url}").base_urls == (base,)


@pytest.mark.parametrize("prefix", ["/v1beta/openai", ""])
def test_the_client_appends_to_the_base_as_given(prefix: str) -> None:
    """A base URL that does not end in /v1 (Gemini's, DeepSeek's) is called at <base>/chat/completions."""
    with FakeOpenAIServer(FakeState(prefix=prefix)) as server:
        base = parse_binding(f"openai:m@{server.base_url}/").base_urls[0]
        assert base == server.base_url
        assert _complete(OpenAICompatClient(base, "m"))[0].text
    assert len(server.state.requests) == 1
