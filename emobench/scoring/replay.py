"""Replay the EPM engine over a finished conversation with another panel's turn judgements."""

from __future__ import annotations

from collections.abc import Sequence

from emobench.profiles import EngineRules
from emobench.records import Episode, EPMPoint, TurnJudgement
from emobench.trackers.epm import EPMEngine


def rejudged(
    episode: Episode, mdep: Sequence[TurnJudgement], min_turns: int, rules: EngineRules | None = None
) -> Episode:
    """The episode with new turn judgements, EPM points and status.

    The conversation is fixed, so it may go on past the turn where this panel's EPM state
    first reached a status; that first status is the one recorded, as the live loop would.
    """
    if len(mdep) != len(episode.turns):
        raise ValueError(f"{episode.key}: {len(mdep)} turn judgements for {len(episode.turns)} turns")
    engine = EPMEngine(episode.p0, min_turns=min_turns, rules=rules)
    status: str | None = None
    success_turn: int | None = None
    turns = []
    for turn, judgement in zip(episode.turns, mdep, strict=True):
        point = None
        if judgement.valid and judgement.vector is not None:
            step = engine.step(judgement.vector)
            point = EPMPoint(p=step.p, delta_e=step.delta_e, cos=step.cos, energy=step.energy)
            if status is None and step.status is not None:
                status = step.status
                success_turn = turn.index if status == "success" else None
        turns.append(turn.model_copy(update={"judgement": judgement, "epm": point}))
    return episode.model_copy(update={"turns": turns, "status": status, "success_turn": success_turn})
