"""Typed cards: persona, scenario, and the case that pairs them with its IEDR levels.

Input models (`*Card`, `CaseEntry`) mirror the YAML exactly and forbid unknown keys; the
public models add the content hash the loader computes, so they also round-trip as records.
"""

from __future__ import annotations

import math
import warnings
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

Axis = Literal["C", "A", "P"]
Level = Literal["high", "medium", "low"]
Difficulty = Literal["easy", "medium", "hard", "very_hard"]
Category = Literal["life", "health", "leisure", "values", "relations", "career"]
Period = Literal["childhood", "adolescence", "adulthood", "current"]
Resistance = Literal["hinting", "testing", "deflecting", "pushing_back", "withdrawing"]
Trait = Literal["openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism"]
Valence = Literal["negative", "mixed", "positive"]
Status = Literal["alive", "dead"]
Language = Literal["en", "zh"]

AXES: tuple[Axis, ...] = ("C", "A", "P")
CATEGORIES: tuple[Category, ...] = ("life", "health", "leisure", "values", "relations", "career")
DIFFICULTIES: tuple[Difficulty, ...] = ("easy", "medium", "hard", "very_hard")
THRESHOLDS: tuple[Level, ...] = ("low", "medium", "high")
VALENCES: tuple[Valence, ...] = ("negative", "mixed", "positive")
LANGUAGES: tuple[Language, ...] = ("en", "zh")
DEFAULT_LANGUAGE: Language = "en"
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
BAND_EDGES: tuple[int, ...] = (27, 32, 36)
_BANDS_BELOW: tuple[Difficulty, ...] = ("easy", "medium", "hard")
_DIFFICULTY_BOUNDS_SQ: tuple[tuple[int, Difficulty], ...] = tuple(
    (edge**2, band) for edge, band in zip(BAND_EDGES, _BANDS_BELOW, strict=True)
)

def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("blank: only whitespace")
    return text


Text = Annotated[str, Field(min_length=1), AfterValidator(_not_blank)]
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
    # An imported card may rank two needs high, or none (EMPA's cards do, in 12 of their 30
    # official cases); it then names the one that leads. A library card has exactly one high
    # need and no lead.
    lead: Axis | None = None

    @model_validator(mode="after")
    def _one_high(self) -> Needs:
        high = [axis for axis in AXES if self[axis].level == "high"]
        if self.lead is None and len(high) != 1:
            raise ValueError(f"exactly one need must be 'high', found {len(high)}")
        top = min((self[axis].level for axis in AXES), key=("high", "medium", "low").index)
        if self.lead is not None and self[self.lead].level != top:
            raise ValueError(f"the lead need {self.lead} is not at the card's top level ({top})")
        return self

    def __getitem__(self, axis: Axis) -> Need:
        need: Need = getattr(self, axis)
        return need

    @property
    def dominant(self) -> Axis:
        if self.lead is not None:
            return self.lead
        return next(axis for axis in AXES if self[axis].level == "high")


Year = Annotated[int, Field(ge=1850, le=2100)]


class Relative(_Strict):
    """A person in the persona's life, so a case cannot quietly bring the dead back."""

    name: Text
    relation: Text
    status: Status
    born: Year | None = None
    died: Year | None = None
    job: Text | None = None
    home: Text | None = None


class Facts(_Strict):
    """Checkable facts behind the persona's prose: cards are validated against them."""

    born: int = Field(ge=1900, le=2100)
    home: Text | None = None
    job: Text | None = None
    relatives: list[Relative] = Field(default_factory=list)


# Fields added after the first edition default to None: hashes skip None, so the first
# edition's cards keep the hashes (and its splits the versions) old runs recorded.
class PersonaCard(_Strict):
    id: Id
    version: int = Field(ge=1)
    name: Text
    age: int = Field(ge=13, le=110)
    identity: Text
    background: Text
    # Empty where the source gives no Big Five (EMPA's cards: two traits in prose, in style).
    big_five: dict[Trait, Literal["high", "low"]]
    style: Style
    threshold: Level
    needs: Needs
    resistance: list[Resistance] = Field(min_length=1)
    meter_start: int = Field(default=40, ge=0, le=100)
    facts: Facts | None = None
    # The language the card is written in; the hash leaves out the default (hashing.card_hash).
    language: Language = DEFAULT_LANGUAGE

    @field_validator("big_five")
    @classmethod
    def _all_traits(cls, value: dict[Trait, str]) -> dict[Trait, str]:
        missing = [t for t in TRAITS if t not in value]
        if missing and value:
            raise ValueError(f"missing trait(s): {', '.join(missing)}")
        return value


class Persona(PersonaCard):
    content_hash: str


class Memory(_Strict):
    period: Period
    text: Text
    year: int | None = Field(default=None, ge=1900, le=2100)


class CastMember(_Strict):
    """Someone the story names, with their relation to the persona and whether they are alive
    in it; the same person (persona and name) must read the same in every card."""

    name: Text
    relation: Text
    status: Status
    born: Year | None = None
    died: Year | None = None
    job: Text | None = None
    home: Text | None = None


class HiddenNeed(_Strict):
    """What this persona needs in this situation and never says outright (edition 3 on)."""

    axis: Axis
    text: Text


class ScenarioCard(_Strict):
    id: Id
    version: int = Field(ge=1)
    category: Category
    topic: Text
    # Up to edition 2 the scenario held the hidden need; from edition 3 each case does.
    hidden_need: Text | None = None
    stages: list[Text] = Field(min_length=2, max_length=6)
    memories: list[Memory] = Field(min_length=3, max_length=5)
    opening: Text
    professional_help: bool = False
    valence: Valence | None = None
    cast: list[CastMember] | None = None
    # Proper nouns in the card that are not people (places, brands, festivals, titles).
    other_names: list[Text] | None = None
    language: Language = DEFAULT_LANGUAGE


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
    # The case's own first message, in the persona's voice; counterfactual sets need one each.
    opening: Text | None = None
    hidden_need: HiddenNeed | None = None


class LibraryInfo(_Strict):
    """library.yaml: which edition the cards at the root are, and the year their stories are set in."""

    edition: int = Field(ge=1)
    present_year: int = Field(ge=1900, le=2100)


class ArchivedEdition(_Strict):
    """editions/<name>/edition.yaml: a frozen edition and the split versions its runs recorded."""

    edition: int = Field(ge=1)
    versions: dict[str, Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]]


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
    opening_override: str | None = None
    case_need: HiddenNeed | None = None
    # An imported case's sampling stratum (EMPA's dominant_axis): the slice family
    # dominant_axis reads it, while the persona's needs stay the card's own.
    stratum: Axis | None = None
    # The library's present year, so a prompt can say how long ago a dated fact was; None for
    # archived editions. Not part of the content hash: it belongs to the library, not the card.
    present_year: int | None = None

    @property
    def opening(self) -> str:
        """The first user message: the case's own opening, else the scenario's."""
        return self.opening_override or self.scenario.opening

    @property
    def hidden_need(self) -> str:
        """What the person needs and never says: the case's own (edition 3 on), else the
        scenario's (archived editions). The loader guarantees one of them is there."""
        if self.case_need is not None:
            return self.case_need.text
        return self.scenario.hidden_need or ""

    @property
    def language(self) -> Language:
        """The case's language: its scenario's (the loader refuses a persona of another)."""
        return self.scenario.language

    @property
    def valence(self) -> Valence:
        # First-edition scenarios carry no valence; every one of them is about distress.
        return self.scenario.valence or "negative"

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
        return self.stratum or self.persona.needs.dominant
