"""What `emobench play` keeps on disk, inside a normal run directory.

    play/players.jsonl        one line per player: handle, sha256 of their token, consent time
    play/journal/<id>.jsonl   the per-turn journal of each episode (emobench.play.journal)
    play/deleted.jsonl        the ids of deleted episodes (tombstones: no text, no handle)
    play/scored.json          what the last complete scoring read (a digest of the records' and judgements' keys)
    ratings.jsonl             each player's rating of their ended episode on the holistic rubric (emobench anchor)
    episodes.jsonl, judgements.jsonl, scores.parquet, report.json, leaderboard.parquet: as `emobench run`

A token is never written: only its hash, so the run directory does not hold the keys to it.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import secrets
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import orjson

from emobench.episode.stepper import now
from emobench.judging.stage import Panel, judge_episode
from emobench.play import journal
from emobench.play.journal import JournalHead
from emobench.play.scrub import scrub
from emobench.records import Episode, Limits
from emobench.registry import Case, Registry
from emobench.rundir import RunDir, append_line, atomic_write_bytes, whole_lines

HANDLE = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


class PlayError(Exception):
    """Something the page shows the person as one line (a bad request, a model that did not answer)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Player:
    handle: str
    token_sha256: str
    consented_at: str

    @property
    def name(self) -> str:
        return f"human:{self.handle}"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def page_version(folders: list[Path]) -> str:
    """The page's version: a hash of its templates, scripts and styles, so a record names the page it came from."""
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"play-page@{digest.hexdigest()[:10]}"


class Deleted(PlayError):
    """The episode was deleted: every request and every write after the delete sees this."""

    def __init__(self) -> None:
        super().__init__("this episode was deleted", status=410)


