"""Episodes a person plays: open, advance one turn, leave, resume from the journal, delete.

One `PlayHub` per server. It holds the bound roles and the episodes in progress, each driven by
the same episode stepper as `emobench run`: a person in the user seat hands in their moves
(`EpisodeState.take_user`), a person in the subject seat their replies. Every finished turn is
journalled before the page hears of it; a failed model call rebuilds the episode from its
journal, so the conversation so far is kept and the person can send again.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Literal

from emobench.episode.probe import run_probe
from emobench.episode.roles import EpisodePrompts, Limits, Provenance, RoleCaller, WorldRoles
from emobench.episode.stepper import EpisodeState, now, subject_conversation
from emobench.errors import EndpointError
from emobench.play import journal
from emobench.play.journal import JournalHead, JournalResume, JournalStop, JournalTurn
from emobench.play.store import Player, PlayError, PlayStore
from emobench.records import Episode, HumanSeat, ModelCall, RoleInfo, Sampling, UserMove
from emobench.registry import Case

Seat = Literal["user", "subject"]
MAX_MESSAGE = 4000  # characters of one message a person may send


def human_info(player: str) -> RoleInfo:
    return RoleInfo(label=player, model="human", endpoint="emobench-play", sampling=Sampling())


def human_reply(player: str, seed: int, text: str, seconds: float) -> ModelCall:
    """A person's reply as the subject, recorded as the subject's call; latency is their writing time."""
    return ModelCall(
        role="subject", label=player, model="human", endpoint="emobench-play", sampling=Sampling(), seed=seed,
        template="none", latency_s=round(seconds, 3), text=text,
    )


@dataclass
class Live:
    """One episode in progress on this server."""

    head: JournalHead
    state: EpisodeState
    human_s: list[float] = field(default_factory=list)
    model_s: list[float] = field(default_factory=list)
    shown_at: float = field(default_factory=time.monotonic)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    error: str | None = None
    resumed: int = 0
    finished: bool = False


@dataclass(frozen=True)
class Bound:
    """What the hub plays with: the world's roles (user None in the user seat mode) and the subjects."""

    world: WorldRoles
    subjects: dict[str, RoleCaller]
    prompts: EpisodePrompts
    limits: Limits
    provenance: Provenance


