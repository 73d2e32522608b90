"""Typed cards: persona, scenario, and the case that pairs them with its IEDR levels.

Input models (`*Card`, `CaseEntry`) mirror the YAML exactly and forbid unknown keys; the
public models add the content hash the loader computes, so they also round-trip as records.
"""

from __future__ import annotations

import math
import warnings
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Axis = Literal["C", "A", "P"]
Level = Literal["high", "medium", "low"]
Difficulty = Literal["easy", "medium", "hard", "very_hard"]
Category = Literal["life", "health", "leisure", "values", "relations", "career"]
Period = Literal["childhood", "adolescence", "adulthood", "current"]
Resistance = Literal["hinting", "testing", "deflecting", "pushing_back", "withdrawing"]
Trait = Literal["openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism"]

AXES: tuple[Axis, ...] = ("C", "A", "P")
CATEGORIES: tuple[Category, ...] = ("life", "health", "leisure", "values", "relations", "career")
DIFFICULTIES: tuple[Difficulty, ...] = ("easy", "medium", "hard", "very_hard")
THRESHOLDS: tuple[Level, ...] = ("low", "medium", "high")
TRAITS: tuple[Trait, ...] = (
    "openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism",
)

# docs/method.md §5.1: points per level step, by item kind (level 0 scores 0).
ITEM_STEP: dict[str, int] = {
    "C1": 2, "C2": 2, "C3": 3,
    "A1": 2, "A2": 4, "A3": 3,
    "P1": 2, "P2": 4, "P3": 3,
}
# Upper bounds of ||P0|| per band, squared so the comparison is exact integer arithmetic.
_DIFFICULTY_BOUNDS_SQ: tuple[tuple[int, Difficulty], ...] = (
    (27**2, "easy"), (32**2, "medium"), (36**2, "hard"),
)

Text = Annotated[str, Field(min_length=1)]
Id = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=64)]


class _Strict(BaseModel):
    # strict: YAML `yes` or `"3"` must not quietly become a bool or an int.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


with warnings.catch_warnings():
    # `register` only shadows ABCMeta.register on the class; instances read the field fine.
    warnings.filterwarnings("ignore", message='Field name "register"')

    class Style(_Strict):
        length: Literal["terse", "short", "medium", "long"]
        register: Text
        habits: list[Text]


class Need(_Strict):
    level: Level
    why: Text


class Needs(_Strict):
    C: Need
    A: Need
    P: Need

    @model_validator(mode="after")
    def _one_high(self) -> Needs:
        high = [axis for axis in AXES if self[axis].level == "high"]
        if len(high) != 1:
            raise ValueError(f"exactly one need must be 'high', found {len(high)}")
        return self

    def __getitem__(self, axis: Axis) -> Need:
        need: Need = getattr(self, axis)
        return need

    @property
    def dominant(self) -> Axis:
        return next(axis for axis in AXES if self[axis].level == "high")


class PersonaCard(_Strict):
    id: Id
    version: int = Field(ge=1)
    name: Text
    age: int = Field(ge=13, le=110)
    identity: Text
    background: Text
    big_five: dict[Trait, Literal["high", "low"]]
    style: Style
    threshold: Level
    needs: Needs
    resistance: list[Resistance] = Field(min_length=1)
    meter_start: int = Field(default=40, ge=0, le=100)

    @field_validator("big_five")
    @classmethod
    def _all_traits(cls, value: dict[Trait, str]) -> dict[Trait, str]:
        missing = [t for t in TRAITS if t not in value]
        if missing:
            raise ValueError(f"missing trait(s): {', '.join(missing)}")
        return value


class Persona(PersonaCard):
    content_hash: str


class Memory(_Strict):
    period: Period
    text: Text


class ScenarioCard(_Strict):
    id: Id
    version: int = Field(ge=1)
    category: Category
    topic: Text
    hidden_need: Text
    stages: list[Text] = Field(min_length=3, max_length=5)
    memories: list[Memory] = Field(min_length=3, max_length=5)
    opening: Text
    professional_help: bool = False


class Scenario(ScenarioCard):
    content_hash: str


IEDRLevel = Annotated[int, Field(ge=0, le=3)]


class IEDRLevels(_Strict):
    C1: IEDRLevel
    C2: IEDRLevel
    C3: IEDRLevel
    A1: IEDRLevel
    A2: IEDRLevel
    A3: IEDRLevel
    P1: IEDRLevel
    P2: IEDRLevel
    P3: IEDRLevel

    @model_validator(mode="after")
    def _not_zero(self) -> IEDRLevels:
        if not any(self.model_dump().values()):
            raise ValueError("all nine levels are 0, so P0 is the zero vector")
        return self

    @property
    def p0(self) -> tuple[int, int, int]:
        levels = self.model_dump()
        c, a, p = (
            -sum(ITEM_STEP[item] * levels[item] for item in (f"{axis}1", f"{axis}2", f"{axis}3"))
            for axis in AXES
        )
        return c, a, p


class CaseEntry(_Strict):
    """One line of a split file: which scenario meets which persona, at what deficit."""

    id: Id
    scenario: Id
    persona: Id
    iedr: IEDRLevels


def difficulty_of(p0: tuple[int, int, int]) -> Difficulty:
    norm_sq = sum(x * x for x in p0)
    for bound, band in _DIFFICULTY_BOUNDS_SQ:
        if norm_sq <= bound:
            return band
    return "very_hard"


class Case(_Strict):
    id: str
    split: str
    scenario: Scenario
    persona: Persona
    iedr: IEDRLevels
    content_hash: str
    counterfactual_set: str | None = None

    @property
    def p0(self) -> tuple[int, int, int]:
        return self.iedr.p0

    @property
    def p0_norm(self) -> float:
        return math.sqrt(sum(x * x for x in self.p0))

    @property
    def difficulty(self) -> Difficulty:
        return difficulty_of(self.p0)

    @property
    def dominant_axis(self) -> Axis:
        return self.persona.needs.dominant
