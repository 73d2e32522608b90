"""The English fact rules that read prose (from the third edition): case ids follow the
edition's pattern, a capitalised name is someone the cards know, a dated memory falls within the
life of whom it names, persona text names no story's cast, and a stage tells one story in the
persona's voice. The rules every language shares are in checks/facts.py.

Each check yields one InputError per problem, naming the file and the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from emobench.errors import InputError
from emobench.registry.checks.facts import Players, case_where
from emobench.registry.checks.lang.en.words import capitalised_mid_sentence, name_words, story_words
from emobench.registry.loader import Registry, display_path
from emobench.registry.models import Persona, Scenario

_PRONOUN_START = re.compile(r"^\s*(They|Their|Them)\b")


def check_facts(reg: Registry, players: Players) -> Iterator[InputError]:
    """The fact rules that read English prose (the engine runs the shared ones)."""
    yield from _split_ids(reg)
    yield from _names(reg, players)
    yield from _lives(reg, players)
    yield from _persona_text(reg)
    yield from _story_form(reg, players)


def _split_ids(reg: Registry) -> Iterator[InputError]:
    edition = reg.info.edition
    for split in reg.edition_splits:
        pattern = re.compile(rf"^{re.escape(split)}{edition}-\d\d$")
        for case in reg.cases(split):
            if not pattern.match(case.id):
                yield InputError(*case_where(reg, case, "id"), f"{case.id!r} does not match the "
                                 f"edition's pattern {split}{edition}-NN (two digits)")


def _known_names(scenario: Scenario, personas: list[Persona]) -> set[str]:
    known = set(story_words().common_names)
    known |= name_words(*(m.name for m in scenario.cast or []), *(scenario.other_names or []))
    known |= name_words(*(m.home for m in scenario.cast or []))
    for persona in personas:
        known |= name_words(persona.name)
        if persona.facts is not None:
            known |= name_words(persona.facts.home, *(r.name for r in persona.facts.relatives),
                                *(r.home for r in persona.facts.relatives))
    return known


def _unknown(text: str, known: set[str]) -> list[str]:
    return [word for word in capitalised_mid_sentence(text) if word not in known]


def _names(reg: Registry, players: dict[str, list[Persona]]) -> Iterator[InputError]:
    for path, scenario in reg.current.scenarios.values():
        known = _known_names(scenario, players.get(scenario.id, []))
        fields = [("topic", scenario.topic), ("opening", scenario.opening),
                  *((f"stages[{i}]", s) for i, s in enumerate(scenario.stages)),
                  *((f"memories[{i}].text", m.text) for i, m in enumerate(scenario.memories))]
        for field, text in fields:
            if unknown := _unknown(text, known):
                yield _unnamed(display_path(path), field, unknown)
    for case in reg.edition_cases():
        if case.opening_override is None:
            continue
        known = _known_names(case.scenario, [case.persona])
        if unknown := _unknown(case.opening_override, known):
            yield _unnamed(*case_where(reg, case, "opening"), unknown)


def _unnamed(file: str, field: str, words: list[str]) -> InputError:
    shown = ", ".join(repr(w) for w in words[:4])
    return InputError(file, field, f"names {shown}, in no cast, persona fact or other_names (a "
                      "place or brand goes in other_names, a person in the cast)")


def _lives(reg: Registry, players: dict[str, list[Persona]]) -> Iterator[InputError]:
    """A dated memory that names someone falls within that person's life."""
    year = reg.info.present_year
    for path, scenario in reg.current.scenarios.values():
        people: dict[str, tuple[int | None, int | None]] = {
            m.name: (m.born, m.died) for m in scenario.cast or []}
        for persona in players.get(scenario.id, []):
            for rel in persona.facts.relatives if persona.facts else []:
                born, died = people.get(rel.name, (None, None))
                people[rel.name] = (born or rel.born, died or rel.died)
        for i, memory in enumerate(scenario.memories):
            if memory.year is None:
                continue
            named = name_words(memory.text)
            for name, (born, died) in people.items():
                if not name_words(name) & named:
                    continue
                if born is not None and memory.year < born:
                    yield InputError(display_path(path), f"memories[{i}].year", f"{memory.year} is "
                                     f"before {name} was born ({born})")
                elif died is not None and memory.year > died:
                    yield InputError(display_path(path), f"memories[{i}].year", f"{memory.year} is "
                                     f"after {name} died ({died})")
                elif memory.year > year:
                    yield InputError(display_path(path), f"memories[{i}].year", f"{memory.year} is "
                                     f"after the present year {year}")


def _persona_text(reg: Registry) -> Iterator[InputError]:
    """Persona prose describes the person: it names no scenario's cast outside its relatives."""
    cast_names: dict[str, str] = {}
    for _path, scenario in reg.current.scenarios.values():
        for member in scenario.cast or []:
            for word in name_words(member.name):
                cast_names.setdefault(word, scenario.id)
    for path, persona in reg.current.personas.values():
        own = name_words(persona.name, *(r.name for r in persona.facts.relatives)
                         if persona.facts else ())
        texts = [("background", persona.background),
                 *((f"needs.{axis}.why", persona.needs[axis].why) for axis in ("C", "A", "P"))]
        for field, text in texts:
            named = sorted(w for w in name_words(text)
                           if w[:1].isupper() and w in cast_names and w not in own)
            if named:
                yield InputError(display_path(path), field, f"names {named[0]!r}, cast of scenario "
                                 f"{cast_names[named[0]]!r}: persona text describes the person, not a story")


def _story_form(reg: Registry, players: dict[str, list[Persona]]) -> Iterator[InputError]:
    menus = story_words().menus
    for path, scenario in reg.current.scenarios.values():
        single = len(players.get(scenario.id, [])) == 1
        for i, stage in enumerate(scenario.stages):
            if single and _PRONOUN_START.match(stage):
                yield InputError(display_path(path), f"stages[{i}]", "a 'They' template in a scenario "
                                 "one persona plays: write it with the persona's pronoun or name")
                break
        for i, stage in enumerate(scenario.stages):
            menu = next((m for m in (p.search(stage) for p in menus) if m), None)
            if menu:
                yield InputError(display_path(path), f"stages[{i}]", f"offers a menu of alternatives "
                                 f"({menu.group(0)!r}): a stage tells one story")

