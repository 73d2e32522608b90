"""Bind a training config's roles once and share them across every environment of a process.

A training config is a run config (roles, panel, split, limits; `subjects[0]` names the policy
in the records) plus an optional `reward:` section. Environments made from one host share the
endpoints' concurrency caps, the vLLM servers and the response cache, as the episodes of one
`emobench run` do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import emobench
from emobench.config import RoleConfig, RunConfig, load_config_data, validate_config
from emobench.endpoints.binding import parse_binding
from emobench.endpoints.cache import ResponseCache
from emobench.endpoints.pool import EndpointPool
from emobench.env.core import EmoEnv, EnvSetup
from emobench.env.held_out import refuse_test_case, refuse_test_config
from emobench.env.rewards import RewardConfig
from emobench.episode.roles import Provenance, WorldRoles
from emobench.errors import InputError
from emobench.judging.mdep import judge_turn
from emobench.prompts import cases_language, load_language_template
from emobench.records import RoleInfo
from emobench.registry import Case, Registry, load_registry
from emobench.run.runner import ROOT, _caller, load_prompts, select_cases


def split_training_config(data: dict[str, Any], source: str | Path) -> tuple[RunConfig, RewardConfig]:
    refuse_test_config(data, source)  # before the run config's default split (test) applies
    data = dict(data)
    try:
        rewards = RewardConfig.model_validate(data.pop("reward", None) or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(source, "reward." + ".".join(str(p) for p in err["loc"]), err["msg"]) from None
    # The persona probe is an out-of-character evaluation question, not a turn of the episode.
    config = validate_config({**data, "probe": False}, source)
    return config, rewards


def load_training_config(path: Path) -> tuple[RunConfig, RewardConfig]:
    return split_training_config(load_config_data(path), path)


def policy_info(role: RoleConfig) -> RoleInfo:
    """The policy as the records name it: what `emobench run` records for an `openai:` subject."""
    binding = parse_binding(role.binding)
    endpoint = binding.base_urls[0] if binding.kind == "openai" and len(binding.base_urls) == 1 else binding.spec
    return RoleInfo(label=role.name, model=binding.model, endpoint=endpoint, sampling=role.sampling)


@dataclass(frozen=True)
class EnvHost:
    registry: Registry
    config: RunConfig
    setup: EnvSetup
    pool: EndpointPool

    def make(self) -> EmoEnv:
        return EmoEnv(self.setup)

    def cases(self) -> list[Case]:
        return select_cases(self.registry, self.config)

    def case(self, case_id: str) -> Case:
        return self.registry.case(case_id)


@asynccontextmanager
async def open_host(
    config: RunConfig,
    rewards: RewardConfig | None = None,
    *,
    root: Path = ROOT,
    log_dir: Path | None = None,
    cache: ResponseCache | None = None,
    policy: RoleInfo | None = None,
) -> AsyncIterator[EnvHost]:
    """Start (or reach) the simulator, director and judge endpoints; stop them on exit."""
    registry = load_registry(root)
    cases = select_cases(registry, config)
    for case in cases:  # a RunConfig built in code has not passed split_training_config
        refuse_test_case(case.id, case.split)
    language = cases_language(cases)
    async with AsyncExitStack() as stack:
        pool = EndpointPool(stack, log_dir or Path.cwd() / "logs", cache)

        async def bind(role: str, rc: RoleConfig) -> Any:
            client, info = await pool.resolve(rc)
            return _caller(role, client, info)

        world = WorldRoles(
            user=await bind("user", config.user),
            judges=tuple([await bind("judge", j) for j in config.judges]),
            judge_turn=judge_turn,
            director=await bind("director", config.director) if config.director else None,
        )
        setup = EnvSetup(
            world=world,
            prompts=load_prompts(root, config, language),
            limits=config.limits(),
            provenance=Provenance(
                config.split, registry.version(config.split), config.config_hash(), emobench.__version__
            ),
            policy=policy or policy_info(config.subjects[0]),
            rewards=rewards or RewardConfig(),
            holistic=load_language_template(root, "judges", config.panel.rubrics["holistic"], config.judges_language(language))
            if config.panel.holistic
            else None,
        )
        yield EnvHost(registry, config, setup, pool)
