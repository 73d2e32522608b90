"""The Chinese library's prose agrees with the facts (the fourth edition's rule, read in
Chinese): every relative the prose speaks of (我妈, 她老公) is in the persona's facts or the
cast, and what it says of them (a death, a call today, an age, years since a death, where the
persona lives) fits those facts. Word lists: prose_words.yaml beside this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from emobench.errors import InputError
from emobench.registry.checks.fields import Field, each_field_once, told_as_living
from emobench.registry.checks.lang.zh.words import NUM, PROSE_WORDS, data, parse_number, relation_group, strings, tagged
from emobench.registry.loader import Registry, display_path
from emobench.registry.models import Persona, Scenario

AGE_SLACK = 1  # a stated age may be a year off the birth year (the birthday may be to come)
MIN_PARENT_AGE = 12
CHILDREN = frozenset({"son", "daughter", "grandson", "granddaughter"})
PARENTS = frozenset({"mother", "father", "grandmother", "grandfather", "stepmother", "stepfather"})


@dataclass(frozen=True)
class Person:
    name: str
    group: str | None  # relation group in prose_words.yaml
    status: str
    born: int | None
    died: int | None
    where: str


def _alternatives(words: list[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


def _groups() -> dict[str, list[str]]:
    groups: dict[str, list[str]] = data(PROSE_WORDS)["relations"]
    return groups


@cache
def _mention() -> re.Pattern[str]:
    owners = _alternatives(list(strings(PROSE_WORDS, "possessors")))
    words = _alternatives([w for ws in _groups().values() for w in ws])
    return re.compile(rf"(?:{owners})({words})(?![们儿])")


def _groups_of(word: str) -> set[str]:
    return {group for group, words in _groups().items() if word in words}


def people_of(persona: Persona, scenario: Scenario | None) -> list[Person]:
    out = [Person(r.name, relation_group(r.relation), r.status, r.born, r.died,
                  f"persona {persona.id!r} facts.relatives[{i}]")
           for i, r in enumerate(persona.facts.relatives if persona.facts else [])]
    known = {p.name for p in out}
    for i, m in enumerate(scenario.cast or [] if scenario else []):
        if m.name not in known:
            out.append(Person(m.name, relation_group(m.relation), m.status, m.born, m.died, f"cast[{i}]"))
    return out


def _reference(person: Person, people: list[Person]) -> str:
    """Every way the prose may name this person: the name, its given name, or a relation word
    of theirs that no one of another status shares, with or without 我/她/他."""
    names = [person.name, *([person.name[1:]] if len(person.name) == 3 else [])]
    parts = [_alternatives(names)]
    if person.group and not any(p.group == person.group and p.status != person.status for p in people):
        owners = _alternatives(list(strings(PROSE_WORDS, "possessors")))
        parts.append(rf"(?:{owners})?(?:{_alternatives(_groups()[person.group])})")
    return "(?:" + "|".join(parts) + ")"


def _first(key: str, text: str, **fill: str) -> re.Match[str] | None:
    for template in strings(PROSE_WORDS, key):
        pattern = template
        for name, value in fill.items():
            pattern = pattern.replace("{" + name + "}", value)
        if found := re.search(pattern, text):
            return found
    return None


def check_prose(reg: Registry) -> Iterator[InputError]:
    yield from each_field_once(reg, people_of, _problems, _generations)


def _problems(reg: Registry, persona: Persona, people: list[Person], field: Field,
              has_cast: bool) -> Iterator[InputError]:
    yield from _unknown_relatives(persona, people, field, has_cast)
    yield from _death_and_life(people, field)
    yield from _ages(reg, persona, field)
    yield from _durations(reg, people, field)
    yield from _relative_ages(reg, people, field)
    yield from _home(persona, field)


def _unknown_relatives(persona: Persona, people: list[Person], field: Field,
                       has_cast: bool) -> Iterator[InputError]:
    groups = {p.group for p in people}
    for found in _mention().finditer(field.text):
        if not _groups_of(found.group(1)) & groups:
            where = "neither the cast nor " if has_cast else "not in "
            yield InputError(field.file, field.field, f"refers to {found.group(0)!r}, who is {where}"
                             f"persona {persona.id!r}'s facts.relatives: record them there with "
                             "relation and status")
            return


def _death_and_life(people: list[Person], field: Field) -> Iterator[InputError]:
    spouses = set(strings(PROSE_WORDS, "spouse_groups"))
    if not any(p.status == "dead" and p.group in spouses for p in people):
        if widowed := _first("widowed_templates", field.text):
            yield InputError(field.file, field.field, f"{widowed.group(0)!r}, but no husband or wife "
                             "is dead in the facts or the cast")
    for person in people:
        ref = _reference(person, people)
        if person.status == "alive" and (found := _first("death_templates", field.text, ref=ref)):
            yield InputError(field.file, field.field, f"{found.group(0)!r} speaks of {person.name}'s "
                             f"death, but {person.name} is alive ({person.where})")
        elif person.status == "dead" and told_as_living(field.memory, field.since, person.died) and (
                found := _first("living_templates", field.text, ref=ref)):
            yield InputError(field.file, field.field, f"{found.group(0)!r}: {person.name} is dead "
                             f"({person.where}{f', died {person.died}' if person.died else ''})")


def _ages(reg: Registry, persona: Persona, field: Field) -> Iterator[InputError]:
    if persona.facts is None or field.memory:
        return
    age = reg.info.present_year - persona.facts.born
    name = re.escape(persona.name)
    exact = list(strings(PROSE_WORDS, "age_templates"))
    for template in exact if field.field == "identity" else exact[:-1]:
        for found in re.finditer(template.replace("{num}", NUM).replace("{name}", name), field.text):
            stated = parse_number(found.group(1))
            nearly = "快" in found.group(0)
            allowed = range(age, age + 2) if nearly else range(age - AGE_SLACK, age + 1)
            if stated is not None and stated not in allowed:
                yield InputError(field.file, field.field, f"{found.group(0).strip('，。！？；、 ')!r} makes "
                                 f"{persona.name} {stated}, but facts.born {persona.facts.born} makes them "
                                 f"{age - 1} or {age} in {reg.info.present_year}")
                return
    for template in strings(PROSE_WORDS, "decade_templates"):
        for found in re.finditer(template.replace("{num}", NUM).replace("{name}", name), field.text):
            decade = parse_number(found.group(1))
            if decade is None:
                continue
            top = decade + (4 if "出头" in found.group(0) else 9)
            if not decade - AGE_SLACK <= age <= top + AGE_SLACK:
                yield InputError(field.file, field.field, f"{found.group(0)!r}, but facts.born "
                                 f"{persona.facts.born} makes {persona.name} {age} in {reg.info.present_year}")
                return


def _durations(reg: Registry, people: list[Person], field: Field) -> Iterator[InputError]:
    if field.memory:
        return
    year = reg.info.present_year
    recent: dict[str, int] = data(PROSE_WORDS)["recent_years"]
    for person in (p for p in people if p.status == "dead"):
        ref = _reference(person, people)
        found = _first("duration_templates", field.text, ref=ref, num=NUM)
        said = _first("recent_templates", field.text, ref=ref)
        match = found or said
        if match is None:
            continue
        shown = match.group(0)
        if person.died is None:
            yield InputError(field.file, field.field, f"{shown!r}: give {person.name}'s year of death "
                             f"({person.where}.died) so the duration can be checked")
            continue
        if found is not None and (ago := parse_number(found.group(1))) is not None \
                and abs(year - ago - person.died) > 1:
            yield InputError(field.file, field.field, f"{shown!r} puts {person.name}'s death in "
                             f"{year - ago}, but {person.where} says {person.died}")
        elif said is not None and year - recent[said.group(1)] != person.died:
            yield InputError(field.file, field.field, f"{shown!r} puts {person.name}'s death in "
                             f"{year - recent[said.group(1)]}, but {person.where} says {person.died}")


def _relative_ages(reg: Registry, people: list[Person], field: Field) -> Iterator[InputError]:
    if field.memory:
        return
    year = reg.info.present_year
    for person in (p for p in people if p.status == "alive" and p.born is not None):
        ref = _reference(person, people)
        found = _first("relative_age_templates", field.text, ref=ref, num=NUM)
        stated = parse_number(found.group(1)) if found else None
        if found is not None and stated is not None and person.born is not None \
                and abs(year - person.born - stated) > AGE_SLACK:
            yield InputError(field.file, field.field, f"{found.group(0)!r}, but {person.name} was born "
                             f"in {person.born} ({person.where}): {year - person.born} in {year}")


def _home(persona: Persona, field: Field) -> Iterator[InputError]:
    home = persona.facts.home if persona.facts else None
    if not home or field.memory:
        return
    before = _alternatives(list(strings(PROSE_WORDS, "home_before")))
    subject = rf"(?:^|[，。！？；、\s])(?:我|她|他|{re.escape(persona.name)})(?:现在|一直|一个人|还|也)?(?:{before})"
    for found in re.finditer(subject, field.text):
        place = next((w for w, tag in tagged(field.text[found.end():])[:3] if tag == "ns"), None)
        if place and place not in home and home not in place:
            yield InputError(field.file, field.field, f"{found.group(0).strip('，。！？；、 ')}{place!r}, "
                             f"but facts.home is {home!r}")
            return


def _generations(reg: Registry, persona: Persona) -> Iterator[InputError]:
    """A child is born after its parent: the persona's children after, parents before."""
    if persona.facts is None:
        return
    file, born = display_path(reg.current.personas[persona.id][0]), persona.facts.born
    for i, rel in enumerate(persona.facts.relatives):
        group = relation_group(rel.relation)
        if rel.born is None:
            continue
        if group in CHILDREN and rel.born < born + MIN_PARENT_AGE:
            yield InputError(file, f"facts.relatives[{i}].born", f"{rel.name} ({rel.relation}) born "
                             f"{rel.born}, when {persona.name} (born {born}) was {rel.born - born}: a "
                             f"parent is at least {MIN_PARENT_AGE}")
        if group in PARENTS and rel.born > born - MIN_PARENT_AGE:
            yield InputError(file, f"facts.relatives[{i}].born", f"{rel.name} ({rel.relation}) born "
                             f"{rel.born}, {born - rel.born} years before {persona.name} (born {born}): "
                             f"a parent is at least {MIN_PARENT_AGE} years older")
