"""The rules on a library's structure, in every language: ids and file names, no orphan card,
no repeated pair, priorities that follow the dominant need, counterfactual sets, birth years
and memory dates that fit. One InputError per broken rule, naming the file and the field."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from emobench.errors import InputError
from emobench.registry.loader import CASE_NEEDS, Registry, Source, display_path
from emobench.registry.models import AXES, Case, Period, Persona, Scenario

DEMO = "demo"  # the demo split replays pairs of another split by design
MAX_COUNTERFACTUAL_PERSONAS = 3
# The ages each memory period may cover (a year of overlap at each boundary).
PERIOD_AGES: dict[Period, tuple[int, int]] = {
    "childhood": (0, 13), "adolescence": (12, 19), "adulthood": (18, 120), "current": (0, 120),
}
CURRENT_YEARS = 2  # a "current" memory happened at most this many years before the present


def check_structure(reg: Registry, years: re.Pattern[str]) -> list[InputError]:
    """The rules on a library's cards and splits that read no prose (years: how a memory's
    text names a year in this language)."""
    return [
        *_names_and_orphans(reg),
        *_completeness(reg),
        *_pairs(reg),
        *_priorities(reg),
        *_counterfactual_sets(reg),
        *_persona_facts(reg),
        *_memory_dates(reg, years),
        *_case_consistency(reg),
    ]


def _file(path: Path) -> str:
    return display_path(path)


def _names_and_orphans(reg: Registry) -> Iterator[InputError]:
    cards: dict[str, dict[str, tuple[Path, Persona | Scenario]]] = {
        "persona": dict(reg.current.personas), "scenario": dict(reg.current.scenarios),
    }
    used = {"persona": {c.persona.id for c in reg.edition_cases()},
            "scenario": {c.scenario.id for c in reg.edition_cases()}}
    for kind, by_id in cards.items():
        for card_id, (path, _) in by_id.items():
            if path.stem != card_id:
                yield InputError(_file(path), "id", f"{card_id!r} differs from the file name {path.stem!r}")
            if card_id not in used[kind]:
                yield InputError(_file(path), "id", f"orphan {kind}: no case in any split uses {card_id!r}")


def _completeness(reg: Registry) -> Iterator[InputError]:
    for path, scenario in reg.current.scenarios.values():
        if scenario.valence is None:
            yield InputError(_file(path), "valence", "missing: negative, mixed or positive")
    for path, persona in reg.current.personas.values():
        if persona.facts is None:
            yield InputError(_file(path), "facts", "missing: born, and the relatives the cards name")


def _where(reg: Registry, case: Case, field: str = "") -> tuple[str, str]:
    source: Source = reg.current.sources[case.id]
    return source.file, source.field(field)


def _pairs(reg: Registry) -> Iterator[InputError]:
    first: dict[tuple[str, str], Case] = {}
    test_pairs: dict[tuple[str, str], Case] = {}
    test, demo = reg.named("test"), reg.named(DEMO)
    for case in reg.cases(test) if test in reg.edition_splits else []:
        test_pairs.setdefault((case.scenario.id, case.persona.id), case)
    # test first, so a pair repeated elsewhere is reported where it is repeated
    for split in sorted(reg.edition_splits, key=lambda name: name != test):
        if split == demo:
            continue
        for case in reg.cases(split):
            pair = (case.scenario.id, case.persona.id)
            # every test pair, not only the first of its scenario (a counterfactual set's second)
            shared = test_pairs.get(pair) if split != test else None
            if shared is not None:
                yield InputError(*_where(reg, case), f"{split} case reuses test scenario "
                                 f"{pair[0]!r} with the same persona {pair[1]!r} ({shared.id})")
            elif pair in first:
                other = first[pair]
                yield InputError(*_where(reg, case), f"duplicate pair (scenario {pair[0]!r}, persona "
                                 f"{pair[1]!r}): also case {other.id} in split {other.split!r}")
            first.setdefault(pair, case)


def _priorities(reg: Registry) -> Iterator[InputError]:
    for case in reg.edition_cases():
        levels = case.iedr.model_dump()
        axis = case.dominant_axis
        item = f"{axis}3"
        if levels[item] == 0:
            yield InputError(*_where(reg, case, f"iedr.{item}"), f"{axis}-dominant persona "
                             f"{case.persona.id!r} needs {item} > 0 (its need is the priority)")
            continue
        for other in AXES:
            if levels[f"{other}3"] > levels[item]:
                yield InputError(*_where(reg, case, f"iedr.{item}"), f"{item} = {levels[item]} is below "
                                 f"{other}3 = {levels[f'{other}3']}; the {axis}-dominant persona "
                                 f"{case.persona.id!r} carries the highest priority")


def _counterfactual_sets(reg: Registry) -> Iterator[InputError]:
    for scenario_id, cases in reg.counterfactual_sets().items():
        path = _file(reg.current.scenarios[scenario_id][0])
        personas = {c.persona.id: c.persona for c in cases}
        if len(personas) > MAX_COUNTERFACTUAL_PERSONAS:
            yield InputError(path, "id", f"counterfactual set played by {len(personas)} personas "
                             f"(at most {MAX_COUNTERFACTUAL_PERSONAS})")
        profiles: dict[tuple[str, str], str] = {}
        for persona in personas.values():
            profile = (persona.needs.dominant, persona.threshold)
            if profile in profiles:
                yield InputError(path, "id", f"personas {profiles[profile]!r} and {persona.id!r} share "
                                 f"dominant need {profile[0]} and threshold {profile[1]}; a "
                                 "counterfactual set's personas must differ in one of them")
            profiles.setdefault(profile, persona.id)
        splits = sorted({c.split for c in cases if c.split != reg.named(DEMO)})
        if len(splits) > 1:
            # also how a test story leaking into dev with another persona shows up
            yield InputError(path, "id", f"counterfactual set spans splits {', '.join(splits)}; "
                             "a scenario's cases stay in one split")
        for case in cases:
            if case.opening_override is None:
                yield InputError(*_where(reg, case, "opening"), f"missing: case of counterfactual set "
                                 f"{scenario_id!r} needs its own opening in {case.persona.name}'s voice")


def _persona_facts(reg: Registry) -> Iterator[InputError]:
    year = reg.info.present_year
    for path, persona in reg.current.personas.values():
        if persona.facts is None:
            continue
        age = year - persona.facts.born
        if persona.age not in (age - 1, age):
            yield InputError(_file(path), "facts.born", f"born {persona.facts.born} makes "
                             f"{persona.name} {age - 1} or {age} in {year}, but age is {persona.age}")
        for i, rel in enumerate(persona.facts.relatives):
            if rel.status == "alive" and rel.died is not None:
                yield InputError(_file(path), f"facts.relatives[{i}].died",
                                 f"{rel.name} is alive but has a year of death")


def _memory_dates(reg: Registry, years: re.Pattern[str]) -> Iterator[InputError]:
    year = reg.info.present_year
    for path, scenario in reg.current.scenarios.values():
        for i, memory in enumerate(scenario.memories):
            named = {int(y) for y in years.findall(memory.text)}
            if named and memory.year not in named:
                yield InputError(_file(path), f"memories[{i}].year", f"the text names "
                                 f"{min(named)}; give the memory's year so ages can be checked")
            elif memory.period == "current" and memory.year is not None and memory.year < year - CURRENT_YEARS:
                yield InputError(_file(path), f"memories[{i}].year", f"{memory.year} is not "
                                 f"'current' in {year}")


def _case_consistency(reg: Registry) -> Iterator[InputError]:
    year = reg.info.present_year
    checked: set[tuple[str, str]] = set()
    for case in reg.edition_cases():
        pair = (case.scenario.id, case.persona.id)
        if pair in checked:
            continue
        checked.add(pair)
        scenario_path = _file(reg.current.scenarios[case.scenario.id][0])
        facts, name = case.persona.facts, case.persona.name
        for i, memory in enumerate(case.scenario.memories):
            if memory.year is None or facts is None:
                continue
            then = memory.year - facts.born
            low, high = PERIOD_AGES[memory.period]
            if not low <= then <= high or memory.year > year:
                yield InputError(scenario_path, f"memories[{i}].year", f"{memory.year} makes {name} "
                                 f"(born {facts.born}) {then}, which does not fit '{memory.period}' "
                                 f"(case {case.id})")
        if facts is None or reg.info.edition >= CASE_NEEDS:
            continue  # from edition 3, facts.py compares every account of a person
        relatives = {rel.name: rel for rel in facts.relatives}
        for i, member in enumerate(case.scenario.cast or []):
            rel = relatives.get(member.name)
            if rel is None:
                continue
            if rel.status == "dead" and member.status == "alive":
                yield InputError(scenario_path, f"cast[{i}].status", f"{member.name} is alive here but "
                                 f"dead in persona {case.persona.id!r} (case {case.id})")
            if rel.relation != member.relation:
                yield InputError(scenario_path, f"cast[{i}].relation", f"{member.name} is "
                                 f"{member.relation!r} here but {rel.relation!r} in persona "
                                 f"{case.persona.id!r} (case {case.id})")