class PlayStore:
    """Every write of the play server goes through here, under one lock and after a check that
    the episode is not deleted, so nothing is written for an episode once its delete has begun."""

    def __init__(self, rd: RunDir, registry: Registry, panel: Panel, limits: Limits, version: str) -> None:
        self.rd, self.registry, self.panel, self.limits, self.page_version = rd, registry, panel, limits, version
        self.folder = rd.path / "play"
        self.players_file = self.folder / "players.jsonl"
        self.journals = self.folder / "journal"
        self.tombstones = self.folder / "deleted.jsonl"
        self.stamp = self.folder / "scored.json"
        self.journals.mkdir(parents=True, exist_ok=True)
        self._players = {p.token_sha256: p for p in self._read_players()}
        self.deleted = {str(orjson.loads(line)["episode_id"]) for _, line in whole_lines(self.tombstones)}
        self._done = rd.done_keys()
        self._judged = rd.judged_keys()
        self._rated = {str(orjson.loads(line)["episode"]) for _, line in whole_lines(rd.ratings)}
        self.heads: dict[str, JournalHead] = {}
        self._write = asyncio.Lock()  # every append and rewrite of the run directory's files
        self._finalizing = threading.Lock()
        self._players_file = threading.Lock()  # joins append in the event loop, a delete rewrites in a thread
        self._pending: set[asyncio.Future[None]] = set()
        self._scoring: asyncio.Future[None] | None = None
        self._stale = False

    # --- players -------------------------------------------------------------------------
    def _read_players(self) -> list[Player]:
        players = []
        for _, line in whole_lines(self.players_file):
            data = orjson.loads(line)
            players.append(Player(data["handle"], data["token_sha256"], data["consented_at"]))
        return players

    def add_player(self, handle: str) -> str:
        handle = handle.strip().lower()
        if not HANDLE.fullmatch(handle):
            raise PlayError("a handle is 1 to 32 letters, digits, - or _, starting with a letter or digit")
        if any(p.handle == handle for p in self._players.values()):
            raise PlayError(f"the handle {handle!r} is taken; choose another")
        token = secrets.token_urlsafe(18)
        player = Player(handle, token_hash(token), now())
        with self._players_file:
            append_line(self.players_file, orjson.dumps(player.__dict__))
        self._players[player.token_sha256] = player
        return token

    def player(self, token: str) -> Player | None:
        return self._players.get(token_hash(token))

    def has_player(self, token_sha256: str) -> bool:
        return token_sha256 in self._players

    def _forget_player(self, player: Player) -> None:
        """Remove a player with no episode left from players.jsonl (their link stops working)."""
        with self._players_file:  # a join appending meanwhile would be lost by the rewrite
            kept = [line for _, line in whole_lines(self.players_file)
                    if orjson.loads(line)["token_sha256"] != player.token_sha256]
            atomic_write_bytes(self.players_file, b"".join(kept))

    # --- ratings -------------------------------------------------------------------------
    def rated(self, key: str) -> bool:
        return key in self._rated

    async def rate(self, head: JournalHead, scores: dict[str, int]) -> None:
        """The player's rating of their ended episode: one line of ratings.jsonl, as `emobench anchor` reads it."""
        async with self._write:
            if head.episode_id in self.deleted:
                raise Deleted
            if head.key in self._rated:
                raise PlayError("this episode is rated already", status=409)
            line = orjson.dumps({"episode": head.key, "ratings": {head.player: scores}, "rated_at": now()})
            await asyncio.shield(asyncio.to_thread(append_line, self.rd.ratings, line))
            self._rated.add(head.key)

    # --- episodes ------------------------------------------------------------------------
    def journal_path(self, episode_id: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{16}", episode_id):
            raise PlayError("no such episode", status=404)
        return self.journals / f"{episode_id}.jsonl"

    def episodes_of(self, token_sha256: str) -> list[JournalHead]:
        return [h for h in self.heads.values() if h.token_sha256 == token_sha256 and h.episode_id not in self.deleted]

    def unfinished(self, episode_id: str) -> bool:
        head = self.heads.get(episode_id)
        return head is not None and head.key not in self._done

    def open_episodes(self, token_sha256: str | None = None) -> int:
        """Unfinished episodes, of one player or of everyone."""
        return sum(h.key not in self._done and token_sha256 in (None, h.token_sha256) for h in self.heads.values())

    def cases_played(self, player: str) -> Counter[str]:
        return Counter(h.case_id for h in self.heads.values() if h.player == player)

    def free_seed(self, subject: str, case_id: str, base: int) -> int:
        """The first seed from base that no episode of this subject and case holds, so that
        (subject, case, seed) stays unique as every reader of a run directory expects."""
        used = {h.seed for h in self.heads.values() if h.subject == subject and h.case_id == case_id}
        seed = base
        while seed in used:
            seed += 1
        return seed

    def done_keys(self) -> set[str]:
        return self._done

    def judged(self, key: str) -> bool:
        return key in self._judged

    async def write_journal(self, head: JournalHead, line: journal.JournalLine) -> None:
        async with self._write:
            if head.episode_id in self.deleted:
                raise Deleted
            await asyncio.shield(asyncio.to_thread(journal.append, self.journal_path(head.episode_id), line))
            if isinstance(line, JournalHead):
                self.heads[head.episode_id] = head

    async def write_episode(self, head: JournalHead, episode: Episode) -> None:
        async with self._write:
            if head.episode_id in self.deleted:
                raise Deleted
            if episode.key in self._done:  # written before a restart; the record stands as it was
                return
            await asyncio.shield(asyncio.to_thread(self.rd.append_episode, episode))
            self._done.add(episode.key)

    async def judge(self, head: JournalHead, episode: Episode, case: Case) -> bool:
        """Judge a finished episode as `emobench run` does and write the judgement unless it was
        deleted or judged meanwhile; then score the run again. True when a judgement was written."""
        judgement = await judge_episode(self.panel, case, episode, self.limits)
        async with self._write:
            if head.episode_id in self.deleted or episode.key in self._judged or episode.key not in self._done:
                return False
            line = judgement.model_dump_json().encode()
            await asyncio.shield(asyncio.to_thread(append_line, self.rd.judgements, line))
            self._judged.add(episode.key)
        self.refinalize()
        return True

    async def delete(self, head: JournalHead, texts: list[str]) -> dict[str, int]:
        """Tombstone the episode, then remove every trace of it from the run directory; then score again.
        The files are rewritten in a thread; what this process holds in memory changes here, in the loop."""
        async with self._write:
            self.deleted.add(head.episode_id)
            await asyncio.to_thread(append_line, self.tombstones, orjson.dumps({"episode_id": head.episode_id, "at": now()}))
            removed = await asyncio.to_thread(self._scrub_files, head.key, head.subject, head.case_id, head.seed, texts,
                                              self.journal_path(head.episode_id))
            player = self._forget_episode(head)
            if player is not None:
                await asyncio.to_thread(self._forget_player, player)
                removed["play/players.jsonl"] = 1
        self.refinalize()
        return removed

    def scrub(self, head: JournalHead, texts: list[str]) -> None:
        """A delete's files and memory at once (start-up, before the server serves anything)."""
        self._scrub_files(head.key, head.subject, head.case_id, head.seed, texts, self.journal_path(head.episode_id))
        player = self._forget_episode(head)
        if player is not None:
            self._forget_player(player)

    def scrub_record(self, key: str, subject: str, case_id: str, seed: int, texts: list[str]) -> None:
        """A record without a journal (start-up): its files and its keys."""
        self._scrub_files(key, subject, case_id, seed, texts, None)
        self._done.discard(key)
        self._judged.discard(key)

    def _scrub_files(self, key: str, subject: str, case_id: str, seed: int, texts: list[str],
                     journal_path: Path | None) -> dict[str, int]:
        """Remove the record and every copy of it; the scores made from it go too, until `refinalize`
        writes them again (after the scoring in progress, which may have read it)."""
        self._rated.discard(key)
        with self._finalizing:
            removed = scrub(self.rd, key, subject, case_id, seed, texts)
            for path in (self.stamp, self.rd.scores, self.rd.report, self.rd.leaderboard, self.rd.pairwise):
                path.unlink(missing_ok=True)
        if journal_path is not None:
            journal_path.unlink(missing_ok=True)  # last: its words found the other copies
        return removed

    def _forget_episode(self, head: JournalHead) -> Player | None:
        """Drop the episode from memory; the player too when it was their last (returned: their line goes)."""
        self._done.discard(head.key)
        self._judged.discard(head.key)
        self.heads.pop(head.episode_id, None)
        player = self._players.get(head.token_sha256)
        if player is None or self.episodes_of(player.token_sha256):
            return None
        self._players.pop(player.token_sha256, None)
        return player

    def refinalize(self) -> None:
        """Score the run again in the background; requests while it runs fold into one more pass."""
        self._stale = True
        if self._scoring is None or self._scoring.done():
            self._scoring = asyncio.ensure_future(self._rescore())
            self._pending.add(self._scoring)
            self._scoring.add_done_callback(self._pending.discard)

    async def _rescore(self) -> None:
        while self._stale:
            self._stale = False
            await asyncio.to_thread(self.finalize)

    async def settle(self) -> None:
        """Wait for the scoring still running (the server calls this before it stops)."""
        await asyncio.gather(*self._pending, return_exceptions=True)

    def finalize(self) -> None:
        """scores.parquet, report.json and leaderboard.parquet as `emobench run` writes them;
        with no episode left, none of them (a deleted episode must not live on in a score)."""
        from emobench.publish.leaderboard import build_leaderboard, write_leaderboard
        from emobench.run.finalize import finalize_run

        with self._finalizing:
            self.stamp.unlink(missing_ok=True)  # until the last file is written, the scores are not what the records say
            if not self.rd.done_keys():
                for path in (self.rd.scores, self.rd.report, self.rd.leaderboard, self.rd.pairwise):
                    path.unlink(missing_ok=True)
                return
            read = self._digest()
            finalize_run(self.rd, self.registry)
            write_leaderboard(build_leaderboard([self.rd.path]), self.rd.path)
            atomic_write_bytes(self.stamp, orjson.dumps({"records": read}))

    def _digest(self) -> str:
        """The records' and the judgements' keys, as files hold them now."""
        keys = sorted(self.rd.done_keys()), sorted(self.rd.judged_keys())
        return hashlib.sha256(orjson.dumps(keys)).hexdigest()

    def scores_stale(self) -> bool:
        """Whether the scores, report and leaderboard are not those of the records and judgements on
        disk (a kill during scoring leaves them half-written or old): decided from the records, not from
        which files exist."""
        outputs = (self.rd.scores, self.rd.report, self.rd.leaderboard)
        if not self.rd.done_keys():
            return any(path.exists() for path in outputs)
        if not all(path.exists() for path in outputs) or not self.stamp.exists():
            return True
        try:
            stamp, report = orjson.loads(self.stamp.read_bytes()), orjson.loads(self.rd.report.read_bytes())
        except orjson.JSONDecodeError:
            return True
        return stamp.get("records") != self._digest() or report.get("episodes") != len(self.rd.done_keys())
