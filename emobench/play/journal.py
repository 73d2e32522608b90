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


class JournalTurn(Record):
    """One finished turn: the person's part, the seconds it took, and every model call it made."""

    kind: Literal["turn"] = "turn"
    index: int
    move: UserMove | None = None  # user seat: the person's move this turn answers (None: turn 1's opening)
    reply: str | None = None  # subject seat: the person's reply
    human_s: float
    model_s: float
    calls: list[ModelCall]


class JournalStop(Record):
    """The person ended the episode: left as the user (with their last move) or stopped as the supporter."""

    kind: Literal["stop"] = "stop"
    reason: str
    move: UserMove | None = None
    human_s: float = 0.0


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


def read_journal(path: Path) -> tuple[JournalHead, list[JournalTurn], JournalStop | None, int]:
    """The head, the finished turns, the stop if any, and how often it was resumed; a torn tail
    line (the turn in progress when the server died) is ignored."""
    head: JournalHead | None = None
    turns: list[JournalTurn] = []
    stop: JournalStop | None = None
    resumed = 0
    for number, raw in whole_lines(path):
        try:
            kind = _KINDS[str(_peek_kind(raw))]
            line = kind.model_validate_json(raw)
        except (KeyError, ValidationError) as exc:
            raise InputError(path, f"line {number}", f"corrupt journal line: {exc}".splitlines()[0]) from None
        if isinstance(line, JournalHead):
            head = line
        elif isinstance(line, JournalTurn):
            turns.append(line)
        elif isinstance(line, JournalStop):
            stop = line
        else:
            resumed += 1
    if head is None:
        raise InputError(path, "line 1", "the journal has no head line")
    return head, turns, stop, resumed


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
