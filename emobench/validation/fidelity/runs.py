"""The two runs a fidelity report compares (docs/validity.md, "Simulator fidelity"): which run
people played, and each episode reduced to what the report compares.

Everything the report reads from a run directory is read here, so that a change in how a
people-played run records its players touches this module only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from emobench.errors import InputError
from emobench.records import Episode, RoleInfo
from emobench.rundir import RunDir

HUMAN_PREFIX = "human:"  # a people-played run records its user role's model as human:<handle>
Side = Literal["human", "simulator"]
AXES = ("C", "A", "P")
ITEMS = tuple(f"{axis} {kind}" for axis in AXES for kind in ("progress", "regression"))


@dataclass(frozen=True)
class EpisodeView:
    """One episode as the fidelity report sees it."""

    side: Side
    key: str  # the episode's key, unique within its run
    case_id: str
    subject: str  # the subject's model, as the episode recorded it
    meters: tuple[float, ...]  # the user's meter at each turn, then where they left it if they left
    messages: tuple[str, ...]  # every user message that got a reply, turn 1 included
    moves: tuple[str, ...]  # the user's own messages: turns 2.. and the one they left with, if any
    stop_reason: str
    levels: tuple[dict[str, int], ...]  # per validly judged turn: the panel's median level per MDEP item

    @property
    def pair(self) -> tuple[str, str]:
        return self.case_id, self.subject


@dataclass(frozen=True)
class Matched:
    human: list[EpisodeView]
    simulator: list[EpisodeView]
    human_users: list[str]  # the people who played the user in the human run (human:<handle>), sorted
    simulator_user: str
    unmatched_human: int
    unmatched_simulator: int

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return sorted({e.pair for e in self.human})


def user_model(rd: RunDir) -> str:
    """Who played the user, as the manifest records it: `human` for a run of `emobench play` in
    the user seat, else the user role's model (human:<handle> for people's episodes recorded elsewhere)."""
    man = rd.read_manifest()
    play = man.get("play")
    if isinstance(play, dict) and play.get("seat") == "user":
        return "human"
    roles = man.get("roles")
    user = roles.get("user") if isinstance(roles, dict) else None
    model = user.get("model") if isinstance(user, dict) else None
    if not isinstance(model, str) or not model:
        raise InputError(rd.manifest, "roles.user.model", "missing: cannot tell who played the user")
    return model


def is_human(model: str) -> bool:
    return model == "human" or model.startswith(HUMAN_PREFIX)


def _view(episode: Episode, side: Side) -> EpisodeView:
    subject = episode.roles.get("subject")
    # Turn 1 is the case's authored opening, the same words on both sides, so it is no user's move.
    moves = [t.user.message for t in episode.turns if t.index > 1]
    meters = [t.meter for t in episode.turns]
    if episode.last_user is not None:
        if episode.last_user.message.strip():  # a person may leave without a word: no move to compare
            moves.append(episode.last_user.message)
        meters.append(episode.final_meter)
    levels = tuple(
        {f"{axis} {kind}": int(getattr(t.judgement, kind)[axis]) for axis in AXES for kind in ("progress", "regression")}
        for t in episode.turns if t.judgement.valid and t.judgement.progress and t.judgement.regression
    )
    return EpisodeView(
        side=side, key=episode.key, case_id=episode.case_id,
        subject=subject.model if isinstance(subject, RoleInfo) else episode.subject,
        meters=tuple(meters), messages=tuple(t.user.message for t in episode.turns), moves=tuple(moves),
        stop_reason=episode.stop_reason, levels=levels,
    )


def _read(path: Path, side: Side) -> tuple[list[str], list[EpisodeView]]:
    if not path.is_dir():
        raise InputError(path, "", "run directory not found")
    rd = RunDir(path)
    model = user_model(rd)
    if side == "human" and not is_human(model):
        raise InputError(rd.manifest, "roles.user.model", f"{model!r}: HUMAN_RUN must be a run people played "
                         f"as the user ({HUMAN_PREFIX}<handle>)")
    if side == "simulator" and is_human(model):
        raise InputError(rd.manifest, "roles.user.model", f"{model!r}: SIM_RUN must be a run the simulator played")
    read = rd.read_episodes()
    if not read:
        raise InputError(rd.episodes, "", "no finished episodes")
    players = sorted({e.human.player for e in read if e.human is not None and e.human.seat == "user"})
    return players or [model], [_view(e, side) for e in read]


def read_matched(human_run: Path, simulator_run: Path) -> Matched:
    """Both runs' episodes on the (case, subject) pairs both played; InputError when none match."""
    human_users, human = _read(human_run, "human")
    (sim_user,), simulator = _read(simulator_run, "simulator")
    shared = {e.pair for e in human} & {e.pair for e in simulator}
    if not shared:
        raise InputError(human_run, "", f"no episode shares a case and subject with {simulator_run} "
                         f"(human: {sorted({e.case_id for e in human})}, simulator: {sorted({e.case_id for e in simulator})})")
    kept_h = [e for e in human if e.pair in shared]
    kept_s = [e for e in simulator if e.pair in shared]
    return Matched(kept_h, kept_s, human_users, sim_user, len(human) - len(kept_h), len(simulator) - len(kept_s))
