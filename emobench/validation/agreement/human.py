"""The judge–human agreement data set (`emobench validate RUN --human FILE`, docs/validity.md):
human-rated conversations read and checked, and the run's panel rating each one on the holistic
rubric. The agreement statistics of every judge check live beside it (stats.py)."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from emobench.errors import InputError
from emobench.registry import Registry
from emobench.rundir import RunDir

HUMAN_SCALE = (1, 10)  # the holistic rubric's scale, which human ratings must share


class HumanTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user: str = Field(min_length=1)
    assistant: str


class HumanConversation(BaseModel):
    """One line of a --human file (docs/validity.md)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    case_id: str
    turns: list[HumanTurn] = Field(min_length=1)
    ratings: dict[str, dict[str, int]] = Field(min_length=1)  # rater -> dimension -> 1..10


def read_human(path: Path, registry: Registry) -> list[HumanConversation]:
    """Parse and check a --human JSONL file; the first problem is one InputError naming the line."""
    from emobench.records import HOLISTIC_DIMENSIONS

    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(path, "", f"cannot read: {exc.strerror}") from None
    known = {c.id for c in registry.all_cases()}
    out: list[HumanConversation] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = HumanConversation.model_validate_json(line)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InputError(path, f"line {n}: {'.'.join(str(p) for p in err['loc']) or 'json'}", err["msg"]) from None
        if item.case_id not in known:
            raise InputError(path, f"line {n}: case_id", f"unknown case {item.case_id!r}; see `emobench scenarios list`")
        for rater, scores in item.ratings.items():
            for dim, score in scores.items():
                where = f"line {n}: ratings.{rater}.{dim}"
                if dim not in HOLISTIC_DIMENSIONS:
                    raise InputError(path, where, f"unknown dimension; use {', '.join(HOLISTIC_DIMENSIONS)}")
                if not HUMAN_SCALE[0] <= score <= HUMAN_SCALE[1]:
                    raise InputError(path, where, f"{score} is outside {HUMAN_SCALE[0]}..{HUMAN_SCALE[1]}")
        if item.id in {c.id for c in out}:
            raise InputError(path, f"line {n}: id", f"{item.id!r} appears twice")
        out.append(item)
    if not out:
        raise InputError(path, "", "no conversations")
    return out


async def panel_scores(
    run: RunDir, conversations: list[HumanConversation], registry: Registry, root: Path, cache: Any
) -> dict[str, dict[str, float | None]]:
    """The run's panel rates every conversation on the holistic rubric: mean over valid judges."""
    from emobench.config import validate_config
    from emobench.endpoints.pool import EndpointPool
    from emobench.episode.roles import derive_seed
    from emobench.judging.holistic import _one_judge
    from emobench.prompts import load_template
    from emobench.records import mean_scores
    from emobench.run.runner import _caller

    config = validate_config(run.read_manifest()["config"], run.manifest, root)
    template = load_template(root / "judges" / config.panel.rubrics["holistic"])
    async with AsyncExitStack() as stack:
        pool = EndpointPool(stack, run.logs, cache)
        judges = []
        for role in config.judges:
            client, info = await pool.resolve(role)
            judges.append(_caller("judge", client, info))

        async def rate(item: HumanConversation) -> tuple[str, dict[str, float | None]]:
            case = registry.case(item.case_id)
            transcript = [x for t in item.turns for x in (
                {"speaker": case.persona.name, "text": t.user}, {"speaker": "Assistant", "text": t.assistant})]
            messages = [
                {"role": "system", "content": template.case_system(case)},
                {"role": "user", "content": template.block(
                    "user", transcript=transcript, left_with="", persona=case.persona, scenario=case.scenario)},
            ]
            seed = derive_seed(0, "human", item.id)
            results = await asyncio.gather(*(_one_judge(j, messages, template, seed, config.judge_retries) for j in judges))
            verdicts = [verdict for verdict, _ in results]
            return item.id, mean_scores(verdicts)

        return dict(await asyncio.gather(*(rate(c) for c in conversations)))
