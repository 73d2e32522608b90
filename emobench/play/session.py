"""Episodes a person plays: open, advance one turn, leave, resume from the journal, delete.

One `PlayHub` per server. It holds the bound roles and the episodes in progress, each driven by
the same episode stepper as `emobench run`: a person in the user seat hands in their moves
(`EpisodeState.take_user`), a person in the subject seat their replies.

Operations on one episode run one at a time (a lock per episode). A turn is played on a copy of
the episode's state; the copy replaces the live state only once the turn's journal line is
written, so a failure of any kind leaves the episode as it was and the person can send again.
A delete marks the episode deleted before it waits for the operation in progress, and the store
refuses every later write for it. Judging happens outside the lock, so a delete never waits for
the judges.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Literal

from emobench.episode.probe import run_probe
from emobench.episode.roles import WorldRoles
from emobench.episode.stepper import EpisodeState, now, subject_conversation
from emobench.play import journal
from emobench.play.journal import JournalHead, JournalResume, JournalStop, JournalTurn
from emobench.play.limits import Addresses, ModelBudget, Quota, ServerFull
from emobench.play.live import MAX_MESSAGE, MODEL_FAULTS, RETRY, Live, expired_note, model_fault
from emobench.play.rebuild import Bound, fork, human_reply, open_state, rebuild
from emobench.play.store import Deleted, Player, PlayError, PlayStore, token_hash
from emobench.records import Episode, HumanSeat, ModelCall, UserMove
from emobench.registry import Case

Seat = Literal["user", "subject"]


class PlayHub:
    def __init__(self, store: PlayStore, bound: Bound, seat: Seat, cases: list[Case], base_seed: int, quota: Quota,
                 budget: ModelBudget) -> None:
        self.store, self.bound, self.seat, self.base_seed, self.quota = store, bound, seat, base_seed, quota
        self.budget = budget  # play.server_per_minute: starts, turns and leaves, shared fairly among players
        self.cases = {case.id: case for case in cases}
        self.live: dict[str, Live] = {}
        self.locks: dict[str, asyncio.Lock] = {}  # only for episodes that exist: an unknown id makes none
        self.judging: dict[str, asyncio.Task[str | None]] = {}
        self.addresses = Addresses()

    # --- players -------------------------------------------------------------------------
    def join(self, handle: str, consent: bool, address: str = "") -> str:
        if not consent:
            raise PlayError("please read the consent note and tick the box before playing")
        self.quota.admit_join(self.addresses, self.store, address)
        token = self.store.add_player(handle)
        self.addresses.joined(address, token_hash(token))
        return token

    def player(self, token: str) -> Player:
        found = self.store.player(token)
        if found is None:
            raise PlayError("unknown player link", status=404)
        return found

    # --- episodes ------------------------------------------------------------------------
    def _lock(self, episode_id: str) -> asyncio.Lock:
        return self.locks.setdefault(episode_id, asyncio.Lock())

    def owned_lock(self, player: Player, episode_id: str) -> asyncio.Lock:
        """The lock of an episode the player holds; an unknown or deleted id is refused before any lock is made."""
        if episode_id in self.store.deleted:
            raise Deleted
        head = self.store.heads.get(episode_id)
        if head is None or head.token_sha256 != player.token_sha256:
            raise PlayError("no such episode", status=404)
        return self._lock(episode_id)

    async def start(self, token: str, case_id: str | None, subject: str | None, request: str | None = None,
                    address: str = "") -> Live:
        player = self.player(token)
        if request is not None:  # the same start sent again (after a restart): its episode
            for head in self.store.episodes_of(player.token_sha256):
                if head.request == request:
                    return await self.get(token, head.episode_id)
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
        while True:
            try:
                self.quota.admit_start(self.addresses, self.store, player.token_sha256, address)
                break
            except ServerFull:  # room is made by ending the biggest holder's longest-idle episode, if it has one
                for victim in self.quota.victims(self.addresses, self.store, address):
                    if await self.expire(victim, self.quota.evict_idle_s):
                        break
                else:
                    raise
        self.budget.spend(player.token_sha256)
        seed = self.store.free_seed(label, case.id, self.base_seed)
        head = JournalHead(
            episode_id=secrets.token_hex(8), token_sha256=player.token_sha256, player=player.name, seat=self.seat,
            case_id=case.id, subject=label, seed=seed, key=f"{label}|{case.id}|{seed}|{player.name}",
            page_version=self.store.page_version, consented_at=player.consented_at, started_at=now(),
            config_hash=self.bound.provenance.config_hash, request=request,
        )
        self.store.heads[head.episode_id] = head  # counted from now on: many starts at once stay within the limits
        self.addresses.started(address, head.episode_id)
        async with self._lock(head.episode_id):
            try:
                await self.store.write_journal(head, head)
            except BaseException:
                self.store.heads.pop(head.episode_id, None)
                raise
            live = Live(head, self._open_state(head, self.bound.world), requests={request} if request else set())
            self.live[head.episode_id] = live
            if self.seat == "user":  # turn 1 is the card's opening: the subject answers it straight away
                try:
                    await self._play(live, None, None, 0.0)
                except PlayError as exc:
                    if exc.status == 410:
                        raise
                    # the episode exists: the page shows it with the error, and Send asks again
        return live

    async def get(self, token: str, episode_id: str) -> Live:
        player = self.player(token)
        live = self.live.get(episode_id)
        if live is None or episode_id in self.store.deleted:
            async with self.owned_lock(player, episode_id):
                live = await self._load(player, episode_id)
        if live.head.token_sha256 != player.token_sha256:
            raise PlayError("no such episode", status=404)
        return live

    async def _load(self, player: Player, episode_id: str) -> Live:
        """The live episode, rebuilt from its journal when this server has not held it yet (hold the lock)."""
        if episode_id in self.store.deleted:
            raise Deleted
        live = self.live.get(episode_id)
        if live is None:
            head = self.store.heads.get(episode_id)
            if head is None or head.token_sha256 != player.token_sha256:
                raise PlayError("no such episode", status=404)
            live = await self.reopen(head)
            if live.episode is not None and not self.store.judged(head.key):
                self.judge_later(live.head, live.episode)
        if live.head.token_sha256 != player.token_sha256:
            raise PlayError("no such episode", status=404)
        return live

    async def reopen(self, head: JournalHead, *, only_ended: bool = False) -> Live:
        """Rebuild an episode from its journal and hold it; one that ended but has no record gets it
        now. only_ended: leave an episode still in play as it is (hold the lock)."""
        read = journal.read_journal(self.store.journal_path(head.episode_id))
        live = await self._rebuild(read)
        if only_ended and not live.state.done:
            return live
        live.resumed = read.resumed
        if read.stop is None and head.key not in self.store.done_keys():
            await self.store.write_journal(head, JournalResume(at=now()))
            live.resumed += 1
        self.live[head.episode_id] = live
        if live.state.done and live.episode is None:  # the server stopped between the last turn and the record
            await self._record(live)
        return live

    async def turn(self, token: str, episode_id: str, message: str, meter: int | None, request: str | None = None) -> Live:
        player = self.player(token)
        async with self.owned_lock(player, episode_id):
            live = await self._load(player, episode_id)
            if request is not None and request in live.requests:  # sent again after a restart: played once
                return live
            self._check_open(live)
            self.budget.spend(player.token_sha256)
            text = message.strip()
            if len(text) > MAX_MESSAGE:
                raise PlayError(f"a message holds at most {MAX_MESSAGE} characters")
            if self.seat == "user":
                move = None
                if live.state.awaiting_user:
                    if not text:
                        raise PlayError("write a message first")
                    move = self._move(live, text, meter, leave=False)
                elif text:  # the opening is unanswered: a message now would go unread
                    raise PlayError("the model has not answered yet: ask it again with an empty send; "
                                    "your message is not sent", status=409)
                await self._play(live, move, None, time.monotonic() - live.shown_at, request)
            else:
                if not text:
                    raise PlayError("write a reply first")
                await self._play(live, None, text, time.monotonic() - live.shown_at, request)
            if live.state.done:
                await self._record(live)
        await self._judge(live)
        return live

    async def leave(self, token: str, episode_id: str, message: str, meter: int | None, request: str | None = None) -> Live:
        """The person ends the episode: as the user, leaving (with an optional last message); as the supporter, stopping."""
        player = self.player(token)
        async with self.owned_lock(player, episode_id):
            live = await self._load(player, episode_id)
            if request is not None and request in live.requests:
                return live
            self._check_open(live)
            self.budget.spend(player.token_sha256)
            waited = round(time.monotonic() - live.shown_at, 3)
            if self.seat == "subject" and message.strip():
                raise PlayError("your reply is not sent: send it first, or clear it to end without it", status=409)
            move = None
            if self.seat == "user" and live.state.awaiting_user:
                move = self._move(live, message.strip()[:MAX_MESSAGE], meter, leave=True)
            await self._end(live, move, JournalStop(reason=self._left, human_s=waited, request=request))
        await self._judge(live)
        return live

    async def expire(self, episode_id: str, idle_s: float) -> bool:
        """End an unfinished episode whose journal nobody wrote for idle_s seconds as its person leaving
        would, marked expired; judged in the background. True when it ended it here."""
        head = self.store.heads.get(episode_id)
        if head is None or episode_id in self.store.deleted:
            return False
        async with self._lock(episode_id):
            path = self.store.journal_path(episode_id)
            if episode_id in self.store.deleted or not path.exists() or time.time() - path.stat().st_mtime < idle_s:
                return False  # deleted, or played, while it waited for the lock
            live = self.live.get(episode_id)
            if live is None:  # not rebuilt by `reopen`: an expiry is no resume by the person
                read = journal.read_journal(path)
                live = await self._rebuild(read)
                live.resumed = read.resumed
            if live.episode is not None or live.state.done:
                return False  # ended: its record is catch_up's
            self.live[episode_id] = live
            await self._end(live, None, JournalStop(reason=self._left, expired=True))
        if live.episode is not None:
            self.judge_later(head, live.episode)
        return True

    @property
    def _left(self) -> str:
        return "user_left" if self.seat == "user" else "supporter_left"

    async def _end(self, live: Live, move: UserMove | None, stop: JournalStop) -> None:
        """Stop the episode (with the user's last move, if any), journal the stop, write the record (hold the lock)."""
        work = fork(live.state)
        if move is not None:
            work.take_user(move)
            stop = stop.model_copy(update={"reason": work.stop_reason, "move": move})
        else:
            work.stop(stop.reason)
        await self.store.write_journal(live.head, stop)
        live.state, live.expired = work, stop.expired
        if stop.request is not None:
            live.requests.add(stop.request)
        await self._record(live)

    async def delete(self, token: str, episode_id: str) -> dict[str, int]:
        player = self.player(token)
        head = self.store.heads.get(episode_id)
        if episode_id in self.store.deleted:
            raise Deleted
        if head is None or head.token_sha256 != player.token_sha256:
            raise PlayError("no such episode", status=404)
        self.store.deleted.add(episode_id)  # before the wait: the request in progress and every queued one see it
        try:
            async with self._lock(episode_id):
                path = self.store.journal_path(episode_id)
                texts = journal.read_journal(path).texts() if path.exists() else []
                self.live.pop(episode_id, None)
                return await self.store.delete(head, texts)
        finally:
            self.locks.pop(episode_id, None)  # what still waits holds it; what comes later sees the tombstone

    # --- the steps -----------------------------------------------------------------------
    def _check_open(self, live: Live) -> None:
        if live.expired:
            raise PlayError(expired_note(self.quota.idle_expire_s, self.quota.evict_idle_s))
        if live.episode is not None or live.state.done:
            raise PlayError("this episode has ended")

    def _move(self, live: Live, text: str, meter: int | None, leave: bool) -> UserMove:
        if meter is None or not 0 <= meter <= 100:
            raise PlayError("set your meter (0 to 100) first")
        return UserMove(message=text, meter_delta=meter - round(live.state.meter), leave=leave, human=True)

    async def _play(self, live: Live, move: UserMove | None, reply_text: str | None, waited: float,
                    request: str | None = None) -> None:
        """One turn on a copy of the state; the copy becomes the live state once its journal line is written."""
        work = fork(live.state)
        before = len(work.calls)
        started = time.monotonic()
        try:
            if self.seat == "user":
                if move is not None:
                    work.take_user(move)
                subject = self.bound.subjects[live.head.subject]
                reply = await subject.ask(work.subject_messages(), work.subject_seed(), self.bound.prompts.subject_system)
            else:
                reply = human_reply(live.head.player, work.subject_seed(), reply_text or "", waited)
            await work.advance(reply)
            line = JournalTurn(
                index=len(work.turns), move=move, reply=reply_text, human_s=round(waited, 3),
                model_s=round(time.monotonic() - started, 3), calls=work.calls[before:], request=request,
            )
            await self.store.write_journal(live.head, line)
        except PlayError:
            raise
        except Exception as exc:
            fault = model_fault(exc)
            if fault is None:
                live.error = f"This turn failed on the server. {RETRY}"
                raise
            live.error = f"A model did not answer ({fault}). {RETRY}"
            raise PlayError(live.error, status=502) from None
        live.state, live.error = work, None
        live.human_s.append(line.human_s)
        live.model_s.append(line.model_s)
        if request is not None:
            live.requests.add(request)
        live.shown_at = time.monotonic()

    async def _record(self, live: Live) -> None:
        """Write the finished episode's record (hold the lock)."""
        state, bound = live.state, self.bound
        probe, probe_calls = None, list[ModelCall]()
        if self.seat == "user" and bound.prompts.probe is not None and state.history:
            subject = self.bound.subjects[live.head.subject]
            try:
                probe, probe_calls = await run_probe(
                    subject, bound.prompts.probe, subject_conversation(bound.prompts, state.history), state.seed,
                    bound.limits.simulator_retries,
                )
            except MODEL_FAULTS as exc:  # the conversation is what counts; the episode is kept without the probe
                if model_fault(exc) is None:
                    raise
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
        await self.store.write_episode(head, episode)
        live.episode = episode

    async def _judge(self, live: Live) -> None:
        """Judge the finished episode now (once, however many requests ask); a judge that fails is one line."""
        if live.episode is None or self.store.judged(live.head.key):
            return
        problem = await asyncio.shield(self.judge_later(live.head, live.episode))
        if problem is not None:
            live.error = f"Your episode is saved; the judges did not answer ({problem}), so no verdict yet."

    def judge_later(self, head: JournalHead, episode: Episode) -> asyncio.Task[str | None]:
        """The one judging task of this episode; the next start of the server judges what fails here."""
        task = self.judging.get(head.key)
        if task is None:
            task = asyncio.create_task(self._judge_once(head, episode))
            self.judging[head.key] = task
            task.add_done_callback(lambda _: self.judging.pop(head.key, None))
        return task

    async def _judge_once(self, head: JournalHead, episode: Episode) -> str | None:
        try:
            await self.store.judge(head, episode, self.cases[head.case_id])
        except MODEL_FAULTS as exc:
            fault = model_fault(exc)
            if fault is None:
                raise
            return fault
        return None

    def _open_state(self, head: JournalHead, world: WorldRoles) -> EpisodeState:
        return open_state(self.bound, self.cases[head.case_id], head, world)

    async def _rebuild(self, read: journal.Journal) -> Live:
        """The episode as it stood after its last journalled turn, every model call answered from the journal."""
        head = read.head
        if head.case_id not in self.cases:
            raise PlayError(f"case {head.case_id!r} is not served here", status=404)
        state = await rebuild(self.bound, self.cases[head.case_id], read)
        live = Live(head, state, [t.human_s for t in read.turns], [t.model_s for t in read.turns], requests=set(read.requests),
                    expired=read.stop is not None and read.stop.expired)
        if head.key in self.store.done_keys():
            live.episode = next((e for e in self.store.rd.read_episodes() if e.key == head.key), None)
        elif head.seat == "user" and not state.done and not state.awaiting_user:
            live.error = f"The model has not answered the opening yet. {RETRY}"
        return live
