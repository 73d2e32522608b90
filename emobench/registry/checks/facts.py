"""The facts a card's prose relies on are structured, and they agree across the whole library
(from the third edition), in every language: a person reads the same in the persona and in each
cast, a memory is written once, a persona has a home. Each language's pack adds the fact rules
that read its prose (lang/<code>/facts.py).

Each check yields one InputError per problem, naming the file and the field.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from emobench.errors import InputError
from emobench.registry.checks.word_files import normalised
from emobench.registry.loader import Registry, display_path
from emobench.registry.models import Case, Persona, Scenario

PERSON_FIELDS = ("relation", "status", "born", "died", "job", "home")
Players = dict[str, list[Persona]]  # scenario id -> the personas that play it


def scenario_players(reg: Registry) -> Players:
    """Scenario id -> the personas that play it (any split), in first-seen order."""
    out: dict[str, dict[str, Persona]] = defaultdict(dict)
    for case in reg.edition_cases():
        out[case.scenario.id].setdefault(case.persona.id, case.persona)
    return {sid: list(by_id.values()) for sid, by_id in out.items()}


def _scenario_file(reg: Registry, scenario: Scenario) -> str:
    return display_path(reg.current.scenarios[scenario.id][0])


def case_where(reg: Registry, case: Case, field: str) -> tuple[str, str]:
    source = reg.current.sources[case.id]
    return source.file, source.field(field)


@dataclass(frozen=True)
class _Mention:
    """One card's account of a person: where it is written and what it says."""

    file: str
    field: str
    values: dict[str, object]


def people(reg: Registry, players: dict[str, list[Persona]],
           family_of: Callable[[str], bool]) -> Iterator[InputError]:
    """A person (persona id + name) reads the same in the persona and in every cast; family
    in a cast is in the persona's facts too (family_of tells a family relation)."""
    accounts: dict[tuple[str, str], _Mention] = {}
    for path, persona in reg.current.personas.values():
        for i, rel in enumerate(persona.facts.relatives if persona.facts else []):
            accounts[(persona.id, rel.name)] = _Mention(
                display_path(path), f"facts.relatives[{i}]", rel.model_dump(include=set(PERSON_FIELDS)))
            if rel.died is not None and rel.born is not None and rel.died < rel.born:
                yield InputError(display_path(path), f"facts.relatives[{i}].died",
                                 f"{rel.name} died in {rel.died}, before being born in {rel.born}")
    for path, scenario in reg.current.scenarios.values():
        for i, member in enumerate(scenario.cast or []):
            here = _Mention(display_path(path), f"cast[{i}]", member.model_dump(include=set(PERSON_FIELDS)))
            if member.status == "alive" and member.died is not None:
                yield InputError(here.file, f"{here.field}.died", f"{member.name} is alive but has a year of death")
            for persona in players.get(scenario.id, []):
                key = (persona.id, member.name)
                if key not in accounts:
                    if family_of(member.relation):
                        yield InputError(here.file, f"{here.field}.name", f"{member.name} ({member.relation}) "
                                         f"is family of persona {persona.id!r} but not in its facts.relatives")
                    accounts[key] = here
                    continue
                yield from _disagreements(accounts[key], here, member.name, persona.id)


def _disagreements(first: _Mention, here: _Mention, name: str, persona_id: str) -> Iterator[InputError]:
    for field in PERSON_FIELDS:
        theirs, ours = first.values.get(field), here.values.get(field)
        if theirs is not None and ours is not None and theirs != ours:
            yield InputError(here.file, f"{here.field}.{field}", f"{name} ({persona_id}) is {field} "
                             f"{ours!r} here but {theirs!r} in {first.file} ({first.field})")


def homes(reg: Registry) -> Iterator[InputError]:
    for path, persona in reg.current.personas.values():
        if persona.facts is not None and persona.facts.home is None:
            yield InputError(display_path(path), "facts.home", "missing: the persona's city or town")


def duplicate_memories(reg: Registry) -> Iterator[InputError]:
    seen: dict[str, tuple[str, str]] = {}
    for path, scenario in sorted(reg.current.scenarios.values(), key=lambda pair: str(pair[0])):
        for i, memory in enumerate(scenario.memories):
            key = normalised(memory.text)
            here = (display_path(path), f"memories[{i}].text")
            if key in seen:
                yield InputError(*here, f"duplicates {seen[key][0]} ({seen[key][1]})")
            seen.setdefault(key, here)


