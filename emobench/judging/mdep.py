"""MDEP per-turn judgement: each judge rates the latest reply on C, A and P (docs/method.md §5.2).

Output is validated against the schema in every case; an unparseable verdict is retried,
then recorded as invalid. It is never scored as 0.
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import Any

from emobench.endpoints.structured import load_json_object
from emobench.episode.roles import RoleCaller, derive_seed
from emobench.prompts import PromptTemplate
from emobench.records import AxisLevel, JudgeVerdict, ModelCall, TurnJudgement
from emobench.registry import Case
from emobench.scoring.mdep import AXES, median_level, regression_points, turn_vector

_AXIS_SCHEMA = {
    "type": "object",
    "properties": {
        "progress": {"type": "integer", "enum": [0, 1, 2]},
        "regression": {"type": "integer", "enum": [0, 1, 2]},
        "evidence": {"type": "string"},
        "reason": {"type": "string"},
    },
    "required": ["progress", "regression", "evidence", "reason"],
    "additionalProperties": False,
}

MDEP_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "mdep_verdict",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {axis: _AXIS_SCHEMA for axis in AXES},
            "required": list(AXES),
            "additionalProperties": False,
        },
    },
}


def judge_messages(template: PromptTemplate, case: Case, transcript: list[dict[str, str]], reply: str) -> list[dict[str, str]]:
    context = {"persona": case.persona, "scenario": case.scenario}
    return [
        {"role": "system", "content": template.case_system(case)},
        {"role": "user", "content": template.block("user", transcript=transcript, reply=reply, **context)},
    ]


def parse_mdep(text: str, finish_reason: str | None = None) -> dict[str, AxisLevel]:
    """Parse one judge's verdict or raise ValueError naming what is wrong."""
    data = load_json_object(text, finish_reason)
    axes: dict[str, AxisLevel] = {}
    for axis in AXES:
        item = data.get(axis)
        if not isinstance(item, dict):
            raise ValueError(f"{axis}: missing")
        levels = {}
        for key in ("progress", "regression"):
            value = item.get(key)
            if isinstance(value, bool) or value not in (0, 1, 2):
                raise ValueError(f"{axis}.{key}: {value!r} is not a level 0, 1 or 2")
            levels[key] = int(value)
        evidence = item.get("evidence", "")
        if not isinstance(evidence, str):
            raise ValueError(f"{axis}.evidence: not a string")
        if (levels["progress"] or levels["regression"]) and not evidence.strip():
            raise ValueError(f"{axis}.evidence: missing for a non-zero level")
        reason = item.get("reason", "")
        axes[axis] = AxisLevel(
            progress=levels["progress"], regression=levels["regression"],
            evidence=evidence.strip(), reason=reason.strip() if isinstance(reason, str) else "",
        )
    return axes


async def _one_judge(
    judge: RoleCaller, messages: list[dict[str, str]], template: PromptTemplate, seed: int, turn: int, retries: int
) -> tuple[JudgeVerdict, list[ModelCall]]:
    axes, calls, error = await judge.ask_valid(
        messages, lambda attempt: derive_seed(seed, "judge", judge.info.label, turn, attempt), template, MDEP_FORMAT,
        lambda call: parse_mdep(call.text, call.finish_reason), retries,
    )
    if axes is None:
        return JudgeVerdict(judge=judge.info.label, valid=False, error=error), calls
    return JudgeVerdict(judge=judge.info.label, valid=True, axes=axes), calls  # type: ignore[arg-type]


@cache  # at most 3**6 keys
def _points(progress: tuple[int, ...], regression: tuple[int, ...]) -> tuple[tuple[float, float, float], float]:
    """The turn vector and regression points of the median levels (C, A, P), worked out once per
    combination by scoring's own functions: a turn pays one lookup, not their checks."""
    levels = dict(zip(AXES, progress, strict=True)), dict(zip(AXES, regression, strict=True))
    return turn_vector(*levels), regression_points(levels[1])


def aggregate(verdicts: list[JudgeVerdict]) -> TurnJudgement:
    """Median level per item over the valid judges; invalid when no judge is valid."""
    valid = [v.axes for v in verdicts if v.valid and v.axes]
    if not valid:
        return TurnJudgement(verdicts=verdicts, valid=False)
    if len(valid) == 1:  # one judge's levels are their own median (AxisLevel holds them in 0..2)
        (axes,) = valid
        progress = {axis: axes[axis].progress for axis in AXES}
        regression = {axis: axes[axis].regression for axis in AXES}
    else:
        progress = {axis: median_level([a[axis].progress for a in valid]) for axis in AXES}
        regression = {axis: median_level([a[axis].regression for a in valid]) for axis in AXES}
    vector, points = _points(tuple(progress.values()), tuple(regression.values()))
    return TurnJudgement(
        verdicts=verdicts,
        valid=True,
        progress=progress,  # type: ignore[arg-type]
        regression=regression,  # type: ignore[arg-type]
        vector=vector,
        regression_points=points,
    )


async def judge_turn(
    judges: tuple[RoleCaller, ...],
    template: PromptTemplate,
    case: Case,
    transcript: list[dict[str, str]],
    reply: str,
    seed: int,
    turn: int,
    retries: int,
) -> tuple[TurnJudgement, list[ModelCall]]:
    messages = judge_messages(template, case, transcript, reply)
    if len(judges) == 1:  # no task to schedule for a one-judge panel
        results = [await _one_judge(judges[0], messages, template, seed, turn, retries)]
    else:
        results = await asyncio.gather(*(_one_judge(j, messages, template, seed, turn, retries) for j in judges))
    calls = [call for _, judge_calls in results for call in judge_calls]
    return aggregate([verdict for verdict, _ in results]), calls
