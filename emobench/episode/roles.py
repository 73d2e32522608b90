"""What the episode loop is handed: bound roles, prompt templates and limits.

The runner builds these; the loop only calls them, so it stays free of I/O and globals.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from emobench.prompts import PromptTemplate
from emobench.records import ModelCall, RoleInfo

# (messages, seed, response_format) -> completion; the runner binds endpoint, sampling, cache.
CallFn = Callable[[list[dict[str, str]], int, "dict[str, Any] | None"], Awaitable[Any]]


@dataclass(frozen=True)
class RoleCaller:
    role: str  # subject | user | director | judge
    info: RoleInfo
    call: CallFn

    async def ask(
        self, messages: list[dict[str, str]], seed: int, template: PromptTemplate | None, response_format: dict[str, Any] | None = None
    ) -> ModelCall:
        """Call the model and return the call record (text included), timing it end to end."""
        started = time.perf_counter()
        done = await self.call(messages, seed, response_format)
        return ModelCall(
            role=self.role,
            model=self.info.model,
            endpoint=self.info.endpoint,
            sampling=self.info.sampling,
            seed=seed,
            template=template.ref if template else "none",
            prompt_tokens=done.prompt_tokens,
            completion_tokens=done.completion_tokens,
            latency_s=done.latency_s if not done.cached else time.perf_counter() - started,
            attempts=done.attempts,
            cached=done.cached,
            finish_reason=done.finish_reason,
            text=done.text,
        )


@dataclass(frozen=True)
class EpisodeRoles:
    subject: RoleCaller
    user: RoleCaller
    judges: tuple[RoleCaller, ...]
    director: RoleCaller | None = None  # None: the rule director


@dataclass(frozen=True)
class EpisodePrompts:
    simulator: PromptTemplate
    judge: PromptTemplate
    subject_system: PromptTemplate | None = None
    director: PromptTemplate | None = None
    probe: PromptTemplate | None = None  # None: no persona probe


@dataclass(frozen=True)
class Limits:
    max_turns: int = 30
    min_turns: int = 12
    judge_retries: int = 2
    simulator_retries: int = 2
    director_retries: int = 2
    reveal_every: int = 3
    leave_meter: float = 20.0  # the leave flag is honoured only at or below this meter value
    resolved_meter: float = 100.0
    gave_up_meter: float = 10.0


@dataclass(frozen=True)
class Provenance:
    split: str
    registry_version: str
    config_hash: str
    emobench_version: str


def derive_seed(seed: int, *parts: object) -> int:
    """A stable per-call seed: same episode seed, role, turn and attempt give the same request."""
    digest = hashlib.blake2b(repr((seed, *parts)).encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF
