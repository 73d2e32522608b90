"""The episode as a stepper (docs/method.md §4): open it, then advance it one turn per subject reply.

`run_episode` drives it with the subject role; `emobench.env` drives it with a policy under
training; `emobench.play` with a person in the subject's seat, or in the user's (`user_seat`:
then each next user move is the person's, handed in with `take_user`). One code path, so the
same case, seed and replies give the same Episode record.
Pure: no file I/O, no globals; every model call made is kept in the state's call list.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import TypeVar

from emobench.episode.director import DirectorState, apply_action, llm_director, rule_director, simulator_guidance
from emobench.episode.roles import EpisodePrompts, Provenance, WorldRoles, derive_seed
from emobench.episode.simulator import USER_MOVE_FORMAT, parse_user_move, simulator_messages
from emobench.records import DirectorAction, Episode, EPMPoint, Limits, ModelCall, ProbeAnswer, RoleInfo, Turn, UserMove
from emobench.registry import Case
from emobench.trackers.epm import EPMEngine

FAILURES = ("collapse", "stagnation_regression", "oscillation")
# Reasoning the subject wrote for itself; judges, simulator and later turns see only the rest.
REASONING = re.compile(r"<(think|thinking|reasoning|reflection)>.*?(</\1>|\Z)", re.DOTALL | re.IGNORECASE)
A = TypeVar("A")
B = TypeVar("B")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def visible_reply(text: str) -> str:
    """The reply as the user would read it: reasoning blocks (an unclosed one runs to the end) removed."""
    return REASONING.sub("", text).strip()


def opening_move(case: Case) -> UserMove:
    """Turn 1's user message: the case's authored opening, so every subject sees the same start."""
    return UserMove(message=case.opening, meter_delta=0, inner="opening message")


def subject_conversation(prompts: EpisodePrompts, history: list[tuple[str, str]]) -> list[dict[str, str]]:
    """The subject's side of the conversation so far, exactly as it is sent each turn."""
    messages = []
    if prompts.subject_system is not None:
        messages.append({"role": "system", "content": prompts.subject_system.block("system")})
    if prompts.flat_history and history:  # the last call as the subject got it, and its reply
        *before, (said, reply) = history
        return [*messages, _flat(prompts, before, said), {"role": "assistant", "content": reply}]
    for said, reply in history:
        messages += [{"role": "user", "content": said}, {"role": "assistant", "content": reply}]
    return messages


def _flat(prompts: EpisodePrompts, history: list[tuple[str, str]], message: str) -> dict[str, str]:
    assert prompts.subject_system is not None  # load_prompts refuses flat history without it
    return {"role": "user", "content": prompts.subject_system.block("user", history=history, message=message)}


def subject_messages(prompts: EpisodePrompts, history: list[tuple[str, str]], message: str) -> list[dict[str, str]]:
    if prompts.flat_history:
        return [*subject_conversation(prompts, [])[:1], _flat(prompts, history, message)]
    return [*subject_conversation(prompts, history), {"role": "user", "content": message}]


