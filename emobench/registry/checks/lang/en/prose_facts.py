"""The English prose agrees with the facts (from the fourth edition). Every person the prose refers to by relation is
in the persona's facts or the scenario's cast, and what the prose says of them (a funeral, a
call last night, an age, years since a death, a job, a home, a pronoun) fits those facts.

Each check yields one InputError per problem, naming the file and the field, as the engine's checks do.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from emobench.errors import InputError
from emobench.registry.checks.fields import Field, each_field_once, told_as_living
from emobench.registry.checks.lang.en.pronouns import check_pronouns
from emobench.registry.checks.lang.en.prose_forms import (
    compiled,
    late_reference,
    may_match,
    pronoun_death,
)
from emobench.registry.checks.lang.en.prose_words import (
    WHEN,
    Person,
    decade_pattern,
    mentions,
    named_by,
    number_pattern,
    parse_decade,
    parse_number,
    prose_words,
    reference,
    relation_word,
    words_of,
    years_ago,
)
from emobench.registry.checks.lang.en.words import name_words
from emobench.registry.loader import Registry, display_path
from emobench.registry.models import CastMember, Persona, Relative, Scenario

MIN_PARENT_AGE = 12  # a parent is at least this many years older than their child
AGE_SLACK = 1  # a stated age may be a year off the birth year (the birthday may be to come)


def people_of(persona: Persona, scenario: Scenario | None = None) -> list[Person]:
    facts = persona.facts
    out = [Person(r.name, relation_word(r.relation), r.status, r.born, r.died,
                  f"persona {persona.id!r} facts.relatives[{i}]")
           for i, r in enumerate(facts.relatives if facts else [])]
    known = {p.name for p in out}
    for i, m in enumerate(scenario.cast or [] if scenario else []):
        if m.name not in known:
            out.append(Person(m.name, relation_word(m.relation), m.status, m.born, m.died, f"cast[{i}]"))
    return out


def check_prose(reg: Registry) -> Iterator[InputError]:
    yield from each_field_once(reg, people_of, _field_problems, _generations)
    yield from check_pronouns(reg)


def _field_problems(reg: Registry, persona: Persona, people: list[Person], field: Field,
                    has_cast: bool) -> Iterator[InputError]:
    yield from _unknown_people(persona, people, field, has_cast)
    yield from _death_and_life(people, field)
    yield from _ages(reg, persona, field)
    yield from _durations(reg, persona, people, field)
    yield from _relative_ages(reg, persona, people, field)
    yield from _job_and_home(persona, field)


def _unknown_people(persona: Persona, people: list[Person], field: Field,
                    has_cast: bool) -> Iterator[InputError]:
    relations = prose_words().relations
    for mention in mentions(field.text):
        if not any(p.relation in relations[mention.relation] for p in people):
            where = "neither the cast nor " if has_cast else "not in "
            yield InputError(field.file, field.field, f"refers to {mention.words!r}, who is {where}"
                             f"persona {persona.id!r}'s facts.relatives: record them there with "
                             "relation and status")
            return


def _death_and_life(people: list[Person], field: Field) -> Iterator[InputError]:
    words = prose_words()
    text = field.text.replace("’", "'")
    spouses = words.relations["partner"]
    if not any(p.status == "dead" and p.relation in spouses for p in people):
        widowed = _first(words.widowed, "", text)
        if widowed:
            yield InputError(field.file, field.field, f"{widowed.group(0)!r}, but no wife, husband or "
                             "partner is dead in the facts or the cast")
    present = words_of(text)
    for person in people:
        if not named_by(person, people) & present:
            continue
        ref = reference(person, people)
        if person.status == "alive":
            found = late_reference(ref, text) or _first(words.death, ref, text) or pronoun_death(ref, people, text)
            if found:
                yield InputError(field.file, field.field, f"{found.group(0)!r} speaks of {person.name}'s "
                                 f"death, but {person.name} is alive ({person.where})")
        elif told_as_living(field.memory, field.since, person.died) and (found := _first(words.living, ref, text)):
            yield InputError(field.file, field.field, f"{found.group(0)!r}: {person.name} is dead "
                             f"({person.where}{f', died {person.died}' if person.died else ''})")


def _first(templates: tuple[str, ...], ref: str, text: str) -> re.Match[str] | None:
    for template in templates:
        if not may_match(template, text):
            continue
        if found := compiled(template.replace("{ref}", ref)).search(text):
            return found
    return None


def _ages(reg: Registry, persona: Persona, field: Field) -> Iterator[InputError]:
    if persona.facts is None or field.memory:
        return
    first = re.escape(persona.name.split()[0])
    age = reg.info.present_year - persona.facts.born
    templates = [*prose_words().ages, *(prose_words().identity_ages if field.field == "identity" else ())]
    for template in templates:
        pattern = template.replace("{num}", number_pattern()).replace("{name}", first)
        for found in compiled(pattern).finditer(field.text.replace("’", "'")):
            stated = parse_number(found.group(1))
            said = found.group(0).lower()
            ahead = "birthday" in said or "next" in said or re.search(r"\bturn(?:s|ing)?\b", said)
            allowed = range(age, age + 2) if ahead else range(age - AGE_SLACK, age + 1)
            if stated is not None and stated not in allowed:
                yield InputError(field.file, field.field, f"{found.group(0)!r} makes {persona.name} "
                                 f"{stated}, but facts.born {persona.facts.born} makes them {age - 1} or "
                                 f"{age} in {reg.info.present_year}")
                return
    for template in prose_words().decades:
        pattern = template.replace("{decade}", decade_pattern()).replace("{name}", first)
        for found in compiled(pattern).finditer(field.text.replace("’", "'")):
            decade = parse_decade(found.group(1))
            if decade is not None and not decade - AGE_SLACK <= age <= decade + 9 + AGE_SLACK:
                yield InputError(field.file, field.field, f"{found.group(0)!r}, but facts.born "
                                 f"{persona.facts.born} makes {persona.name} {age} in {reg.info.present_year}")
                return


def _durations(reg: Registry, persona: Persona, people: list[Person], field: Field) -> Iterator[InputError]:
    if field.memory:
        return
    spouses = prose_words().relations["partner"]
    text = field.text.replace("’", "'")
    number = number_pattern()[:-1] + "|an?)"  # "a year ago"
    templates = [(t, number) for t in prose_words().durations] + [(t, WHEN) for t in prose_words().recent]
    for template, amount in templates:
        candidates = ([p for p in people if p.status == "dead" and p.relation in spouses]
                      if "{ref}" not in template else [p for p in people if p.status == "dead"])
        for person in candidates:
            if ("{ref}" in template and not named_by(person, people) & words_of(text)) or not may_match(template, text):
                continue
            pattern = (template.replace("{num}", amount).replace("{when}", amount)
                       .replace("{ref}", reference(person, people)))
            found = compiled(pattern).search(text)
            if found is None:
                continue
            said = found.group(1).lower()
            allowed = years_ago(said) if amount == WHEN else {1 if said in ("a", "an") else parse_number(said)}
            if None in allowed:
                continue
            if person.died is None:
                yield InputError(field.file, field.field, f"{found.group(0)!r}: give {person.name}'s year "
                                 f"of death ({person.where}.died) so the duration can be checked")
            elif not any(abs(reg.info.present_year - ago - person.died) <= (amount != WHEN)
                         for ago in allowed if ago is not None):
                ago = min(a for a in allowed if a is not None)
                yield InputError(field.file, field.field, f"{found.group(0)!r} puts {person.name}'s death "
                                 f"in {reg.info.present_year - ago}, but {person.where} says "
                                 f"{person.died}")
            return


def _relative_ages(reg: Registry, persona: Persona, people: list[Person], field: Field) -> Iterator[InputError]:
    """ "Tobin is 45", "my 45-year-old son": against their birth year, or a generation apart."""
    if field.memory or persona.facts is None:
        return
    words, year = prose_words(), reg.info.present_year
    own = year - persona.facts.born
    text = field.text.replace("’", "'")
    present = words_of(text)
    for person in people:
        if person.status != "alive" or not named_by(person, people) & present:
            continue
        ref = reference(person, people)
        referring = [w for w, rels in words.relations.items() if person.relation in rels]
        patterns = [t.replace("{ref}", ref).replace("{num}", number_pattern()) for t in words.relative_ages]
        if referring:
            patterns.append(rf"\b(?:my|her|his|their|our)\s+{number_pattern()}[- ]years?[- ]old\s+(?:"
                            + "|".join(map(re.escape, referring)) + r")\b")
        for pattern in patterns:
            found = compiled(pattern).search(text)
            stated = parse_number(found.group(1)) if found else None
            if found is None or stated is None:
                continue
            if person.born is not None:
                if abs(year - person.born - stated) > AGE_SLACK:
                    yield InputError(field.file, field.field, f"{found.group(0)!r}, but {person.name} was "
                                     f"born in {person.born} ({person.where}): {year - person.born} in {year}")
                    return
            elif person.relation in words.children and stated > own - MIN_PARENT_AGE:
                yield InputError(field.file, field.field, f"{found.group(0)!r}: a child of {stated} for "
                                 f"{persona.name}, who is {own}")
                return
            elif person.relation in words.parents and stated < own + MIN_PARENT_AGE:
                yield InputError(field.file, field.field, f"{found.group(0)!r}: a parent of {stated} for "
                                 f"{persona.name}, who is {own}")
                return
            break


def _job_and_home(persona: Persona, field: Field) -> Iterator[InputError]:
    facts = persona.facts
    if facts is None or field.memory:
        return
    words = prose_words()
    text = field.text.replace("’", "'")
    if facts.job:
        job = facts.job.lower().split()
        # the job's own words and every other word for them ("sparky" for an electrician)
        named = {*job, *(w for w, same in words.job_synonyms.items() if same in job)}
        for word, conflicting in words.job_conflicts.items():
            if word not in job:
                continue
            for other in conflicting:
                said = compiled(rf"\b{re.escape(other)}\s+(?:[\w-]+\s+)?(?:"
                                 f"{'|'.join(map(re.escape, sorted(named)))})\\b").search(text)
                if said:
                    yield InputError(field.file, field.field, f"{said.group(0)!r}, but facts.job is "
                                     f"{facts.job!r}")
                    return
        own = {words.job_synonyms.get(w, w) for w in job}
        subject = r"(?:(?:^|[.;!?]\s+)(?:i am|i'm|im|she is|he is|she's|he's|as)|\b(?:i work as|works as|working as))"
        # ... and anywhere, the person speaking as the job: "ok so as a nurse i know", "being a nurse, she"
        speaking = r"\b(?:as|being)\s+(?:a|an)\s+((?:[\w-]+\s+){0,2}?[\w-]+),?\s+(?:i|i'm|im|i've|ive|i'd|she|he|we)\b"
        claims = [*compiled(rf"{subject}\s+(?:a|an)\s+((?:[\w-]+\s+){{0,2}}?[\w-]+)\b").finditer(text),
                *compiled(speaking).finditer(text)]
        for found in claims:
            last = found.group(1).split()[-1].lower()
            if last in words.jobs and words.job_synonyms.get(last, last) not in own:
                yield InputError(field.file, field.field, f"{found.group(0).strip()!r}, but facts.job "
                                 f"is {facts.job!r}")
                return
    if facts.home:
        home = name_words(facts.home)
        for template in words.homes:
            place = compiled(template.replace("{place}", r"(?-i:([A-Z][\w'-]+))")).search(text)
            if place and place.group(1) not in home:
                yield InputError(field.file, field.field, f"{place.group(0)!r}, but facts.home is "
                                 f"{facts.home!r}")
                return


def _generations(reg: Registry, persona: Persona) -> Iterator[InputError]:
    """A child is born after its parent: the persona's children after, parents before."""
    if persona.facts is None:
        return
    file, born = display_path(reg.current.personas[persona.id][0]), persona.facts.born
    words = prose_words()
    recorded: list[tuple[str, str, Relative | CastMember]] = [
        (file, f"facts.relatives[{i}]", rel) for i, rel in enumerate(persona.facts.relatives)]
    for scenario_id in sorted({c.scenario.id for c in reg.edition_cases() if c.persona.id == persona.id}):
        path, scenario = reg.current.scenarios[scenario_id]
        recorded += [(display_path(path), f"cast[{i}]", m) for i, m in enumerate(scenario.cast or [])]
    for where, field, rel in recorded:
        kind = relation_word(rel.relation)
        if rel.born is None:
            continue
        if kind in words.children and rel.born < born + MIN_PARENT_AGE:
            yield InputError(where, f"{field}.born", f"{rel.name} ({rel.relation}) born {rel.born}, "
                             f"{_when(rel.born, born, persona.name)}: a parent is at least {MIN_PARENT_AGE}")
        if kind in words.parents and rel.born > born - MIN_PARENT_AGE:
            yield InputError(where, f"{field}.born", f"{rel.name} ({rel.relation}) born {rel.born}, "
                             f"{_when(born, rel.born, rel.name)}: a parent is at least {MIN_PARENT_AGE}")


def _when(child: int, parent: int, parent_name: str) -> str:
    if child < parent:
        return f"{parent - child} years before {parent_name} ({parent})"
    return f"when {parent_name} (born {parent}) was {child - parent}"
