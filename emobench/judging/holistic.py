"""Holistic rubric of a whole episode (docs/method.md §5.4): each judge scores empathy, humanlikeness,
persona adaptation and coherence 1–10, each with an evidence quote.

Output is validated in every case; an unparseable verdict is retried with a new seed, then
recorded as invalid. It is never scored as 0, and mean_scores leaves it out.
"""

from __future__ import annotations

import asyncio
from typing import Any

from emobench.endpoints.structured import load_json_object
from emobench.episode.roles import RoleCaller, derive_seed
from emobench.prompts import PromptTemplate
from emobench.records import HOLISTIC_DIMENSIONS, DimScore, Episode, HolisticVerdict, ModelCall
from emobench.registry import Case

# Evidence and reason come before the score so the judge commits to a number after quoting; the
# score is an enum, which every structured-output backend supports.
_DIM_SCHEMA = {
    "type": "object",
    "properties": {
        "evidence": {"type": "string", "minLength": 1},
        "reason": {"type": "string"},
        "score": {"type": "integer", "enum": list(range(1, 11))},
    },
    "required": ["evidence", "reason", "score"],
    "additionalProperties": False,
}

HOLISTIC_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "holistic_verdict",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {dim: _DIM_SCHEMA for dim in HOLISTIC_DIMENSIONS},
            "required": list(HOLISTIC_DIMENSIONS),
            "additionalProperties": False,
        },
    },
}


def holistic_messages(template: PromptTemplate, case: Case, episode: Episode) -> list[dict[str, str]]:
    """System: the rubric and the hidden persona card (fixed per case, so it caches across
    subjects and seeds). User: the whole transcript, plus a last message that got no reply."""
    context = {"persona": case.persona, "scenario": case.scenario}
    transcript: list[dict[str, str]] = []
    for turn in episode.turns:
        transcript.append({"speaker": case.persona.name, "text": turn.user.message})
        transcript.append({"speaker": "Assistant", "text": turn.reply})
    left_with = episode.last_user.message if episode.last_user else ""
    return [
        {"role": "system", "content": template.case_system(case)},
        {"role": "user", "content": template.block("user", transcript=transcript, left_with=left_with, **context)},
    ]


def parse_holistic(text: str, finish_reason: str | None = None) -> dict[str, DimScore]:
    """Parse one judge's rubric or raise ValueError naming what is wrong."""
    data = load_json_object(text, finish_reason)
    scores: dict[str, DimScore] = {}
    for dim in HOLISTIC_DIMENSIONS:
        item = data.get(dim)
        if not isinstance(item, dict):
            raise ValueError(f"{dim}: missing")
        score = item.get("score")
        if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 10:
            raise ValueError(f"{dim}.score: {score!r} is not an integer 1..10")
        evidence = item.get("evidence")
        if not isinstance(evidence, str) or not evidence.strip():
            raise ValueError(f"{dim}.evidence: missing or empty")
        reason = item.get("reason", "")
        if not isinstance(reason, str):
            raise ValueError(f"{dim}.reason: not a string")
        scores[dim] = DimScore(score=score, evidence=evidence.strip(), reason=reason.strip())
    return scores


async def _one_judge(
    judge: RoleCaller, messages: list[dict[str, str]], template: PromptTemplate, seed: int, retries: int
) -> tuple[HolisticVerdict, list[ModelCall]]:
    scores, calls, error = await judge.ask_valid(
        messages, lambda attempt: derive_seed(seed, "holistic", judge.info.label, attempt), template, HOLISTIC_FORMAT,
        lambda call: parse_holistic(call.text, call.finish_reason), retries,
    )
    if scores is None:
        return HolisticVerdict(judge=judge.info.label, valid=False, error=error), calls
    return HolisticVerdict(judge=judge.info.label, valid=True, scores=scores), calls


async def judge_holistic(
    judges: tuple[RoleCaller, ...], template: PromptTemplate, case: Case, episode: Episode, seed: int, retries: int
) -> tuple[list[HolisticVerdict], list[ModelCall]]:
    """Every judge rates the episode concurrently; one verdict per judge, valid or not."""
    messages = holistic_messages(template, case, episode)
    results = await asyncio.gather(*(_one_judge(j, messages, template, seed, retries) for j in judges))
    return [verdict for verdict, _ in results], [call for _, calls in results for call in calls]

