"""What `emobench play` keeps on disk, inside a normal run directory.

    play/players.jsonl        one line per player: handle, sha256 of their token, consent time
    play/journal/<id>.jsonl   the per-turn journal of each episode (emobench.play.journal)
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

from emobench.episode.roles import Limits
from emobench.episode.stepper import now
from emobench.judging.stage import Panel, judge_finished
from emobench.play import journal
from emobench.play.journal import JournalHead
from emobench.records import Episode
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


class PlayStore:
    def __init__(self, rd: RunDir, registry: Registry, panel: Panel, limits: Limits, version: str) -> None:
        self.rd, self.registry, self.panel, self.limits, self.page_version = rd, registry, panel, limits, version
        self.folder = rd.path / "play"
        self.players_file = self.folder / "players.jsonl"
        self.journals = self.folder / "journal"
        self.journals.mkdir(parents=True, exist_ok=True)
        self._players = {p.token_sha256: p for p in self._read_players()}
        self._done = rd.done_keys()
        self.heads: dict[str, JournalHead] = {}
        for path in sorted(self.journals.glob("*.jsonl")):
            head = journal.read_journal(path)[0]
            self.heads[head.episode_id] = head
        self._write = asyncio.Lock()  # appends and rewrites of episodes.jsonl / judgements.jsonl
        self._finalizing = threading.Lock()
        self._pending: set[asyncio.Future[None]] = set()

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
        append_line(self.players_file, orjson.dumps(player.__dict__))
        self._players[player.token_sha256] = player
        return token

    def player(self, token: str) -> Player | None:
        return self._players.get(token_hash(token))

    # --- episodes ------------------------------------------------------------------------
    def journal_path(self, episode_id: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{16}", episode_id):
            raise PlayError("no such episode", status=404)
        return self.journals / f"{episode_id}.jsonl"

    def open_journal(self, head: JournalHead) -> None:
        journal.append(self.journal_path(head.episode_id), head)
        self.heads[head.episode_id] = head

    def episodes_of(self, token_sha256: str) -> list[JournalHead]:
        return [h for h in self.heads.values() if h.token_sha256 == token_sha256]

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

    async def finish(self, episode: Episode, case: Case) -> None:
        """Append the finished episode, judge it as `emobench run` does, and score the run again."""
        async with self._write:
            await asyncio.shield(asyncio.to_thread(self.rd.append_episode, episode))
            self._done.add(episode.key)
        try:
            async with self._write:  # judging appends to judgements.jsonl, which a delete rewrites
                await judge_finished(self.rd, episode, case, self.panel, self.limits)
        finally:
            self._refinalize()

    async def delete(self, head: JournalHead) -> None:
        """Remove every trace of the episode: its record, its judgements, its journal; then score again."""
        async with self._write:
            for path in (self.rd.episodes, self.rd.judgements):
                await asyncio.to_thread(_drop_key, path, head.key)
            self._done.discard(head.key)
            self.journal_path(head.episode_id).unlink(missing_ok=True)
            self.heads.pop(head.episode_id, None)
        self._refinalize()

    def _refinalize(self) -> None:
        task = asyncio.ensure_future(asyncio.to_thread(self.finalize))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def settle(self) -> None:
        """Wait for the scoring still running (the server calls this before it stops)."""
        await asyncio.gather(*self._pending, return_exceptions=True)

    def finalize(self) -> None:
        """scores.parquet, report.json and leaderboard.parquet as `emobench run` writes them;
        with no episode left, none of them (a deleted episode must not live on in a score)."""
        from emobench.publish.leaderboard import build_leaderboard, write_leaderboard
        from emobench.report import finalize_run

        with self._finalizing:
            if not self.rd.done_keys():
                for path in (self.rd.scores, self.rd.report, self.rd.leaderboard):
                    path.unlink(missing_ok=True)
                return
            finalize_run(self.rd, self.registry)
            write_leaderboard(build_leaderboard([self.rd.path]), self.rd.path)


def _drop_key(path: Path, key: str) -> None:
    if not path.exists():
        return
    kept = [line for _, line in whole_lines(path) if orjson.loads(line).get("key") != key]
    atomic_write_bytes(path, b"".join(kept))