async def _together(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Both results; when either fails (or this is cancelled) the other is cancelled too."""
    b = asyncio.ensure_future(second)
    try:
        return await first, await b
    finally:
        b.cancel()


class EpisodeState:
    """One episode in progress. `open` gives it turn 1's user message; each `advance` takes the
    subject's reply, judges it, applies trackers, director and stop rules, and (unless the
    episode stopped) asks the simulator for the next user message."""

    def __init__(
        self, case: Case, roles: WorldRoles, prompts: EpisodePrompts, seed: int, limits: Limits, subject: RoleInfo,
        user_seat: RoleInfo | None = None,
    ) -> None:
        self.case, self.roles, self.prompts, self.seed, self.limits, self.subject = case, roles, prompts, seed, limits, subject
        if user_seat is None and roles.user is None:
            raise ValueError("no simulator and no person in the user seat")
        self.user_seat = user_seat  # a person plays the user: no simulator call is made
        self.awaiting_user = False  # the person's next move is awaited (take_user)
        self.started = now()
        self.engine = EPMEngine(case.p0, min_turns=limits.min_turns)
        self.meter = float(case.persona.meter_start)
        self.history: list[tuple[str, str]] = []
        self.transcript: list[dict[str, str]] = []
        self.calls: list[ModelCall] = []
        self.turns: list[Turn] = []
        self.director = DirectorState(turn=0, max_turns=limits.max_turns, meter=self.meter)
        self.guidance = ""
        self.status: str | None = None
        self.success_turn: int | None = None
        self.last_user: UserMove | None = None
        self.stop_reason = "max_turns"
        self.done = False
        self.move: UserMove = opening_move(case)  # the user message awaiting the subject's reply
        self._ahead: tuple[UserMove | None, list[ModelCall]] | None = None  # next simulator turn, if already run

    @classmethod
    def open(
        cls, case: Case, roles: WorldRoles, prompts: EpisodePrompts, seed: int, limits: Limits, subject: RoleInfo,
        user_seat: RoleInfo | None = None,
    ) -> EpisodeState:
        return cls(case, roles, prompts, seed, limits, subject, user_seat)

    @property
    def user_info(self) -> RoleInfo:
        """Who holds the user seat: the person, or the simulator."""
        if self.user_seat is not None:
            return self.user_seat
        assert self.roles.user is not None  # __init__ refuses a state with neither
        return self.roles.user.info

    @property
    def turn(self) -> int:
        """The index of the turn awaiting a reply (1-based)."""
        return len(self.turns) + 1

    def subject_messages(self) -> list[dict[str, str]]:
        """What the subject is sent for the turn awaiting its reply."""
        return subject_messages(self.prompts, self.history, self.move.message)

    def subject_seed(self) -> int:
        return derive_seed(self.seed, "subject", self.turn)

    async def _simulate(
        self, history: list[tuple[str, str]], guidance: str, turn: int
    ) -> tuple[UserMove | None, list[ModelCall]]:
        if self.roles.user is None:
            raise RuntimeError("a person holds the user seat; hand their move to take_user")
        messages = simulator_messages(self.prompts.simulator, self.case, history, self.meter, guidance)
        move, calls, _ = await self.roles.user.ask_valid(
            messages, lambda attempt: derive_seed(self.seed, "user", turn, attempt), self.prompts.simulator,
            USER_MOVE_FORMAT, lambda call: parse_user_move(call.text), self.limits.simulator_retries,
        )
        return move, calls

    async def _direct(self) -> tuple[DirectorAction, list[ModelCall]]:
        roles, prompts, limits = self.roles, self.prompts, self.limits
        if roles.director is not None and prompts.director is not None:
            return await llm_director(
                roles.director, prompts.director, self.case, self.director, self.transcript, self.seed,
                limits.director_retries, limits.reveal_every,
            )
        return rule_director(self.case, self.director.turn, limits.reveal_every), []

    def _stop(self, reason: str) -> None:
        self.stop_reason, self.done = reason, True

    async def advance(self, reply_call: ModelCall) -> Turn:
        """Play the subject's reply to the waiting user message; returns the recorded turn."""
        if self.done:
            raise RuntimeError("the episode has ended; open a new one")
        if self.awaiting_user:
            raise RuntimeError("the user's next move is awaited; hand it to take_user first")
        case, limits, t, move = self.case, self.limits, self.turn, self.move
        self.calls.append(reply_call)
        reply = visible_reply(reply_call.text)
        self.transcript.append({"speaker": case.persona.name, "text": move.message})
        self.history.append((move.message, reply))
        judging = self.roles.judge_turn(
            self.roles.judges, self.prompts.judge, case, self.transcript, reply, self.seed, t, limits.judge_retries
        )
        # The rule director reads no judgement and no stop rule applies before min_turns, so the
        # next turn is certain: its simulator call runs while the judges read this turn. The
        # requests are the same either way; only the waiting overlaps.
        overlap = self.user_seat is None and self.roles.director is None and t < min(limits.min_turns, limits.max_turns)
        director_calls: list[ModelCall] = []
        if overlap:
            action = rule_director(case, t, limits.reveal_every)
            ahead_guidance = simulator_guidance(case, apply_action(case, self.director, action), action)
            (judgement, judge_calls), self._ahead = await _together(
                judging, self._simulate(list(self.history), ahead_guidance, t + 1)
            )
        else:
            judgement, judge_calls = await judging
        self.calls += judge_calls
        self.transcript.append({"speaker": "Assistant", "text": reply})

        point = None
        if judgement.valid and judgement.vector is not None:
            step = self.engine.step(judgement.vector)
            point = EPMPoint(p=step.p, delta_e=step.delta_e, cos=step.cos, energy=step.energy)
            self.status = step.status
        before = self.director
        self.director = DirectorState(
            turn=t, max_turns=limits.max_turns, meter=self.meter,
            p=point.p if point else before.p, energy=point.energy if point else before.energy,
            last_vector=judgement.vector if point else None, last_delta_e=point.delta_e if point else None,
            revealed_stages=before.revealed_stages, revealed_memories=before.revealed_memories,
            resistance=before.resistance,
        )
        if not overlap:
            action, director_calls = await self._direct()
        self.calls += director_calls
        self.director = apply_action(case, self.director, action)
        self.guidance = simulator_guidance(case, self.director, action)
        turn = Turn(index=t, user=move, reply=reply, judgement=judgement, epm=point, meter=self.meter, director=action)
        self.turns.append(turn)

        if self.status == "success":
            self.success_turn = t
            self._stop("epm_success")
        elif self.status in FAILURES:
            self._stop(f"epm_{self.status}")
        elif t >= limits.min_turns and self.meter >= limits.resolved_meter:
            self._stop("meter_resolved")
        elif t >= limits.min_turns and self.meter < limits.gave_up_meter:
            self._stop("meter_gave_up")
        elif action.action == "end":
            self._stop("director_end")
        elif t >= limits.max_turns:
            self._stop("max_turns")
        elif self.user_seat is not None:
            self.awaiting_user = True
        else:
            await self._next_user(t + 1)
        return turn

    def take_user(self, move: UserMove) -> None:
        """The person's next move (user_seat): the meter as they set it; leaving ends the episode
        whatever the meter, since a person who leaves has left."""
        if self.done or not self.awaiting_user:
            raise RuntimeError("no user move is awaited")
        self.awaiting_user = False
        self.meter = max(0.0, min(100.0, self.meter + move.meter_delta))
        if move.leave:
            self.last_user = move
            self._stop("user_left")
            return
        self.move = move

    def stop(self, reason: str) -> None:
        """End the episode before its rules do (a person in the subject's seat who stops)."""
        self.awaiting_user = False
        self._stop(reason)

    async def _next_user(self, t: int) -> None:
        move, sim_calls = self._ahead or await self._simulate(self.history, self.guidance, t)
        self._ahead = None
        self.calls += sim_calls
        if move is None:
            self._stop("simulator_invalid")
            return
        self.meter = max(0.0, min(100.0, self.meter + move.meter_delta))
        # The prompt ties leaving to a meter that has fallen very low; a small simulator that
        # says goodbye at a high meter is recorded (the audit flags it) but not obeyed.
        if move.leave and self.meter <= self.limits.leave_meter:
            self.last_user = move
            self._stop("user_left")
            return
        self.move = move

    def episode(
        self, provenance: Provenance, probe: ProbeAnswer | None = None, probe_calls: list[ModelCall] | None = None
    ) -> Episode:
        """The finished episode's record; the persona probe, if one was put, comes last in the calls."""
        roles, prompts = self.roles, self.prompts
        return Episode(
            key=f"{self.subject.label}|{self.case.id}|{self.seed}",
            subject=self.subject.label,
            case_id=self.case.id,
            scenario_id=self.case.scenario.id,
            persona_id=self.case.persona.id,
            seed=self.seed,
            split=provenance.split,
            language=self.case.language,
            p0=self.case.p0,
            turns=list(self.turns),
            last_user=self.last_user,
            probe=probe,
            final_meter=self.meter,
            stop_reason=self.stop_reason,
            status=self.status,
            success_turn=self.success_turn,
            roles={
                "subject": self.subject,
                "user": self.user_info,
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
            calls=[*self.calls, *(probe_calls or [])],
            registry_version=provenance.registry_version,
            config_hash=provenance.config_hash,
            emobench_version=provenance.emobench_version,
            started_at=self.started,
            finished_at=now(),
        )