class PlayHub:
    def __init__(self, store: PlayStore, bound: Bound, seat: Seat, cases: list[Case], base_seed: int) -> None:
        self.store, self.bound, self.seat, self.base_seed = store, bound, seat, base_seed
        self.cases = {case.id: case for case in cases}
        self.live: dict[str, Live] = {}

    # --- players -------------------------------------------------------------------------
    def join(self, handle: str, consent: bool) -> str:
        if not consent:
            raise PlayError("please read the consent note and tick the box before playing")
        return self.store.add_player(handle)

    def player(self, token: str) -> Player:
        found = self.store.player(token)
        if found is None:
            raise PlayError("unknown player link", status=404)
        return found

    # --- episodes ------------------------------------------------------------------------
    async def start(self, token: str, case_id: str | None, subject: str | None) -> Live:
        player = self.player(token)
        if case_id is None:  # "give me one": the case this player has played least, first in split order
            played = self.store.cases_played(player.name)
            case_id = min(self.cases, key=lambda c: played.get(c, 0))
        case = self.cases.get(case_id)
        if case is None:
            raise PlayError(f"no case {case_id!r} here")
        if self.seat == "user":
            label = subject or next(iter(self.bound.subjects))
            if label not in self.bound.subjects:
                raise PlayError(f"no subject {label!r} here")
        else:
            label = player.name
        seed = self.store.free_seed(label, case.id, self.base_seed)
        head = JournalHead(
            episode_id=secrets.token_hex(8), token_sha256=player.token_sha256, player=player.name, seat=self.seat,
            case_id=case.id, subject=label, seed=seed, key=f"{label}|{case.id}|{seed}|{player.name}",
            page_version=self.store.page_version, consented_at=player.consented_at, started_at=now(),
            config_hash=self.bound.provenance.config_hash,
        )
        self.store.open_journal(head)
        live = Live(head, self._open_state(head, self.bound.world))
        self.live[head.episode_id] = live
        if self.seat == "user":  # turn 1 is the card's opening: the subject answers it straight away
            await self._guarded(live, self._model_turn(live, None, 0.0))
        return live

    async def get(self, token: str, episode_id: str) -> Live:
        player = self.player(token)
        live = self.live.get(episode_id)
        if live is None:
            path = self.store.journal_path(episode_id)
            if not path.exists():
                raise PlayError("no such episode", status=404)
            head, turns, stop, resumed = journal.read_journal(path)
            if head.token_sha256 != player.token_sha256:
                raise PlayError("no such episode", status=404)
            if stop is None and head.key not in self.store.done_keys():
                await asyncio.to_thread(journal.append, path, JournalResume(at=now()))
                resumed += 1
            live = await self._rebuild(head, turns, stop)
            live.resumed = resumed
            self.live[episode_id] = live
        if live.head.token_sha256 != player.token_sha256:
            raise PlayError("no such episode", status=404)
        return live

    async def turn(self, token: str, episode_id: str, message: str, meter: int | None) -> Live:
        live = await self.get(token, episode_id)
        async with live.lock:
            self._check_open(live)
            text = message.strip()
            if len(text) > MAX_MESSAGE:
                raise PlayError(f"a message holds at most {MAX_MESSAGE} characters")
            waited = time.monotonic() - live.shown_at
            if self.seat == "user":
                move = None
                if live.state.awaiting_user:
                    if not text:
                        raise PlayError("write a message first")
                    move = self._move(live, text, meter, leave=False)
                await self._guarded(live, self._model_turn(live, move, waited))
            else:
                if not text:
                    raise PlayError("write a reply first")
                reply = human_reply(live.head.player, live.state.subject_seed(), text, waited)
                await self._guarded(live, self._advance(live, reply, None, waited))
            if live.state.done:
                await self._finish(live)
        return live

    async def leave(self, token: str, episode_id: str, message: str, meter: int | None) -> Live:
        """The person ends the episode: as the user, leaving (with an optional last message); as the supporter, stopping."""
        live = await self.get(token, episode_id)
        async with live.lock:
            self._check_open(live)
            waited = time.monotonic() - live.shown_at
            if self.seat == "user" and live.state.awaiting_user:
                move = self._move(live, message.strip()[:MAX_MESSAGE], meter, leave=True)
                live.state.take_user(move)
                stop = JournalStop(reason=live.state.stop_reason, move=move, human_s=round(waited, 3))
            else:
                reason = "user_left" if self.seat == "user" else "supporter_left"
                live.state.stop(reason)
                stop = JournalStop(reason=reason, human_s=round(waited, 3))
            await asyncio.to_thread(journal.append, self.store.journal_path(episode_id), stop)
            await self._finish(live)
        return live

    async def delete(self, token: str, episode_id: str) -> None:
        live = await self.get(token, episode_id)
        async with live.lock:
            self.live.pop(episode_id, None)
            await self.store.delete(live.head)

    # --- the steps -----------------------------------------------------------------------
    def _check_open(self, live: Live) -> None:
        if live.finished or live.state.done:
            raise PlayError("this episode has ended")

    def _move(self, live: Live, text: str, meter: int | None, leave: bool) -> UserMove:
        if meter is None or not 0 <= meter <= 100:
            raise PlayError("set your meter (0 to 100) first")
        return UserMove(message=text, meter_delta=meter - round(live.state.meter), leave=leave, human=True)

    async def _guarded(self, live: Live, step: Awaitable[None]) -> None:
        """Run a step; when a model does not answer, show one line and rebuild from the journal."""
        try:
            await step
            live.error = None
        except EndpointError as exc:
            head, turns, stop, _ = journal.read_journal(self.store.journal_path(live.head.episode_id))
            rebuilt = await self._rebuild(head, turns, stop)
            live.state, live.error = rebuilt.state, f"A model did not answer ({_short(exc.problem)}). " \
                "Your conversation is kept; send again to retry."
            raise PlayError(live.error, status=502) from None

    async def _model_turn(self, live: Live, move: UserMove | None, waited: float) -> None:
        state = live.state
        if move is not None:
            state.take_user(move)
        subject = self.bound.subjects[live.head.subject]
        started = time.monotonic()
        reply = await subject.ask(state.subject_messages(), state.subject_seed(), self.bound.prompts.subject_system)
        await self._advance(live, reply, move, waited, time.monotonic() - started)

    async def _advance(
        self, live: Live, reply: ModelCall, move: UserMove | None, waited: float, model_s: float = 0.0
    ) -> None:
        state, before = live.state, len(live.state.calls)
        started = time.monotonic()
        await state.advance(reply)
        model_s += time.monotonic() - started
        line = JournalTurn(
            index=len(state.turns), move=move, reply=reply.text if self.seat == "subject" else None,
            human_s=round(waited, 3), model_s=round(model_s, 3), calls=state.calls[before:],
        )
        await asyncio.to_thread(journal.append, self.store.journal_path(live.head.episode_id), line)
        live.human_s.append(line.human_s)
        live.model_s.append(line.model_s)
        live.shown_at = time.monotonic()

    async def _finish(self, live: Live) -> None:
        state, bound = live.state, self.bound
        probe, probe_calls = None, list[ModelCall]()
        if self.seat == "user" and bound.prompts.probe is not None and state.history:
            subject = self.bound.subjects[live.head.subject]
            try:
                probe, probe_calls = await run_probe(
                    subject, bound.prompts.probe, subject_conversation(bound.prompts, state.history), state.seed,
                    bound.limits.simulator_retries,
                )
            except EndpointError:  # the conversation is what counts; the episode is kept without the probe
                live.error = "The model did not answer the closing question; your episode is saved without it."
        head = live.head
        seat = HumanSeat(
            player=head.player, seat=head.seat, page_version=head.page_version,
            turn_seconds=live.human_s,
            model_seconds=live.model_s, consented_at=head.consented_at, resumed=live.resumed,
        )
        episode: Episode = state.episode(bound.provenance, probe, probe_calls).model_copy(
            update={"key": head.key, "human": seat, "started_at": head.started_at}
        )
        live.finished = True
        try:
            await self.store.finish(episode, self.cases[head.case_id])
        except EndpointError as exc:  # the record is written; `emobench judge` can judge it later
            live.error = f"Your episode is saved; the judges did not answer ({_short(exc.problem)}), so no verdict yet."

    def _open_state(self, head: JournalHead, world: WorldRoles) -> EpisodeState:
        case, bound = self.cases[head.case_id], self.bound
        if head.seat == "user":
            subject = bound.subjects[head.subject].info
            return EpisodeState.open(case, world, bound.prompts, head.seed, bound.limits, subject, human_info(head.player))
        return EpisodeState.open(case, world, bound.prompts, head.seed, bound.limits, human_info(head.player))

    async def _rebuild(self, head: JournalHead, turns: list[JournalTurn], stop: JournalStop | None) -> Live:
        """The episode as it stood after its last journalled turn, every model call answered from the journal."""
        if head.case_id not in self.cases:
            raise PlayError(f"case {head.case_id!r} is not served here", status=404)
        recorded = [call for turn in turns for call in turn.calls]
        world = self.bound.world
        replaying = WorldRoles(
            user=journal.replay_caller(world.user, "user", recorded) if world.user else None,
            judges=tuple(journal.replay_caller(j, "judge", recorded) for j in world.judges),
            judge_turn=world.judge_turn,
            director=journal.replay_caller(world.director, "director", recorded) if world.director else None,
        )
        state = self._open_state(head, replaying)
        live = Live(head, state)
        for turn in turns:
            if head.seat == "user":
                if turn.move is not None:
                    state.take_user(turn.move)
                subject = journal.replay_caller(self.bound.subjects[head.subject], "subject", recorded)
                reply = await subject.ask(state.subject_messages(), state.subject_seed(), self.bound.prompts.subject_system)
            else:
                reply = human_reply(head.player, state.subject_seed(), turn.reply or "", turn.human_s)
            await state.advance(reply)
            live.human_s.append(turn.human_s)
            live.model_s.append(turn.model_s)
        state.roles, state.started = world, head.started_at
        if stop is not None and not state.done:
            if stop.move is not None and state.awaiting_user:
                state.take_user(stop.move)
            else:
                state.stop(stop.reason)
        live.finished = head.key in self.store.done_keys()
        if state.done and not live.finished:  # the server stopped between the last turn and the record
            await self._finish(live)
        return live


def _short(problem: str) -> str:
    """The kind of fault, never an address: the first words before any URL or colon."""
    words = []
    for word in problem.split():
        if "://" in word or word.endswith(":") or "/" in word:
            break
        words.append(word)
    return " ".join(words[:8]) or "no answer"

