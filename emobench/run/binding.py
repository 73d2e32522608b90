"""A run's roles bound to their endpoints, and its prompt templates: what the local runner and
each Ray worker (emobench/run/ray_executor.py) build alike, so both play the same episodes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emobench.config import RoleConfig, RunConfig
from emobench.endpoints.client import ChatEndpoint
from emobench.endpoints.pool import EndpointPool
from emobench.episode.roles import EpisodePrompts, EpisodeRoles, RoleCaller, role_caller
from emobench.errors import InputError
from emobench.judging.mdep import judge_turn
from emobench.prompts import PromptTemplate, load_language_template
from emobench.registry import Registry, load_registry
from emobench.registry.local import local_registry

# The cyclic GC's thresholds while episodes play, in the local runner and in every Ray worker:
# the young generation collected every 200,000 net allocations (run/runner.py's long_lived_heap
# says what that saves).
PLAYING_GC_THRESHOLD = (200_000, 20, 100)


def load_prompts(root: Path, config: RunConfig, language: str = "en") -> EpisodePrompts:
    """The templates for cases of ``language``; the judge's in the config's judge language."""
    system = config.subject_system_prompt

    def prompt(name: str) -> PromptTemplate:
        return load_language_template(root, "prompts", f"{name}.j2", language)

    prompts = EpisodePrompts(
        simulator=prompt("simulator"),
        judge=load_language_template(root, "judges", config.panel.rubrics["mdep"], config.judges_language(language)),
        subject_system=prompt(system) if system else None,
        director=prompt("director") if config.director else None,
        probe=prompt("probe") if config.probe else None,
        flat_history=config.subject_history == "flat",
    )
    if prompts.flat_history and not (prompts.subject_system and prompts.subject_system.has_block("user")):
        raise InputError("config", "subject_history", "flat needs a subject_system_prompt template with a "
                         "'user' block (e.g. companion_flat)")
    return prompts


def run_registry(config: RunConfig, root: Path) -> Registry:
    """The library's cards, or those of the run's local split (an imported folder)."""
    if config.local_split is None:
        return load_registry(root)
    registry = local_registry(Path(config.local_split), root)
    if config.split not in registry.splits:
        raise InputError("config", "split", f"{config.split!r}, but the local split {config.local_split} is "
                         f"{registry.splits[0]!r}")
    return registry


@dataclass(frozen=True)
class BoundRoles:
    """Every role of a run bound to its endpoint; the local runner and each Ray worker build one."""

    user: RoleCaller
    judges: tuple[RoleCaller, ...]
    subjects: list[RoleCaller]
    director: RoleCaller | None

    def episode_roles(self, subject: RoleCaller) -> EpisodeRoles:
        return EpisodeRoles(subject=subject, user=self.user, judges=self.judges, judge_turn=judge_turn, director=self.director)

    def info(self, config: RunConfig) -> dict[str, Any]:
        return {
            "subjects": [s.info.model_dump() for s in self.subjects],
            "user": self.user.info.model_dump(),
            "judges": [j.info.model_dump() for j in self.judges],
            "director": self.director.info.model_dump() if self.director else "rule",
            "panel": config.panel.name,
        }


async def bind_roles(
    pool: EndpointPool, config: RunConfig, wrap: Callable[[str, RoleConfig, ChatEndpoint], ChatEndpoint] | None = None
) -> BoundRoles:
    """Resolve every role; ``wrap`` (given the role's place in the config) may wrap its endpoint."""

    async def bind(role: str, place: str, rc: RoleConfig) -> RoleCaller:
        client, info = await pool.resolve(rc)
        return role_caller(role, wrap(place, rc, client) if wrap else client, info)

    return BoundRoles(
        user=await bind("user", "user", config.user),
        judges=tuple([await bind("judge", f"panel.judges[{i}]", j) for i, j in enumerate(config.judges)]),
        subjects=[await bind("subject", f"subjects[{i}]", s) for i, s in enumerate(config.subjects)],
        director=await bind("director", "director", config.director) if config.director else None,
    )
