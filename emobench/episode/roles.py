"""What the episode loop is handed: bound roles, prompt templates and limits.

The runner builds these; the loop only calls them, so it stays free of I/O and globals.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from emobench.prompts import PromptTemplate
from emobench.records import ModelCall, RoleInfo, TurnJudgement
from emobench.registry import Case

if TYPE_CHECKING:
    from emobench.endpoints.client import ChatEndpoint

# (messages, seed, response_format) -> completion; the runner binds endpoint, sampling, cache.
CallFn = Callable[[list[dict[str, str]], int, "dict[str, Any] | None"], Awaitable[Any]]

T = TypeVar("T")


@dataclass(frozen=True)
class RoleCaller:
    role: str  # subject | user | director | judge
    info: RoleInfo
    call: CallFn

    async def ask(
        self,
        messages: list[dict[str, str]],
        seed: int,
        template: PromptTemplate | None,
        response_format: dict[str, Any] | None = None,
    ) -> ModelCall:
        """Call the model and return the call record (text included), timing it end to end."""
        started = time.perf_counter()
        done = await self.call(messages, seed, response_format)
        return ModelCall(
            role=self.role,
            label=self.info.label,
            model=self.info.model,
            endpoint=self.info.endpoint,
            sampling=self.info.sampling,
            seed=seed,
            template=done.template or (template.ref if template else "none"),
            prompt_tokens=done.prompt_tokens,
            completion_tokens=done.completion_tokens,
            cached_prompt_tokens=done.cached_prompt_tokens,
            cache_write_tokens=done.cache_write_tokens,
            batched=done.batched,
            latency_s=done.latency_s if not done.cached else time.perf_counter() - started,
            attempts=done.attempts,
            cached=done.cached,
            finish_reason=done.finish_reason,
            text=done.text,
            structured_output=self.info.structured_output if response_format is not None else None,
        )

    async def ask_valid(
        self,
        messages: list[dict[str, str]],
        seed_for: Callable[[int], int],
        template: PromptTemplate | None,
        response_format: dict[str, Any] | None,
        parse: Callable[[ModelCall], T],
        retries: int,
    ) -> tuple[T | None, list[ModelCall], str]:
        """Ask until parse accepts a reply, at most retries + 1 times; parse raises ValueError to reject.

        Returns the parsed value (None when no attempt was valid), every call made with the
        rejected ones carrying their error, and the last rejection's error, which is what to
        record when the value is None ("no attempt" when retries < 0 made no call).
        Attempt n is sent with seed_for(n), so a retry is a new request, not a cache hit.
        """
        calls: list[ModelCall] = []
        error = "no attempt"
        for attempt in range(retries + 1):
            call = await self.ask(messages, seed_for(attempt), template, response_format)
            try:
                value = parse(call)
            except ValueError as exc:
                error = str(exc)
                calls.append(call.model_copy(update={"error": error}))
                continue
            calls.append(call)
            return value, calls, error
        return None, calls, error


def role_caller(role: str, client: ChatEndpoint, info: RoleInfo) -> RoleCaller:
    """A role bound to its endpoint and sampling: what every command hands the loop and the judges."""

    def call(messages: list[dict[str, str]], seed: int, response_format: dict[str, Any] | None) -> Awaitable[Any]:
        return client.complete(messages, info.sampling, seed, response_format)  # its coroutine: no frame between

    return RoleCaller(role=role, info=info, call=call)


class TurnJudge(Protocol):
    """The panel's per-turn MDEP judgement; the runner supplies it, so episode/ imports no judging/."""

    def __call__(
        self,
        judges: tuple[RoleCaller, ...],
        template: PromptTemplate,
        case: Case,
        transcript: list[dict[str, str]],
        reply: str,
        seed: int,
        turn: int,
        retries: int,
    ) -> Awaitable[tuple[TurnJudgement, list[ModelCall]]]: ...


@dataclass(frozen=True, kw_only=True)
class WorldRoles:
    """Every role but the subject: the simulated user, the judge panel and the director."""

    user: RoleCaller | None  # None: a person holds the user seat (EpisodeState's user_seat)
    judges: tuple[RoleCaller, ...]
    judge_turn: TurnJudge
    director: RoleCaller | None = None  # None: the rule director


@dataclass(frozen=True, kw_only=True)
class EpisodeRoles(WorldRoles):
    subject: RoleCaller


@dataclass(frozen=True)
class EpisodePrompts:
    simulator: PromptTemplate
    judge: PromptTemplate
    subject_system: PromptTemplate | None = None
    director: PromptTemplate | None = None
    probe: PromptTemplate | None = None  # None: no persona probe
    # The subject reads the dialogue so far as one user message (subject_system's "user" block).
    flat_history: bool = False


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
