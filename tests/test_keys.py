"""Keys stay with the host they belong to, and preflight reaches every endpoint before the
first paid call. Real requests to loopback servers that record every header."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from emobench.cli import app
from emobench.config import RoleConfig
from emobench.endpoints.client import OpenAICompatClient, RetryPolicy
from emobench.endpoints.keys import NO_KEY, key_for, migration_hint
from emobench.endpoints.litellm_client import LiteLLMClient
from emobench.errors import InputError
from emobench.records import Sampling
from tests.conftest import Serve, write_config
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder

cli = CliRunner()
MSG = [{"role": "user", "content": "hi"}]
OPENAI_SECRET = "sk-openai-SECRET-4242"
OWN_SECRET = "sk-own-SECRET-1717"


def _auth(records: list[dict[str, Any]]) -> list[str | None]:
    """Each request's Authorization header (httpx sends it in lower case), or None."""
    return [next((v for k, v in r["headers"].items() if k.lower() == "authorization"), None) for r in records]


def _run(cfg: Path, *args: str | Path, env: dict[str, str] | None = None) -> Any:
    return cli.invoke(app, ["run", "--config", str(cfg), "--no-progress", *map(str, args)], env=env)


def _one_error(result: Any) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "--resume" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error")]
    assert len(errors) == 1, result.output
    return errors[0]


@given(
    host=st.from_regex(r"[a-z][a-z0-9-]{0,12}(\.[a-z]{2,6}){0,2}", fullmatch=True),
    port=st.sampled_from(["", ":8000", ":443"]),
    path=st.sampled_from(["/v1", "", "/v1beta/openai", "/openai/deployments/x"]),
)
def test_openai_key_goes_to_openai_host_only(host: str, port: str, path: str) -> None:
    url = f"https://{host}{port}{path}"
    saved = {k: os.environ.get(k) for k in ("OPENAI_API_KEY", "EMOBENCH_OWN_KEY")}
    os.environ.update(OPENAI_API_KEY=OPENAI_SECRET, EMOBENCH_OWN_KEY=OWN_SECRET)
    try:
        assert key_for(url, None) == (OPENAI_SECRET if host == "api.openai.com" else None)
        assert key_for(url, "EMOBENCH_OWN_KEY") == OWN_SECRET  # the named variable goes wherever its role goes
        assert key_for(f"https://api.openai.com{port}{path}", None) == OPENAI_SECRET
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_a_run_sends_each_key_to_its_own_host_and_writes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPENAI_API_KEY is set; the subject and user are on a server of their own without
    api_key_env, the judge on one that wants the key its api_key_env names."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_SECRET)
    monkeypatch.setenv("EMOBENCH_JUDGE_KEY", OWN_SECRET)
    with (
        FakeOpenAIServer(FakeState(models=("fake-model",))) as open_server,
        FakeOpenAIServer(FakeState(models=("fake-model",), key=OWN_SECRET)) as keyed,
    ):
        cfg = write_config(tmp_path / "run.yaml", open_server.base_url)
        data = yaml.safe_load(cfg.read_text())
        data["judges"][0].update(binding=f"openai:fake-model@{keyed.base_url}", api_key_env="EMOBENCH_JUDGE_KEY")
        cfg.write_text(yaml.safe_dump(data))
        result = _run(cfg, "--out", tmp_path / "runs", "--run-id", "r", "--cache-dir", tmp_path / "cache")
        assert result.exit_code == 0, result.output
        assert open_server.state.requests and open_server.state.gets
        assert set(_auth(open_server.state.requests + open_server.state.gets)) == {None}
        assert keyed.state.requests and keyed.state.gets
        assert set(_auth(keyed.state.requests + keyed.state.gets)) == {f"Bearer {OWN_SECRET}"}
        # preflight reached both endpoints before the first chat call
        assert keyed.state.gets[0]["path"] == "/v1/models" and open_server.state.gets[0]["path"] == "/v1/models"
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "episodes.jsonl" for p in written)
    for path in written:
        data_bytes = path.read_bytes()
        assert OPENAI_SECRET.encode() not in data_bytes and OWN_SECRET.encode() not in data_bytes, path


