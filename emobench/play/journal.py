"""The per-turn journal of an episode a person plays: one fsynced JSONL line per turn.

A closed tab or a killed server loses at most the turn in progress. To resume, the lines are
played through the episode stepper again with every model call answered from the journal
(`replay_caller`): no model is asked twice, and the rebuilt state is the one that was lost.
"""

from __future__ import annotations

from collections import defaultdict, deque
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import ValidationError

from emobench.endpoints.client import Completion
from emobench.episode.roles import RoleCaller
from emobench.errors import InputError
from emobench.records import ModelCall, Record, RoleInfo, UserMove
from emobench.rundir import append_line, whole_lines


class JournalHead(Record):
    kind: Literal["head"] = "head"
    episode_id: str
    token_sha256: str  # the player session that owns the episode (the token itself is never stored)
    player: str  # "human:<handle>"
    seat: Literal["user", "subject"]
    case_id: str
    subject: str  # the subject's label: a model's, or the player's in the subject seat
    seed: int
    key: str
    page_version: str
    consented_at: str
    started_at: str
    config_hash: str
    request: str | None = None  # the start request's Idempotency-Key


class JournalTurn(Record):
    """One finished turn: the person's part, the seconds it took, and every model call it made."""

    kind: Literal["turn"] = "turn"
    index: int
    move: UserMove | None = None  # user seat: the person's move this turn answers (None: turn 1's opening)
    reply: str | None = None  # subject seat: the person's reply
    human_s: float
    model_s: float
    calls: list[ModelCall]
    request: str | None = None  # the Idempotency-Key of the request that played it


class JournalStop(Record):
    """The person ended the episode: left as the user (with their last move) or stopped as the supporter;
    or the server did, for them, when they left it idle."""

    kind: Literal["stop"] = "stop"
    reason: str
    move: UserMove | None = None
    human_s: float = 0.0
    request: str | None = None
    expired: bool = False  # the server ended it: nobody played it for play.idle_expire_s


class JournalResume(Record):
    """A server rebuilt the episode from this journal (after a restart)."""

    kind: Literal["resume"] = "resume"
    at: str


JournalLine = JournalHead | JournalTurn | JournalStop | JournalResume
_KINDS: dict[str, type[JournalLine]] = {
    "head": JournalHead, "turn": JournalTurn, "stop": JournalStop, "resume": JournalResume,
}


def append(path: Path, line: JournalLine) -> None:
    append_line(path, line.model_dump_json().encode())


class Journal:
    """A journal as read: the head, the finished turns, the stop if any, how often it was resumed,
    and the idempotency keys of the requests it holds."""

    def __init__(self, head: JournalHead, turns: list[JournalTurn], stop: JournalStop | None, resumed: int) -> None:
        self.head, self.turns, self.stop, self.resumed = head, turns, stop, resumed
        lines: list[JournalHead | JournalTurn | JournalStop] = [head, *turns, *([stop] if stop else [])]
        self.requests = {line.request for line in lines if line.request}

    def texts(self) -> list[str]:
        """The person's own words: their messages as the user, their replies as the supporter."""
        moves = [t.move for t in self.turns] + [self.stop.move if self.stop else None]
        return [m.message for m in moves if m is not None] + [t.reply for t in self.turns if t.reply]


def _lines(path: Path) -> tuple[list[JournalLine], int, str | None]:
    """The valid lines up to the first torn or corrupt one, the bytes they take, and what was wrong after."""
    lines: list[JournalLine] = []
    size = 0
    for number, raw in whole_lines(path):
        try:
            lines.append(_KINDS[str(_peek_kind(raw))].model_validate_json(raw))
        except (KeyError, ValidationError) as exc:
            return lines, size, f"line {number}: {str(exc).splitlines()[0]}"
        size += len(raw)
    return lines, size, None


def _journal(lines: list[JournalLine]) -> Journal | None:
    heads = [line for line in lines if isinstance(line, JournalHead)]
    if len(heads) != 1 or not lines or lines[0] is not heads[0]:
        return None
    turns = [line for line in lines if isinstance(line, JournalTurn)]
    stops = [line for line in lines if isinstance(line, JournalStop)]
    return Journal(heads[0], turns, stops[-1] if stops else None, sum(isinstance(line, JournalResume) for line in lines))


def read_journal(path: Path) -> Journal:
    """The journal; a torn tail line (the turn in progress when the server died) is ignored."""
    lines, _, problem = _lines(path)
    if problem is not None:
        raise InputError(path, problem.split(":")[0], "corrupt journal line" + problem.partition(":")[2])
    found = _journal(lines)
    if found is None:
        raise InputError(path, "line 1", "the journal has no head line")
    return found


def repair_journal(path: Path) -> tuple[Journal | None, str | None]:
    """Cut a torn or corrupt tail from a journal; the journal (None when it has no head line,
    or not exactly one) and a note of what was repaired, if anything."""
    lines, size, problem = _lines(path)
    note = None
    if path.stat().st_size != size:
        with open(path, "r+b") as fh:
            fh.truncate(size)
        note = f"cut {'a torn last line' if problem is None else problem} (lines after it are lost)"
    return _journal(lines), note


def _peek_kind(raw: bytes) -> Any:
    try:
        return orjson.loads(raw).get("kind")
    except (orjson.JSONDecodeError, AttributeError):
        return None


def replay_caller(role: RoleCaller | RoleInfo, role_name: str, calls: list[ModelCall]) -> RoleCaller:
    """A role that answers each request from the journal's recorded calls of that role and label.

    Requests are matched on (role, label, seed): every seed in an episode is derived from the
    role, label, turn and attempt, so the match is the call that was made.
    """
    info = role.info if isinstance(role, RoleCaller) else role
    recorded: dict[int, deque[ModelCall]] = defaultdict(deque)
    for made in calls:
        if made.role == role_name and made.label == info.label:
            recorded[made.seed].append(made)

    async def answer(messages: list[dict[str, str]], seed: int, response_format: dict[str, Any] | None) -> Completion:
        if not recorded[seed]:
            raise JournalMismatch(f"the journal holds no {role_name} call {info.label!r} with seed {seed}")
        done = recorded[seed].popleft()
        return Completion(
            text=done.text, finish_reason=done.finish_reason, prompt_tokens=done.prompt_tokens,
            completion_tokens=done.completion_tokens, latency_s=done.latency_s, attempts=done.attempts,
            cached=done.cached, template=done.template,
        )

    return RoleCaller(role=role_name, info=info, call=answer)


class JournalMismatch(RuntimeError):
    """Replaying a journal asked for a call it does not hold: the journal and the code disagree."""
