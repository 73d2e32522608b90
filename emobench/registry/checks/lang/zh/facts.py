"""The Chinese fact rules that read prose (cards in personas/zh and scenarios/zh, splits named
like test-zh): case ids, names (jieba's name tag; Chinese has no capitals), dated memories within
the lives they name, persona text that names no story's cast. The rules every language shares
are in checks/facts.py and checks/needs.py.

Each check yields one InputError per problem, naming the file and the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from emobench.errors import InputError
from emobench.registry.checks.facts import Players
from emobench.registry.checks.lang.zh.words import name_known, person_names
from emobench.registry.loader import Registry, display_path
from emobench.registry.models import Persona, Scenario


def check_facts(reg: Registry, players: Players) -> Iterator[InputError]:
    """The fact rules that read Chinese prose (the engine runs the shared ones)."""
    yield from _split_ids(reg)
    yield from _names(reg, players)
    yield from _lives(reg, players)
    yield from _persona_text(reg)


def _split_ids(reg: Registry) -> Iterator[InputError]:
    for split in reg.edition_splits:
        base = split.removesuffix("-zh")
        pattern = re.compile(rf"^{re.escape(base)}zh-\d\d$")
        for case in reg.cases(split):
            if not pattern.match(case.id):
                source = reg.current.sources[case.id]
                yield InputError(source.file, source.field("id"), f"{case.id!r} does not match the "
                                 f"Chinese library's pattern {base}zh-NN (two digits)")


def _known(scenario: Scenario | None, personas: list[Persona]) -> set[str]:
    known: set[str] = set()
    if scenario is not None:
        known |= {m.name for m in scenario.cast or []} | set(scenario.other_names or [])
        known |= {m.home for m in scenario.cast or [] if m.home}
    for persona in personas:
        known.add(persona.name)
        if persona.facts is not None:
            known |= {r.name for r in persona.facts.relatives} | {persona.facts.home or ""}
            known |= {r.home for r in persona.facts.relatives if r.home}
    return known - {""}


def _unknown_names(text: str, known: set[str]) -> list[str]:
    return [name for name in person_names(text) if not name_known(name, known)]


def _unnamed(file: str, field: str, names: list[str]) -> InputError:
    shown = ", ".join(repr(n) for n in names[:4])
    return InputError(file, field, f"names {shown}, who is not the persona nor in the cast, "
                      "facts.relatives or other_names (a person goes in the cast, a place or brand "
                      "in other_names)")


def _names(reg: Registry, players: dict[str, list[Persona]]) -> Iterator[InputError]:
    """A person the prose names (jieba's name tag, no capitals in Chinese) is someone the cards know."""
    for path, scenario in reg.current.scenarios.values():
        known = _known(scenario, players.get(scenario.id, []))
        fields = [("topic", scenario.topic), ("opening", scenario.opening),
                  *((f"stages[{i}]", s) for i, s in enumerate(scenario.stages)),
                  *((f"memories[{i}].text", m.text) for i, m in enumerate(scenario.memories))]
        for field, text in fields:
            if unknown := _unknown_names(text, known):
                yield _unnamed(display_path(path), field, unknown)
    for case in reg.edition_cases():
        source = reg.current.sources[case.id]
        known = _known(case.scenario, [case.persona])
        said: list[tuple[str, str | None]] = [
            ("opening", case.opening_override),
            ("hidden_need.text", case.case_need.text if case.case_need else None)]
        for field, maybe in said:
            if maybe and (unknown := _unknown_names(maybe, known)):
                yield _unnamed(source.file, source.field(field), unknown)
    for path, persona in reg.current.personas.values():
        known = _known(None, [persona])
        texts = [("identity", persona.identity), ("background", persona.background),
                 *((f"needs.{axis}.why", persona.needs[axis].why) for axis in ("C", "A", "P"))]
        for field, text in texts:
            if unknown := _unknown_names(text, known):
                yield _unnamed(display_path(path), field, unknown)


def _lives(reg: Registry, players: dict[str, list[Persona]]) -> Iterator[InputError]:
    """A dated memory that names someone falls within that person's life."""
    for path, scenario in reg.current.scenarios.values():
        people: dict[str, tuple[int | None, int | None]] = {m.name: (m.born, m.died) for m in scenario.cast or []}
        for persona in players.get(scenario.id, []):
            for rel in persona.facts.relatives if persona.facts else []:
                born, died = people.get(rel.name, (None, None))
                people[rel.name] = (born or rel.born, died or rel.died)
        for i, memory in enumerate(scenario.memories):
            year = memory.year
            if year is None:
                continue
            for name, (born, died) in people.items():
                if not _said(name, memory.text):
                    continue
                where = (display_path(path), f"memories[{i}].year")
                if born is not None and year < born:
                    yield InputError(*where, f"{year} is before {name} was born ({born})")
                elif died is not None and year > died:
                    yield InputError(*where, f"{year} is after {name} died ({died})")


def _said(name: str, text: str) -> bool:
    """The text names the person: the full name, or the given name of a three-character one."""
    return name in text or (len(name) == 3 and name[1:] in text)


def _persona_text(reg: Registry) -> Iterator[InputError]:
    """Persona prose describes the person: it names no scenario's cast outside its relatives."""
    cast_names: dict[str, str] = {}
    for _path, scenario in reg.current.scenarios.values():
        for member in scenario.cast or []:
            cast_names.setdefault(member.name, scenario.id)
    for path, persona in reg.current.personas.values():
        own = {persona.name, *(r.name for r in persona.facts.relatives)} if persona.facts else {persona.name}
        texts = [("background", persona.background),
                 *((f"needs.{axis}.why", persona.needs[axis].why) for axis in ("C", "A", "P"))]
        for field, text in texts:
            named = sorted(n for n in cast_names if n not in own and n in text)
            if named:
                yield InputError(display_path(path), field, f"names {named[0]!r}, cast of scenario "
                                 f"{cast_names[named[0]]!r}: persona text describes the person, not a story")