def test_litellm_on_its_own_sends_openai_api_key_to_openai_base_url(
    fake: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why emobench gives litellm its base and key: left alone, it sends OPENAI_API_KEY to
    wherever OPENAI_BASE_URL points."""
    import litellm

    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    asyncio.run(litellm.acompletion(model="openai/fake-model", messages=MSG, max_retries=0))
    assert _auth(fake.state.requests) == [f"Bearer {OPENAI_SECRET}"]


@pytest.mark.parametrize("variable", ["OPENAI_BASE_URL", "OPENAI_API_BASE"])
def test_a_litellm_role_redirected_to_another_host_sends_no_openai_key(
    fake: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv(variable, fake.base_url)
    client = LiteLLMClient("openai/fake-model", max_concurrency=2, timeout_s=10)
    assert asyncio.run(client.complete(MSG, Sampling(), seed=0)).text
    assert _auth(fake.state.requests) == [f"Bearer {NO_KEY}"]
    # ... and with api_key_env, the named key goes there.
    monkeypatch.setenv("EMOBENCH_OWN_KEY", OWN_SECRET)
    keyed = LiteLLMClient("openai/fake-model", timeout_s=10, api_key_env="EMOBENCH_OWN_KEY")
    asyncio.run(keyed.complete(MSG, Sampling(), seed=1))
    assert _auth(fake.state.requests)[-1] == f"Bearer {OWN_SECRET}"
    # A dry run of a litellm:openai/ subject reaches the redirected base without the key too.
    cfg = write_config(tmp_path / "run.yaml", fake.base_url)
    result = _run(cfg, "--subject", "litellm:openai/fake-model", "--dry-run", env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert fake.state.gets and set(_auth(fake.state.gets)) == {None}
    assert len(fake.state.requests) == 2  # the two calls above; the dry run made none


def test_replicas_behind_the_router_obey_the_same_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_SECRET)
    monkeypatch.setenv("EMOBENCH_OWN_KEY", OWN_SECRET)
    with FakeOpenAIServer() as one, FakeOpenAIServer() as two:
        urls = (one.base_url, two.base_url)
        for key_env, expected in ((None, f"Bearer {NO_KEY}"), ("EMOBENCH_OWN_KEY", f"Bearer {OWN_SECRET}")):
            one.state.requests.clear()
            two.state.requests.clear()
            client = LiteLLMClient("fake-model", base_urls=urls, timeout_s=10, api_key_env=key_env)

            async def go(c: LiteLLMClient = client) -> None:
                await asyncio.gather(*(c.complete(MSG, Sampling(), seed=i) for i in range(8)))

            asyncio.run(go())
            seen = _auth(one.state.requests + two.state.requests)
            assert len(seen) == 8 and set(seen) == {expected}


def test_a_401_to_a_role_that_sent_no_key_names_api_key_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_SECRET)
    with FakeOpenAIServer(FakeState(key="the-right-key")) as server:
        cfg = write_config(tmp_path / "run.yaml", server.base_url)
        for args in ((), ("--dry-run",)):
            line = _one_error(_run(cfg, "--out", tmp_path / "runs", *args))
            assert server.base_url in line and "HTTP 401 to a request with no key" in line and "api_key_env" in line
        assert server.state.requests == [] and not (tmp_path / "runs").exists()
        # A server that lets GET /models through but refuses the chat call: the same line mid-run.
        client = OpenAICompatClient(server.base_url, "m")
        with pytest.raises(InputError, match="no key; name the variable holding its key in the role's api_key_env"):
            asyncio.run(client.complete(MSG, Sampling(), seed=0))
        monkeypatch.setenv("EMOBENCH_OWN_KEY", "a-wrong-key")
        data = yaml.safe_load(cfg.read_text())
        for role in (*data["subjects"], data["user"], *data["judges"]):
            role["api_key_env"] = "EMOBENCH_OWN_KEY"
        cfg.write_text(yaml.safe_dump(data))
        assert "refused the key in EMOBENCH_OWN_KEY" in _one_error(_run(cfg, "--dry-run"))


def test_a_401_in_the_middle_of_a_run_is_the_same_one_line(tmp_path: Path) -> None:
    """A host whose model list is open but whose chat calls want a key: no retry, no --resume."""
    with FakeOpenAIServer(FakeState(key="the-right-key", open_models=True)) as server:
        cfg = write_config(tmp_path / "run.yaml", server.base_url)
        line = _one_error(_run(cfg, "--out", tmp_path / "runs", "--run-id", "r", "--no-cache"))
        assert line == (f"error: {server.base_url}: api_key_env: answered HTTP 401 to a request with no key; "
                        "name the variable holding its key in the role's api_key_env")
        assert server.state.gets and server.state.requests
        bodies = [repr(sorted(r["body"].items())) for r in server.state.requests]
        assert len(set(bodies)) == len(bodies)  # none was retried


@pytest.mark.parametrize("dry_run", [False, True])
def test_an_unreachable_endpoint_stops_the_run_before_any_call(
    fake: FakeOpenAIServer, tmp_path: Path, dry_run: bool
) -> None:
    """The config's placeholder port used to cost 9 s of retries, exit 3 and advice to --resume."""
    cfg = write_config(tmp_path / "run.yaml", fake.base_url)
    dead = "http://127.0.0.1:9/v1"
    started = time.perf_counter()
    result = _run(cfg, "--user", f"openai:fake-model@{dead}", "--out", tmp_path / "runs", *(["--dry-run"] if dry_run else []))
    line = _one_error(result)
    assert line.startswith("error: --user: user.binding: the openai:fake-model@") and f"GET {dead}/models failed" in line
    assert time.perf_counter() - started < 8
    assert fake.state.requests == [] and not (tmp_path / "runs").exists()


def test_a_bad_models_answer_is_refused(tmp_path: Path) -> None:
    with FakeOpenAIServer(FakeState(prefix="/v2")) as server:  # GET /v1/models gets {"status": "ok"}
        cfg = write_config(tmp_path / "run.yaml", server.base_url.replace("/v2", "/v1"))
        assert "answered with no model list (no data[].id)" in _one_error(_run(cfg, "--dry-run"))


def test_a_model_the_endpoint_does_not_list_is_a_warning(tmp_path: Path) -> None:
    with FakeOpenAIServer(FakeState(models=("other-model", "a", "b", "c"))) as server:
        cfg = write_config(tmp_path / "run.yaml", server.base_url)
        result = _run(cfg, "--dry-run", env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        warnings = [line for line in result.output.splitlines() if line.startswith("warning")]
        assert warnings == [f"warning: {server.base_url} does not list the model fake-model "
                            "(it lists other-model, a, b, …); calls to it may fail"]
        assert server.state.requests == [] and len(server.state.gets) == 1  # one GET per endpoint and key


def test_a_dry_run_refuses_a_missing_openai_key(fake: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for variable in ("OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(variable, raising=False)
    cfg = write_config(tmp_path / "run.yaml", fake.base_url)
    line = _one_error(_run(cfg, "--subject", "litellm:openai/gpt-4o-mini", "--dry-run"))
    assert "subjects[0].binding: the litellm:openai/gpt-4o-mini role needs OPENAI_API_KEY" in line
    line = _one_error(_run(cfg, "--subject", "openai:gpt-4o-mini@https://api.openai.com/v1", "--dry-run"))
    assert "calls api.openai.com, which needs OPENAI_API_KEY; it is not set" in line
    # Redirected to another host, OPENAI_API_KEY would not be sent, so it is not asked for.
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    result = _run(cfg, "--subject", "litellm:openai/fake-model", "--dry-run", env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert fake.state.requests == []


@pytest.mark.parametrize(
    "binding, key_env, hint",
    [
        ("openai:m@https://colleague.example:8000/v1", None, "colleague.example"),
        ("openai:m@https://openrouter.ai/api/v1,https://x.example/v1", None, "openrouter.ai, x.example"),
        ("openai:m@https://colleague.example:8000/v1", "OPENAI_API_KEY", None),
        ("openai:m@http://127.0.0.1:8000/v1", None, None),
        ("openai:m@http://localhost:8000/v1", None, None),
        ("openai:m@http://[::1]:8000/v1", None, None),
        ("openai:m@https://api.openai.com/v1", None, None),
        ("scripted:echo", None, None),
    ],
)
def test_the_migration_hint_names_each_remote_host_once(
    binding: str, key_env: str | None, hint: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_SECRET)
    roles = [("user", RoleConfig(binding=binding, api_key_env=key_env))] * 2
    line = migration_hint(roles)
    if hint is None:
        assert line is None
    else:
        assert line == (f"note: OPENAI_API_KEY is no longer sent to {hint}; add `api_key_env: OPENAI_API_KEY` "
                        "to the role if that host expects it")
    monkeypatch.delenv("OPENAI_API_KEY")
    assert migration_hint(roles) is None  # nothing was ever sent


def test_resolving_a_role_names_an_unset_key_variable_before_its_first_call(
    fake: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command without a preflight (calibrate, validate) meets the check when its endpoint is resolved."""
    from emobench.endpoints.pool import EndpointPool

    monkeypatch.delenv("EMOBENCH_TEST_UNSET_KEY", raising=False)
    role = RoleConfig(binding=f"openai:fake-model@{fake.base_url}", api_key_env="EMOBENCH_TEST_UNSET_KEY")

    async def resolve() -> None:
        async with AsyncExitStack() as stack:
            await EndpointPool(stack, Path("logs")).resolve(role)

    with pytest.raises(InputError, match=r"role\.api_key_env: the .* role's key variable EMOBENCH_TEST_UNSET_KEY is not set"):
        asyncio.run(resolve())
    assert fake.state.requests == []


def test_the_endpoints_import_nothing_above_them() -> None:
    code = "import sys, emobench.endpoints.pool; print(*(m for m in sys.modules if m.startswith('emobench.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = {m.split(".")[1] for m in out.split()}
    assert loaded <= {"endpoints", "errors", "records", "library_paths", "user_cache"}, loaded


BAD_KEY = "sk-\u2026"  # a placeholder's ellipsis pasted as a key: no HTTP header can carry it
FAST_RETRY = RetryPolicy(attempts=4, backoff_max_s=0.01, backoff_multiplier_s=0.01, retry_after_cap_s=0.01)


@pytest.mark.parametrize("kind", ["openai", "litellm", "router"])
def test_a_non_ascii_key_is_refused_by_the_client_not_retried(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Commands without a preflight (calibrate, validate) meet it at the client: one InputError, no call."""
    fake = serve(default_responder)
    monkeypatch.setenv("EMOBENCH_TEST_KEY", BAD_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    client: OpenAICompatClient | LiteLLMClient = {
        "openai": lambda: OpenAICompatClient(fake.base_url, "fake-model", api_key_env="EMOBENCH_TEST_KEY", retry=FAST_RETRY),
        "litellm": lambda: LiteLLMClient("openai/fake-model", api_key_env="EMOBENCH_TEST_KEY", retry=FAST_RETRY),
        "router": lambda: LiteLLMClient("fake-model", base_urls=(fake.base_url,), api_key_env="EMOBENCH_TEST_KEY",
                                        retry=FAST_RETRY),
    }[kind]()
    with pytest.raises(InputError, match=r"EMOBENCH_TEST_KEY.*U\+2026"):
        asyncio.run(client.complete(MSG, Sampling(), seed=0))
    assert fake.state.requests == [] and not client.stats.faults


def test_litellm_s_missing_credentials_is_one_error_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(variable, raising=False)
    client = LiteLLMClient("openai/gpt-4o-mini", retry=FAST_RETRY)
    with pytest.raises(InputError, match="OPENAI_API_KEY") as caught:
        asyncio.run(client.complete(MSG, Sampling(), seed=0))
    assert "\n" not in str(caught.value) and not client.stats.faults
