"""What the play server does at start-up with what a crash or a delete left behind.

`repair` runs before the server listens and returns one note per repair: a torn or corrupt
journal tail is cut, a delete that a stop interrupted is finished, a journal without a head
line and a person's record without a journal (both left by a delete an older server undid) are
removed, and so is the temporary file of a rewrite that a kill interrupted. `catch_up` runs in
the background while people play: it writes the record of every episode that ended but has
none, and judges every finished episode that has no judgement. `expire_idle` runs from the start
for as long as the server serves: it ends every unfinished episode idle past `play.idle_expire_s`,
so what a restart finds idle ends at once.
"""

from __future__ import annotations

import asyncio
import fcntl
import re
import time
from collections.abc import Callable
from pathlib import Path

from emobench.play import journal
from emobench.play.session import PlayHub
from emobench.play.store import PlayStore
from emobench.records import Episode

JOURNAL = re.compile(r"[0-9a-f]{16}\.jsonl")
PERSON = re.compile(r"\|human:[a-z0-9][a-z0-9_-]{0,31}$")  # the end of the key of a person's episode
JUDGING = 4  # episodes judged at once in the background


def _texts(episode: Episode) -> list[str]:
    if episode.human is not None and episode.human.seat == "subject":
        return [t.reply for t in episode.turns]
    return [t.user.message for t in episode.turns] + ([episode.last_user.message] if episode.last_user else [])


def _abandoned(path: Path) -> bool:
    """A temporary file no process is writing: its writer's lock (emobench.rundir.atomic_write_bytes) is free.
    The lock, not the PID in the name, tells: in a container the server is often PID 1 at every start."""
    try:
        with open(path, "rb") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True
    except FileNotFoundError:  # renamed into place meanwhile
        return False


def repair(store: PlayStore) -> list[str]:
    """Load the journals' heads, repairing what needs it; the notes say what was done."""
    notes: list[str] = []
    for path in sorted(store.rd.path.rglob(".*.tmp-*")):  # a rewrite a kill interrupted: it may hold deleted words
        if path.is_file() and _abandoned(path):
            path.unlink(missing_ok=True)
            notes.append(f"{path.relative_to(store.rd.path)}: removed a half-done rewrite")
    interrupted = []
    for path in sorted(store.journals.iterdir()):
        name = path.relative_to(store.rd.path)
        if not (path.is_file() and JOURNAL.fullmatch(path.name)):
            continue
        read, note = journal.repair_journal(path)
        if path.stem in store.deleted:
            interrupted.append((path, read))
        elif read is None:
            path.unlink()
            notes.append(f"{name}: no head line (what an undone delete leaves); removed")
        else:
            store.heads[path.stem] = read.head
            if note:
                notes.append(f"{name}: {note}")
    for path, read in interrupted:  # once every head is known: a player with episodes left keeps their handle
        if read is not None:
            store.heads[path.stem] = read.head
            store.scrub(read.head, read.texts())
        path.unlink(missing_ok=True)
        notes.append(f"{path.relative_to(store.rd.path)}: finished a delete that a stop interrupted")
    keys = {head.key for head in store.heads.values()}
    for episode in store.rd.read_episodes():
        if PERSON.search(episode.key) and episode.key not in keys:
            store.scrub_record(episode.key, episode.subject, episode.case_id, episode.seed, _texts(episode))
            notes.append(f"episodes.jsonl: a person's episode without a journal (an undone delete); removed {episode.key}")
    return notes


async def catch_up(hub: PlayHub, say: Callable[[str], None]) -> None:
    """Record the episodes that ended unrecorded and judge the unjudged, a few at a time."""
    store, gate = hub.store, asyncio.Semaphore(JUDGING)
    recorded = {episode.key: episode for episode in store.rd.read_episodes()}
    counts = {"recorded": 0, "judged": 0}

    async def one(episode_id: str) -> None:
        async with gate:
            head = store.heads.get(episode_id)
            if head is None or episode_id in store.deleted:
                return
            episode = recorded.get(head.key)
            try:
                if episode is None:
                    async with hub.locks.setdefault(episode_id, asyncio.Lock()):
                        if episode_id in store.deleted or episode_id in hub.live:
                            return
                        live = await hub.reopen(head, only_ended=True)
                        if live.episode is None:
                            return
                        episode = live.episode
                        counts["recorded"] += 1
                if not store.judged(head.key) and await hub.judge_later(head, episode) is None:
                    counts["judged"] += 1
            except Exception as exc:  # one episode that cannot be rebuilt must not stop the others
                say(f"play/journal/{episode_id}.jsonl: not caught up ({str(exc).splitlines()[0]})")

    await asyncio.gather(*(one(episode_id) for episode_id in list(store.heads)))
    if counts["recorded"] or counts["judged"] or store.scores_stale():
        store.refinalize()
    if counts["recorded"] or counts["judged"]:
        say(f"recorded {counts['recorded']} episode(s) that had ended and judged {counts['judged']} in the background")


async def expire_idle(hub: PlayHub, say: Callable[[str], None]) -> None:
    """Forever: end each unfinished episode whose journal was last written play.idle_expire_s ago or more
    (a journal's time survives a restart, so a restart does not make an episode new again)."""
    seconds = hub.quota.idle_expire_s
    while True:
        for episode_id in list(hub.store.heads):
            if episode_id in hub.store.deleted or not hub.store.unfinished(episode_id):
                continue
            try:
                if time.time() - hub.store.journal_path(episode_id).stat().st_mtime < seconds:
                    continue
                if await hub.expire(episode_id, seconds):
                    say(f"play/journal/{episode_id}.jsonl: ended, idle for {seconds:g} s (play.idle_expire_s)")
            except Exception as exc:  # one episode that cannot be ended must not keep the others open
                say(f"play/journal/{episode_id}.jsonl: not expired ({str(exc).splitlines()[0]})")
        await asyncio.sleep(min(60.0, seconds / 4))
