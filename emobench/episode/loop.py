"""The episode loop (docs/method.md §4): a pure async function of (case, roles, prompts, seed, limits).

It does no file I/O and touches no globals; the runner owns concurrency, retries, the cache
and resume. Every model call made along the way is returned inside the Episode record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import TypeVar

from emobench.episode.director import DirectorState, apply_action, llm_director, rule_director, simulator_guidance
from emobench.episode.probe import run_probe
from emobench.episode.roles import EpisodePrompts, EpisodeRoles, Limits, Provenance, derive_seed
from emobench.episode.simulator import USER_MOVE_FORMAT, parse_user_move, simulator_messages
from emobench.judging.mdep import judge_turn
from emobench.records import DirectorAction, Episode, EPMPoint, ModelCall, ProbeAnswer, Turn, UserMove
from emobench.registry import Case
from emobench.trackers.epm import EPMEngine

FAILURES = ("collapse", "stagnation_regression", "oscillation")
A = TypeVar("A")
B = TypeVar("B")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def subject_conversation(prompts: EpisodePrompts, history: list[tuple[str, str]]) -> list[dict[str, str]]:
    """The subject's side of the conversation so far, exactly as it is sent each turn."""
    messages = []
    if prompts.subject_system is not None:
        messages.append({"role": "system", "content": prompts.subject_system.block("system")})
    for said, reply in history:
        messages += [{"role": "user", "content": said}, {"role": "assistant", "content": reply}]
    return messages


def subject_messages(prompts: EpisodePrompts, history: list[tuple[str, str]], message: str) -> list[dict[str, str]]:
    return [*subject_conversation(prompts, history), {"role": "user", "content": message}]


async def _simulate(
    roles: EpisodeRoles, prompts: EpisodePrompts, case: Case, history: list[tuple[str, str]],
    meter: float, guidance: str, seed: int, turn: int, retries: int,
) -> tuple[UserMove | None, list[ModelCall]]:
    messages = simulator_messages(prompts.simulator, case, history, meter, guidance)
    move, calls, _ = await roles.user.ask_valid(
        messages, lambda attempt: derive_seed(seed, "user", turn, attempt), prompts.simulator, USER_MOVE_FORMAT,
        lambda call: parse_user_move(call.text), retries,
    )
    return move, calls


async def _direct(
    roles: EpisodeRoles, prompts: EpisodePrompts, case: Case, state: DirectorState,
    transcript: list[dict[str, str]], seed: int, limits: Limits,
) -> tuple[DirectorAction, list[ModelCall]]:
    if roles.director is not None and prompts.director is not None:
        return await llm_director(
            roles.director, prompts.director, case, state, transcript, seed, limits.director_retries, limits.reveal_every
        )
    return rule_director(case, state.turn, limits.reveal_every), []


async def _probe(
    roles: EpisodeRoles, prompts: EpisodePrompts, history: list[tuple[str, str]], seed: int, limits: Limits
) -> tuple[ProbeAnswer | None, list[ModelCall]]:
    if prompts.probe is None or not history:
        return None, []
    return await run_probe(roles.subject, prompts.probe, subject_conversation(prompts, history), seed, limits.simulator_retries)


