"""The third edition's rules: the facts a card's prose relies on are structured, and they agree
across the whole library; hidden needs belong to cases and differ within a counterfactual set.

Each check yields one InputError per problem, naming the file and the field, as rules.py does.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from emobench.errors import InputError
from emobench.registry.loader import Registry, display_path
from emobench.registry.models import Case, Persona, Scenario
from emobench.registry.words import (
    capitalised_mid_sentence,
    content_words,
    name_words,
    normalised,
    story_words,
)

MAX_NEED_OVERLAP = 0.5  # share of the hidden need's content words one stage may repeat
PERSON_FIELDS = ("relation", "status", "born", "died", "job", "home")
_PRONOUN_START = re.compile(r"^\s*(They|Their|Them)\b")


def check_edition3(reg: Registry) -> Iterator[InputError]:
    players = scenario_players(reg)
    yield from _split_ids(reg)
    yield from case_needs(reg)
    yield from need_overlaps(reg)
    yield from _names(reg, players)
    yield from people(reg, players)
    yield from _lives(reg, players)
    yield from duplicate_memories(reg)
    yield from _persona_text(reg)
    yield from _story_form(reg, players)
    for path, persona in reg.current.personas.values():
        if persona.facts is not None and persona.facts.home is None:
            yield InputError(display_path(path), "facts.home", "missing: the persona's city or town")


def scenario_players(reg: Registry) -> dict[str, list[Persona]]:
    """Scenario id -> the personas that play it (any split), in first-seen order."""
    out: dict[str, dict[str, Persona]] = defaultdict(dict)
    for case in reg.edition_cases():
        out[case.scenario.id].setdefault(case.persona.id, case.persona)
    return {sid: list(by_id.values()) for sid, by_id in out.items()}


def _scenario_file(reg: Registry, scenario: Scenario) -> str:
    return display_path(reg.current.scenarios[scenario.id][0])


def _case_where(reg: Registry, case: Case, field: str) -> tuple[str, str]:
    source = reg.current.sources[case.id]
    return source.file, source.field(field)


def _split_ids(reg: Registry) -> Iterator[InputError]:
    edition = reg.info.edition
    for split in reg.edition_splits:
        pattern = re.compile(rf"^{re.escape(split)}{edition}-\d\d$")
        for case in reg.cases(split):
            if not pattern.match(case.id):
                yield InputError(*_case_where(reg, case, "id"), f"{case.id!r} does not match the "
                                 f"edition's pattern {split}{edition}-NN (two digits)")


def case_needs(reg: Registry) -> Iterator[InputError]:
    for case in reg.edition_cases():
        need = case.case_need
        if need is not None and need.axis != case.dominant_axis:
            yield InputError(*_case_where(reg, case, "hidden_need.axis"), f"{need.axis}, but persona "
                             f"{case.persona.id!r} has dominant need {case.dominant_axis}")
    for scenario_id, cases in reg.counterfactual_sets().items():
        seen: dict[str, Case] = {}
        for case in cases:
            key = normalised(case.hidden_need)
            if key in seen and seen[key].persona.id != case.persona.id:
                yield InputError(*_case_where(reg, case, "hidden_need.text"), f"the same hidden need "
                                 f"as {seen[key].id} in counterfactual set {scenario_id!r}; each "
                                 "persona needs what its own dominant axis makes it need")
            seen.setdefault(key, case)


def need_overlap(case: Case, words_of: Callable[[str], set[str]] = content_words) -> tuple[float, int]:
    """The largest share of the hidden need's content words found in one stage, and that stage."""
    need = words_of(case.hidden_need)
    if not need:
        return 0.0, 0
    shares = [len(need & words_of(stage)) / len(need) for stage in case.scenario.stages]
    best = max(range(len(shares)), key=shares.__getitem__)
    return shares[best], best


def need_overlaps(reg: Registry, words_of: Callable[[str], set[str]] = content_words) -> Iterator[InputError]:
    for case in reg.edition_cases():
        share, stage = need_overlap(case, words_of)
        if share >= MAX_NEED_OVERLAP:
            yield InputError(*_case_where(reg, case, "hidden_need.text"), f"shares {share:.0%} of its "
                             f"content words with stage {stage + 1} of {case.scenario.id!r} (limit "
                             f"{MAX_NEED_OVERLAP:.0%}): the need restates the story")


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
            yield _unnamed(*_case_where(reg, case, "opening"), unknown)


def _unnamed(file: str, field: str, words: list[str]) -> InputError:
    shown = ", ".join(repr(w) for w in words[:4])
    return InputError(file, field, f"names {shown}, in no cast, persona fact or other_names (a "
                      "place or brand goes in other_names, a person in the cast)")


@dataclass(frozen=True)
class _Mention:
    """One card's account of a person: where it is written and what it says."""

    file: str
    field: str
    values: dict[str, object]


def _english_family(relation: str) -> bool:
    return relation.split()[-1].lower() in story_words().family


def people(reg: Registry, players: dict[str, list[Persona]],
           family_of: Callable[[str], bool] = _english_family) -> Iterator[InputError]:
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


def duplicate_memories(reg: Registry) -> Iterator[InputError]:
    seen: dict[str, tuple[str, str]] = {}
    for path, scenario in sorted(reg.current.scenarios.values(), key=lambda pair: str(pair[0])):
        for i, memory in enumerate(scenario.memories):
            key = normalised(memory.text)
            here = (display_path(path), f"memories[{i}].text")
            if key in seen:
                yield InputError(*here, f"duplicates {seen[key][0]} ({seen[key][1]})")
            seen.setdefault(key, here)


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

