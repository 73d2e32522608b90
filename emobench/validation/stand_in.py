"""The stand-in case the judges read when they rate a conversation that has no persona or
scenario card of its own (judges/stand-ins/*.yaml; docs/judges.md, docs/validity.md).

A stand-in's strings may be jinja2 templates, rendered with the record's fields (ESConv: the
situation, emotion type, problem type, initial intensity), so one file gives each chat its card.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from emobench.errors import InputError
from emobench.registry import Case
from emobench.registry.card_files import _validate
from emobench.registry.hashing import card_hash, case_hash, sha256_hex
from emobench.registry.models import HiddenNeed, IEDRLevels, Persona, PersonaCard, Scenario, ScenarioCard
from emobench.yaml_io import read_yaml

_ENV = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False)


def _render(value: Any, fields: dict[str, Any], path: Path, where: str) -> Any:
    if isinstance(value, str):
        try:
            return " ".join(_ENV.from_string(value).render(**fields).split())
        except jinja2.TemplateError as exc:
            raise InputError(path, where, f"template: {exc.message}") from None
    if isinstance(value, dict):
        return {k: _render(v, fields, path, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, fields, path, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def read_stand_in(path: Path) -> dict[str, Any]:
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(path, "", "expected a mapping")
    for key in ("id", "persona", "scenario", "hidden_need", "iedr"):
        if key not in data:
            raise InputError(path, key, "missing")
    return data


def build_case(data: dict[str, Any], path: Path, split: str) -> Case:
    """The Case of a stand-in's (rendered) content."""
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


def stand_in_case(path: Path) -> tuple[Case, dict[str, Any]]:
    """The Case built from the stand-in file, and the file's content with its hash (recorded in results)."""
    data = read_stand_in(path)
    return build_case(data, path, "epitome"), {"file": path.name, "content_hash": sha256_hex(data), "card": data}


def rendered_case(
    path: Path, data: dict[str, Any], fields: dict[str, Any], case_id: str, split: str, *, opening: str | None = None
) -> Case:
    """The Case of one record: the stand-in's templates rendered with the record's fields;
    opening, when given (the record's own first message), replaces the scenario's."""
    rendered = _render({k: v for k, v in data.items() if k != "id"}, fields, path, "")
    if opening:
        rendered["scenario"]["opening"] = opening  # after rendering: the message keeps its line breaks
    return build_case({**rendered, "id": case_id}, path, split)
