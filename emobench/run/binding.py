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
from emobench.judging.mdep import judge_turn
from emobench.prompts import load_template


def load_prompts(root: Path, config: RunConfig) -> EpisodePrompts:
    system = config.subject_system_prompt
    return EpisodePrompts(
        simulator=load_template(root / "prompts" / "simulator.j2"),
        judge=load_template(root / "judges" / config.panel.rubrics["mdep"]),
        subject_system=load_template(root / "prompts" / f"{system}.j2") if system else None,
        director=load_template(root / "prompts" / "director.j2") if config.director else None,
        probe=load_template(root / "prompts" / "probe.j2") if config.probe else None,
    )


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
