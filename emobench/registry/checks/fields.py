"""The prose fields of a library, each read once by a language's prose rules (lang/<code>/
prose_facts.py) against the people it may name: a case's own text, each persona's card once,
each scenario once per player."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from emobench.errors import InputError
from emobench.registry.loader import Registry, display_path
from emobench.registry.models import Case, Memory, Persona, Scenario


@dataclass(frozen=True)
class Field:
    """One prose field, where it is written, and whether it tells the past (a memory)."""

    file: str
    field: str
    text: str
    memory: bool = False
    since: int | None = None  # a memory: the year it is set in (its year; an undated current one, the present)


def scenario_fields(reg: Registry, scenario: Scenario) -> list[Field]:
    file = display_path(reg.current.scenarios[scenario.id][0])
    return [Field(file, "topic", scenario.topic), Field(file, "opening", scenario.opening),
            *(Field(file, f"stages[{i}]", s) for i, s in enumerate(scenario.stages)),
            *(Field(file, f"memories[{i}].text", m.text, memory=True, since=_since(reg, m))
              for i, m in enumerate(scenario.memories))]


def _since(reg: Registry, memory: Memory) -> int | None:
    # An undated current memory is now: reading it as the earliest year 'current' allows (two
    # years back) let anyone dead since then ring "every Sunday" in it. A memory set before a
    # recent death gives its year.
    if memory.year is not None:
        return memory.year
    return reg.info.present_year if memory.period == "current" else None


def persona_fields(reg: Registry, persona: Persona) -> list[Field]:
    file = display_path(reg.current.personas[persona.id][0])
    return [Field(file, "identity", persona.identity), Field(file, "background", persona.background),
            *(Field(file, f"needs.{axis}.why", persona.needs[axis].why) for axis in ("C", "A", "P"))]


def case_fields(reg: Registry, case: Case) -> list[Field]:
    source = reg.current.sources[case.id]
    out = []
    if case.opening_override is not None:
        out.append(Field(source.file, source.field("opening"), case.opening_override))
    if case.case_need is not None:
        out.append(Field(source.file, source.field("hidden_need.text"), case.case_need.text))
    return out


PersonT = TypeVar("PersonT")


def each_field_once(
    reg: Registry,
    people: Callable[[Persona, Scenario | None], list[PersonT]],
    problems: Callable[[Registry, Persona, list[PersonT], Field, bool], Iterator[InputError]],
    generations: Callable[[Registry, Persona], Iterator[InputError]],
) -> Iterator[InputError]:
    """Every prose field of the edition read once against the people it may name: a case's own
    text, each persona's card once, each scenario once per player; each problem said once."""
    seen: set[str] = set()
    checked_personas: set[str] = set()
    checked_pairs: set[tuple[str, str]] = set()
    for case in reg.edition_cases():
        persona, scenario = case.persona, case.scenario
        batches: list[tuple[list[Field], Scenario | None]] = [(case_fields(reg, case), scenario)]
        if persona.id not in checked_personas:
            checked_personas.add(persona.id)
            batches.append((persona_fields(reg, persona), None))
            yield from generations(reg, persona)
        if (scenario.id, persona.id) not in checked_pairs:
            checked_pairs.add((scenario.id, persona.id))
            batches.append((scenario_fields(reg, scenario), scenario))
        for fields, cast in batches:
            known = people(persona, cast)
            for field in fields:
                for problem in problems(reg, persona, known, field, cast is not None):
                    if str(problem) not in seen:  # a scenario's text is read for each player
                        seen.add(str(problem))
                        yield problem


def told_as_living(memory: bool, since: int | None, died: int | None) -> bool:
    """Contact is read in all but memories, and in a memory set after the person died ("Mum
    rings every Sunday" as a current memory of a mother dead for five years)."""
    return not memory or (since is not None and died is not None and since > died)
