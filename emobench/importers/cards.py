"""Case cards for an imported run, kept in the run directory (cases.jsonl) instead of the registry.

EMPA's result files record a case's IEDR levels (so P0), its story and the judge's IEDR
reasoning; its per-model statistics give category, dominant axis and empathy threshold. The
emobench card has fields EMPA does not record; those get fixed stand-ins, listed in
`PLACEHOLDERS` and in the imported run's manifest.
"""

from __future__ import annotations

from pathlib import Path

from emobench.importers.empa_format import AXES, EmpaCase
from emobench.registry import Case
from emobench.registry.hashing import card_hash, case_hash
from emobench.registry.local import CASES_FILE
from emobench.registry.models import IEDRLevels, Persona, PersonaCard, Scenario, ScenarioCard
from emobench.rundir import atomic_write_bytes

SPLIT = "empa"
PLACEHOLDERS = (
    "persona.name",
    "persona.age",
    "persona.big_five",
    "persona.style",
    "persona.resistance",
    "scenario.memories",
    "meter (EMPA has none; held at the start value)",
    "sampling parameters of every role",
)
_PRIORITY_COLUMNS = {"C": "SP_Cognitive_Priority", "A": "SP_Emotional_Priority", "P": "SP_Motivational_Priority"}
_UNRECORDED = "not recorded by EMPA"


def _level(value: str) -> str:
    return value.strip().lower() if value.strip().lower() in ("low", "medium", "high") else "medium"


def build_case(case: EmpaCase, meta: dict[str, str]) -> Case:
    """The emobench card of one EMPA case, from its result file and its statistics row."""
    slug = case.script_id.lower().replace("_", "-")
    dominant = meta.get("Dominant_Axis", "").strip()
    needs = {
        axis: {
            # The card allows one high need: the dominant axis; another "High" priority reads medium.
            "level": "high" if axis == dominant else _level(meta.get(_PRIORITY_COLUMNS[axis], "")).replace("high", "medium"),
            "why": case.iedr_reasons.get(f"{axis}3") or _UNRECORDED,
        }
        for axis in AXES
    }
    persona_card = PersonaCard.model_validate(
        {
            "id": f"empa-{slug}",
            "version": 1,
            "language": "zh",  # EMPA's cases and dialogues are Chinese
            "name": "User",
            "age": 30,
            "identity": f"EMPA case {case.script_id}",
            "background": case.story_outcome or _UNRECORDED,
            "big_five": dict.fromkeys(("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism"), "high"),
            "style": {"length": "medium", "register": _UNRECORDED, "habits": [_UNRECORDED]},
            "threshold": _level(meta.get("SP_Empathy_Threshold", "")),
            "needs": needs,
            "resistance": ["testing"],
        }
    )
    stages = [s for s in case.story if s][:5] or [_UNRECORDED]
    stages += [_UNRECORDED] * (3 - len(stages))
    scenario_card = ScenarioCard.model_validate(
        {
            "id": f"empa-{slug}",
            "version": 1,
            "language": "zh",
            "category": meta.get("Category", "").strip().lower(),
            "topic": f"EMPA case {case.script_id}",
            "hidden_need": case.story_outcome or _UNRECORDED,
            "stages": stages,
            "memories": [{"period": "current", "text": case.story_interlude or _UNRECORDED}] * 3,
            "opening": case.turns[0].user if case.turns else _UNRECORDED,
        }
    )
    persona = Persona(**persona_card.model_dump(), content_hash=card_hash(persona_card))
    scenario = Scenario(**scenario_card.model_dump(), content_hash=card_hash(scenario_card))
    iedr = IEDRLevels.model_validate(case.iedr)
    case_id = f"empa-{slug}"
    return Case(
        id=case_id,
        split=SPLIT,
        scenario=scenario,
        persona=persona,
        iedr=iedr,
        content_hash=case_hash(case_id, scenario.content_hash, persona.content_hash, iedr.model_dump()),
    )


def write_cases(run_dir: Path, cases: list[Case]) -> None:
    atomic_write_bytes(run_dir / CASES_FILE, b"".join(c.model_dump_json().encode() + b"\n" for c in cases))
