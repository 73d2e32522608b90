"""An episode's state from its journal, and what a person's part looks like to the stepper.

`rebuild` plays the journal's turns through the episode stepper again with every model call
answered from the journal (`journal.replay_caller`): no model is asked twice, and the state is the
one that was lost. `fork` copies a state to play one turn on, so that the live one changes only
when the turn is complete.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from emobench.episode.roles import EpisodePrompts, Provenance, RoleCaller, WorldRoles
from emobench.episode.stepper import EpisodeState
from emobench.play import journal
from emobench.play.journal import JournalHead
from emobench.records import Limits, ModelCall, RoleInfo, Sampling
from emobench.registry import Case


@dataclass(frozen=True)
class Bound:
    """What the hub plays with: the world's roles (user None in the user seat mode) and the subjects."""

    world: WorldRoles
    subjects: dict[str, RoleCaller]
    prompts: EpisodePrompts
    limits: Limits
    provenance: Provenance


def human_info(player: str) -> RoleInfo:
    return RoleInfo(label=player, model="human", endpoint="emobench-play", sampling=Sampling())


def human_reply(player: str, seed: int, text: str, seconds: float) -> ModelCall:
    """A person's reply as the subject, recorded as the subject's call; latency is their writing time."""
    return ModelCall(
        role="subject", label=player, model="human", endpoint="emobench-play", sampling=Sampling(), seed=seed,
        template="none", latency_s=round(seconds, 3), text=text,
    )


def fork(state: EpisodeState) -> EpisodeState:
    """A copy to play one turn on. The stepper only appends to its lists and replaces its other
    fields, so copying the lists and the EPM engine keeps the original as it was."""
    work = copy.copy(state)
    work.engine = copy.deepcopy(state.engine)
    work.history, work.transcript, work.calls, work.turns = (
        list(state.history), list(state.transcript), list(state.calls), list(state.turns))
    return work


def open_state(bound: Bound, case: Case, head: JournalHead, world: WorldRoles) -> EpisodeState:
    if head.seat == "user":
        subject = bound.subjects[head.subject].info
        return EpisodeState.open(case, world, bound.prompts, head.seed, bound.limits, subject, human_info(head.player))
    return EpisodeState.open(case, world, bound.prompts, head.seed, bound.limits, human_info(head.player))


async def rebuild(bound: Bound, case: Case, read: journal.Journal) -> EpisodeState:
    """The state after the journal's last turn (and its stop, if any), with the live roles bound again."""
    head, turns, stop = read.head, read.turns, read.stop
    recorded = [call for turn in turns for call in turn.calls]
    world = bound.world
    replaying = WorldRoles(
        user=journal.replay_caller(world.user, "user", recorded) if world.user else None,
        judges=tuple(journal.replay_caller(j, "judge", recorded) for j in world.judges),
        judge_turn=world.judge_turn,
        director=journal.replay_caller(world.director, "director", recorded) if world.director else None,
    )
    state = open_state(bound, case, head, replaying)
    for turn in turns:
        if head.seat == "user":
            if turn.move is not None:
                state.take_user(turn.move)
            subject = journal.replay_caller(bound.subjects[head.subject], "subject", recorded)
            reply = await subject.ask(state.subject_messages(), state.subject_seed(), bound.prompts.subject_system)
        else:
            reply = human_reply(head.player, state.subject_seed(), turn.reply or "", turn.human_s)
        await state.advance(reply)
    state.roles, state.started = world, head.started_at
    if stop is not None and not state.done:
        if stop.move is not None and state.awaiting_user:
            state.take_user(stop.move)
        else:
            state.stop(stop.reason)
    return state
