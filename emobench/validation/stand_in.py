"""The stand-in case the judges read when they rate a single (post, reply) pair that has no
persona or scenario card of its own (judges/stand-ins/epitome.yaml, docs/judges.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emobench.errors import InputError
from emobench.registry import Case
from emobench.registry.hashing import card_hash, case_hash, sha256_hex
from emobench.registry.loader import _validate, read_yaml
from emobench.registry.models import HiddenNeed, IEDRLevels, Persona, PersonaCard, Scenario, ScenarioCard


def stand_in_case(path: Path) -> tuple[Case, dict[str, Any]]:
    """The Case built from the stand-in file, and the file's content with its hash (recorded in results)."""
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(path, "", "expected a mapping")
    return card_case(data, path, "epitome"), {"file": path.name, "content_hash": sha256_hex(data), "card": data}


def card_case(data: dict[str, Any], path: Path, split: str) -> Case:
    """The Case a stand-in card (id, persona, scenario, hidden_need, iedr) describes; path names it in errors."""
    for key in ("id", "persona", "scenario", "hidden_need", "iedr"):
        if key not in data:
            raise InputError(path, key, "missing")
    persona_card = _validate(PersonaCard, data["persona"], path, prefix="persona")
    scenario_card = _validate(ScenarioCard, data["scenario"], path, prefix="scenario")
    iedr = _validate(IEDRLevels, data["iedr"], path, prefix="iedr")
    persona = Persona(**persona_card.model_dump(), content_hash=card_hash(persona_card))
    scenario = Scenario(**scenario_card.model_dump(), content_hash=card_hash(scenario_card))
    # As in edition 3, the need belongs to the case, on the persona's high axis.
    need = _validate(HiddenNeed, {"axis": persona.needs.dominant, "text": data["hidden_need"]}, path, prefix="hidden_need")
    return Case(id=str(data["id"]), split=split, scenario=scenario, persona=persona, iedr=iedr, case_need=need,
                content_hash=case_hash(str(data["id"]), scenario.content_hash, persona.content_hash, iedr.model_dump(),
                                       hidden_need=need.model_dump()))
