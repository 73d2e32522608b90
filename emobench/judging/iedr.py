"""IEDR judge (docs/method.md §5.1): rate a case's nine initial-deficit items from its cards alone, so
`emobench calibrate` can check the authored levels against a judge.

The judge never sees the authored levels. Output is validated in every case; an invalid
rating is retried with a new seed, then reported as missing, never as level 0.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from emobench.endpoints.structured import load_json_object
from emobench.episode.roles import RoleCaller, derive_seed
from emobench.prompts import PromptTemplate
from emobench.records import ModelCall
from emobench.registry import Case, IEDRLevels
from emobench.registry.models import difficulty_of

ITEMS = ("C1", "C2", "C3", "A1", "A2", "A3", "P1", "P2", "P3")
DISAGREE_GAP = 2  # an item this many levels off the authored one is a disagreement

IEDR_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "iedr_levels",
        "strict": True,
        "schema": {
            "type": "object",
            # Notes first: the judge says what drives its ratings before it commits to them.
            "properties": {"notes": {"type": "string"}, **{item: {"type": "integer", "enum": [0, 1, 2, 3]} for item in ITEMS}},
            "required": ["notes", *ITEMS],
            "additionalProperties": False,
        },
    },
}


def iedr_messages(template: PromptTemplate, case: Case) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": template.block("system")},
        {"role": "user", "content": template.block(
            "user", case=case, persona=case.persona, scenario=case.scenario, opening=case.opening)},
    ]


def parse_iedr(text: str, finish_reason: str | None = None) -> IEDRLevels:
    """Parse the judge's nine levels or raise ValueError naming what is wrong."""
    data = load_json_object(text, finish_reason)
    levels: dict[str, int] = {}
    for item in ITEMS:
        value = data.get(item)
        if isinstance(value, bool) or value not in (0, 1, 2, 3):
            raise ValueError(f"{item}: {value!r} is not a level 0..3")
        levels[item] = int(value)
    try:
        return IEDRLevels(**levels)
    except ValidationError as exc:  # all nine at 0: a zero deficit is not a valid case
        raise ValueError(f"levels: {exc.errors()[0]['msg']}") from None


async def rate_case(
    judge: RoleCaller, template: PromptTemplate, case: Case, seed: int, retries: int
) -> tuple[IEDRLevels | None, list[ModelCall]]:
    """One judge's levels for one case; None when every attempt was invalid."""
    messages = iedr_messages(template, case)
    levels, calls, _ = await judge.ask_valid(
        messages, lambda attempt: derive_seed(seed, "iedr", case.id, judge.info.label, attempt), template, IEDR_FORMAT,
        lambda call: parse_iedr(call.text, call.finish_reason), retries,
    )
    return levels, calls


def compare(case: Case, rated: IEDRLevels) -> dict[str, Any]:
    """Authored against rated: per-item difference (rated − authored), both P0 and both
    difficulty bands; `disagree` when an item is DISAGREE_GAP or more levels off or the band moves."""
    authored, judged = case.iedr.model_dump(), rated.model_dump()
    diff = {item: judged[item] - authored[item] for item in ITEMS}
    band_authored, band_rated = difficulty_of(case.p0), difficulty_of(rated.p0)
    return {
        "case_id": case.id,
        "authored": authored,
        "rated": judged,
        "diff": diff,
        "p0_authored": list(case.p0),
        "p0_rated": list(rated.p0),
        "band_authored": band_authored,
        "band_rated": band_rated,
        "disagree": any(abs(d) >= DISAGREE_GAP for d in diff.values()) or band_authored != band_rated,
    }
