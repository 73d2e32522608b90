"""What the page is sent: plain JSON built from an allow-list of fields.

Nothing here reads a RoleInfo or a ModelCall's endpoint, so no key, address or model name
reaches the page; subjects are shown as letters (the person plays blind). Verdicts are sent
only once the episode has ended.
"""

from __future__ import annotations

from typing import Any

from emobench.play.journal import JournalHead
from emobench.play.live import Live, expired_note
from emobench.play.session import PlayHub
from emobench.records import EpisodeJudgement
from emobench.rundir import read_records
from emobench.scoring.anchoring import DIMENSIONS, SCALE


def subject_letters(hub: PlayHub) -> dict[str, str]:
    """Label -> the letter the page shows for it."""
    return {label: chr(ord("A") + i) for i, label in enumerate(hub.bound.subjects)}


def cases(hub: PlayHub) -> list[dict[str, str]]:
    return [
        {"id": case.id, "topic": case.scenario.topic, "persona": case.persona.name}
        for case in hub.cases.values()
    ]


def episode_row(hub: PlayHub, head: JournalHead) -> dict[str, Any]:
    return {
        "id": head.episode_id,
        "case": head.case_id,
        "subject": subject_letters(hub).get(head.subject, "you"),
        "started": head.started_at,
        "finished": head.key in hub.store.done_keys(),
    }


def player_view(hub: PlayHub, token: str) -> dict[str, Any]:
    player = hub.player(token)
    return {
        "handle": player.handle,
        "seat": hub.seat,
        "cases": cases(hub),
        "subjects": list(subject_letters(hub).values()) if hub.seat == "user" else [],
        "episodes": [episode_row(hub, h) for h in hub.store.episodes_of(player.token_sha256)],
    }


def episode_view(hub: PlayHub, live: Live) -> dict[str, Any]:
    state, head = live.state, live.head
    case = hub.cases[head.case_id]
    messages: list[dict[str, str]] = []
    for turn in state.turns:
        messages.append({"who": "user", "text": turn.user.message})
        messages.append({"who": "subject", "text": turn.reply})
    if state.last_user is not None and state.last_user.message:
        messages.append({"who": "user", "text": state.last_user.message})
    elif not state.done and hub.seat == "subject":
        messages.append({"who": "user", "text": state.move.message})  # the message awaiting the person's reply
    view: dict[str, Any] = {
        "id": head.episode_id,
        "seat": head.seat,
        "case": {"id": case.id, "topic": case.scenario.topic},
        "subject": subject_letters(hub).get(head.subject, "you"),
        "turn": state.turn,
        "messages": messages,
        "done": live.episode is not None or state.done,
        "error": expired_note(hub.quota.idle_expire_s, hub.quota.evict_idle_s) if live.expired else live.error,
        "expired": live.expired,
        "your_turn": not state.done and (state.awaiting_user if hub.seat == "user" else True),
        # the card's opening has no reply yet (the model failed): Send asks again, with no message
        "retry_opening": hub.seat == "user" and not state.done and not state.awaiting_user,
    }
    if hub.seat == "user":
        view["card"] = hub.bound.prompts.simulator.case_system(case).strip()
        view["meter"] = round(state.meter)
        view["guidance"] = state.guidance
    if view["done"]:
        view["result"] = _result(hub, live)
    if hub.seat == "user" and live.episode is not None:  # the person rates it before the page shows the verdicts
        view["rating"] = {"given": hub.store.rated(head.key), "dimensions": list(DIMENSIONS), "scale": list(SCALE)}
    return view


def _result(hub: PlayHub, live: Live) -> dict[str, Any]:
    """The verdicts, once the episode has ended: per-turn median levels, EPM status, holistic means."""
    state = live.state
    holistic: dict[str, float] = {}
    for judgement in read_records(hub.store.rd.judgements, EpisodeJudgement):
        if judgement.key != live.head.key:
            continue
        scores = [v.scores for v in judgement.holistic if v.valid and v.scores]
        for dim in sorted({d for s in scores for d in s}):
            values = [s[dim].score for s in scores if dim in s]
            holistic[dim] = round(sum(values) / len(values), 2)
    return {
        "stop_reason": state.stop_reason,
        "status": state.status,
        "final_meter": round(state.meter),
        "turns": [
            {
                "index": t.index,
                "valid": t.judgement.valid,
                "progress": dict(t.judgement.progress),
                "regression": dict(t.judgement.regression),
            }
            for t in state.turns
        ],
        "holistic": holistic,
    }
