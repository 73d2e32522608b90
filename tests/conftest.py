"""Shared fixtures: the fake OpenAI server, the demo registry, and episode wiring."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from emobench.config import PanelConfig, RoleConfig, RunConfig
from emobench.endpoints.client import OpenAICompatClient, RetryPolicy
from emobench.episode.roles import EpisodePrompts, EpisodeRoles, Provenance, RoleCaller
from emobench.judging.mdep import judge_turn
from emobench.records import RoleInfo, Sampling
from emobench.registry import Registry, load_registry
from emobench.run.runner import ROOT, _caller, load_prompts
from tests.fake_openai import FakeOpenAIServer, FakeState, Responder

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
