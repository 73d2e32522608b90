"""Shared fixtures: the fake OpenAI server, the demo registry, and episode wiring."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from emobench.config import PanelConfig, RoleConfig, RunConfig
from emobench.endpoints.client import OpenAICompatClient, RetryPolicy
from emobench.endpoints.embedded import SERVED_NAME, URL_ENV, embedded_server_args, prepare_embedded_model, served_dtype
from emobench.endpoints.vllm_server import launch_server, stop_server, wait_healthy
from emobench.episode.roles import EpisodePrompts, EpisodeRoles, Provenance, RoleCaller
from emobench.judging.mdep import judge_turn
from emobench.records import RoleInfo, Sampling
from emobench.registry import Registry, load_registry
from emobench.run.runner import ROOT, _caller, load_prompts
from tests.fake_openai import FakeOpenAIServer, FakeState, Responder
from tests.wheel_support import build_wheel

pytest_plugins = ["tests.tiers"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(autouse=True, scope="session")
def _private_response_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    # CLI runs in tests must not fill the user's response cache.
    os.environ["EMOBENCH_RESPONSE_CACHE"] = str(tmp_path_factory.mktemp("cache") / "responses.sqlite")


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeState()) as server:
        yield server


@pytest.fixture(scope="session")
def registry() -> Registry:
    return load_registry(ROOT)


@pytest.fixture(scope="session")
def prompts() -> EpisodePrompts:
    role = RoleConfig(binding="vllm:x")
    return load_prompts(ROOT, RunConfig(subjects=[role], user=role, panel=PanelConfig(judges=[role])))


PROVENANCE = Provenance(split="demo", registry_version="r", config_hash="c", emobench_version="0")
FAST_RETRY = RetryPolicy(attempts=4, backoff_max_s=0.05, backoff_multiplier_s=0.01, retry_after_cap_s=0.05)


def fake_caller(base_url: str, role: str, label: str, *, timeout_s: float = 5.0) -> RoleCaller:
    client = OpenAICompatClient(base_url, "fake-model", timeout_s=timeout_s, retry=FAST_RETRY)
    info = RoleInfo(label=label, model="fake-model", endpoint=base_url, sampling=Sampling(temperature=0.0, max_tokens=64))
    return _caller(role, client, info)


def fake_roles(base_url: str, n_judges: int = 1) -> EpisodeRoles:
    return EpisodeRoles(
        subject=fake_caller(base_url, "subject", "subject-a"),
        user=fake_caller(base_url, "user", "sim"),
        judges=tuple(fake_caller(base_url, "judge", f"judge-{i}") for i in range(n_judges)),
        judge_turn=judge_turn,
    )


def write_config(path: Path, base_url: str, **extra: object) -> Path:
    import yaml

    binding = f"openai:fake-model@{base_url}"
    data = {
        "subjects": [{"binding": binding, "label": "subject-a"}],
        "user": {"binding": binding},
        "judges": [{"binding": binding, "label": "judge-0"}],
        "split": "demo",
        "max_turns": 3,
        "min_turns": 2,
        **extra,
    }
    path.write_text(yaml.safe_dump(data))
    return path


Serve = Callable[[Responder], FakeOpenAIServer]


@pytest.fixture(scope="module")
def _server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeState()) as server:
        yield server


@pytest.fixture
def serve(_server: FakeOpenAIServer) -> Serve:
    """One server per module (each shutdown costs half a second); a test sets its responder."""

    def with_responder(responder: Responder) -> FakeOpenAIServer:
        _server.state.responder = responder
        _server.state.requests.clear()
        return _server

    return with_responder


@pytest.fixture(scope="module")
def _embedded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One vLLM server with the embedded model (a start costs 60-90 s of both cores), started as
    emobench starts it. Its tests are one module (test_vllm_integration.py), so it starts once and
    is stopped when that module ends, not held idle through the rest of the run."""
    dtype = served_dtype()
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    proc, base = launch_server(str(prepare_embedded_model(dtype)), SERVED_NAME, log, embedded_server_args(dtype))
    try:
        asyncio.run(wait_healthy(proc, base, log, 900))
        yield f"{base}/v1"
    finally:
        stop_server(proc)


@pytest.fixture
def embedded_vllm(_embedded_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The shared server's /v1 URL; vllm:embedded roles, in process or in a CLI child, attach to it."""
    monkeypatch.setenv(URL_ENV, _embedded_server)
    return _embedded_server


@pytest.fixture(scope="session")
def emobench_wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The wheel of this checkout and the commit it records: built once, for every install test."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))
