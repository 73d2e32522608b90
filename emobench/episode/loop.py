"""The episode loop (docs/method.md §4): a pure async function of (case, roles, prompts, seed, limits).

It drives the episode stepper with the subject role, then puts the persona probe. It does no
file I/O and touches no globals; the runner owns concurrency, retries, the cache and resume.
Every model call made along the way is returned inside the Episode record.
"""

from __future__ import annotations

from collections.abc import Callable

from emobench.episode.probe import run_probe
from emobench.episode.roles import EpisodePrompts, EpisodeRoles, Provenance
from emobench.episode.stepper import EpisodeState, subject_conversation
from emobench.records import Episode, Limits, ModelCall, ProbeAnswer, Turn
from emobench.registry import Case


async def _probe(
    roles: EpisodeRoles, prompts: EpisodePrompts, history: list[tuple[str, str]], seed: int, limits: Limits
) -> tuple[ProbeAnswer | None, list[ModelCall]]:
    if prompts.probe is None or not history:
        return None, []
    return await run_probe(roles.subject, prompts.probe, subject_conversation(prompts, history), seed, limits.simulator_retries)


async def run_episode(
    case: Case, roles: EpisodeRoles, prompts: EpisodePrompts, seed: int, limits: Limits, provenance: Provenance,
    on_turn: Callable[[Turn], None] | None = None,
) -> Episode:
    """``on_turn`` hears of each turn as it is recorded (the inspect task shows it live)."""
    state = EpisodeState.open(case, roles, prompts, seed, limits, roles.subject.info)
    while not state.done:
        reply = await roles.subject.ask(state.subject_messages(), state.subject_seed(), prompts.subject_system)
        turn = await state.advance(reply)
        if on_turn is not None:
            on_turn(turn)
    probe, probe_calls = await _probe(roles, prompts, state.history, seed, limits)
    return state.episode(provenance, probe, probe_calls)