async def _together(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Both results; when either fails (or this is cancelled) the other is cancelled too."""
    b = asyncio.ensure_future(second)
    try:
        return await first, await b
    finally:
        b.cancel()


async def run_episode(
    case: Case, roles: EpisodeRoles, prompts: EpisodePrompts, seed: int, limits: Limits, provenance: Provenance
) -> Episode:
    started = _now()
    engine = EPMEngine(case.p0, min_turns=limits.min_turns)
    meter = float(case.persona.meter_start)
    history: list[tuple[str, str]] = []
    transcript: list[dict[str, str]] = []
    calls: list[ModelCall] = []
    turns: list[Turn] = []
    director = DirectorState(turn=0, max_turns=limits.max_turns, meter=meter)
    guidance = ""
    status: str | None = None
    success_turn: int | None = None
    last_user: UserMove | None = None
    stop_reason = "max_turns"
    # Turn 1 opens with the scenario's own opening message, so every subject sees the same start.
    move: UserMove | None = UserMove(message=case.scenario.opening, meter_delta=0, inner="opening message")

    ahead: tuple[UserMove | None, list[ModelCall]] | None = None  # the next simulator turn, if already run

    for t in range(1, limits.max_turns + 1):
        if t > 1:
            move, sim_calls = ahead or await _simulate(
                roles, prompts, case, history, meter, guidance, seed, t, limits.simulator_retries
            )
            ahead = None
            calls += sim_calls
            if move is None:
                stop_reason = "simulator_invalid"
                break
            meter = max(0.0, min(100.0, meter + move.meter_delta))
            # The prompt ties leaving to a meter that has fallen very low; a small simulator that
            # says goodbye at a high meter is recorded (the audit flags it) but not obeyed.
            if move.leave and meter <= limits.leave_meter:
                last_user, stop_reason = move, "user_left"
                break
        assert move is not None

        reply_call = await roles.subject.ask(
            subject_messages(prompts, history, move.message), derive_seed(seed, "subject", t), prompts.subject_system
        )
        calls.append(reply_call)
        reply = reply_call.text.strip()
        transcript.append({"speaker": case.persona.name, "text": move.message})
        history.append((move.message, reply))
        judging = judge_turn(roles.judges, prompts.judge, case, transcript, reply, seed, t, limits.judge_retries)
        # The rule director reads no judgement and no stop rule applies before min_turns, so the
        # next turn is certain: its simulator call runs while the judges read this turn. The
        # requests are the same either way; only the waiting overlaps.
        overlap = roles.director is None and t < min(limits.min_turns, limits.max_turns)
        if overlap:
            action, director_calls = rule_director(case, t, limits.reveal_every), list[ModelCall]()
            shaped = apply_action(case, director, action)
            ahead_guidance = simulator_guidance(case, shaped, action)
            (judgement, judge_calls), ahead = await _together(judging, _simulate(
                roles, prompts, case, list(history), meter, ahead_guidance, seed, t + 1, limits.simulator_retries
            ))
        else:
            judgement, judge_calls = await judging
        calls += judge_calls
        transcript.append({"speaker": "Assistant", "text": reply})

        point = None
        if judgement.valid and judgement.vector is not None:
            step = engine.step(judgement.vector)
            point = EPMPoint(p=step.p, delta_e=step.delta_e, cos=step.cos, energy=step.energy)
            status = step.status
        director = DirectorState(
            turn=t, max_turns=limits.max_turns, meter=meter,
            p=point.p if point else director.p, energy=point.energy if point else director.energy,
            last_vector=judgement.vector if point else None, last_delta_e=point.delta_e if point else None,
            revealed_stages=director.revealed_stages, revealed_memories=director.revealed_memories,
            resistance=director.resistance,
        )
        if not overlap:
            action, director_calls = await _direct(roles, prompts, case, director, transcript, seed, limits)
        calls += director_calls
        director = apply_action(case, director, action)
        guidance = simulator_guidance(case, director, action)
        turns.append(Turn(index=t, user=move, reply=reply, judgement=judgement, epm=point, meter=meter, director=action))

        if status == "success":
            success_turn, stop_reason = t, "epm_success"
            break
        if status in FAILURES:
            stop_reason = f"epm_{status}"
            break
        if t >= limits.min_turns and meter >= limits.resolved_meter:
            stop_reason = "meter_resolved"
            break
        if t >= limits.min_turns and meter < limits.gave_up_meter:
            stop_reason = "meter_gave_up"
            break
        if action.action == "end":
            stop_reason = "director_end"
            break

    probe, probe_calls = await _probe(roles, prompts, history, seed, limits)
    calls += probe_calls

    return Episode(
        key=f"{roles.subject.info.label}|{case.id}|{seed}",
        subject=roles.subject.info.label,
        case_id=case.id,
        scenario_id=case.scenario.id,
        persona_id=case.persona.id,
        seed=seed,
        split=provenance.split,
        p0=case.p0,
        turns=turns,
        last_user=last_user,
        probe=probe,
        final_meter=meter,
        stop_reason=stop_reason,
        status=status,
        success_turn=success_turn,
        roles={
            "subject": roles.subject.info,
            "user": roles.user.info,
            "judges": [j.info for j in roles.judges],
            **({"director": roles.director.info} if roles.director else {}),
        },
        templates={
            "simulator": prompts.simulator.ref,
            "judge": prompts.judge.ref,
            "subject_system": prompts.subject_system.ref if prompts.subject_system else "none",
            "director": prompts.director.ref if roles.director and prompts.director else "rule",
            "probe": prompts.probe.ref if prompts.probe else "none",
        },
        calls=calls,
        registry_version=provenance.registry_version,
        config_hash=provenance.config_hash,
        emobench_version=provenance.emobench_version,
        started_at=started,
        finished_at=_now(),
    )
