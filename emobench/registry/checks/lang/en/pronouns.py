"""Edition 4: a scenario's stages and a case's hidden need speak of the persona with the pronoun
the persona card's own prose uses, at the start of the text and at the first pronoun before anyone
else is named.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from emobench.errors import InputError
from emobench.registry.checks.lang.en.prose_forms import pronoun_inside
from emobench.registry.loader import Registry, display_path
from emobench.registry.models import Persona

_SHE = re.compile(r"\b(?:she|her|hers|herself)\b", re.IGNORECASE)
_HE = re.compile(r"\b(?:he|him|his|himself)\b", re.IGNORECASE)
_STAGE_PRONOUN = re.compile(r"^\s*(She|He|Her|His)\b")


def pronoun_of(persona: Persona) -> str | None:
    """"she" or "he", as the persona card's own prose speaks of the person; None when unclear."""
    text = " ".join([persona.background, *(persona.needs[a].why for a in ("C", "A", "P"))])
    she, he = len(_SHE.findall(text)), len(_HE.findall(text))
    return "she" if she > he else "he" if he > she else None


def check_pronouns(reg: Registry) -> Iterator[InputError]:
    players: dict[str, set[str | None]] = {}
    for case in reg.edition_cases():
        players.setdefault(case.scenario.id, set()).add(pronoun_of(case.persona))
    for scenario_id, pronouns in players.items():
        pronoun = next(iter(pronouns))
        if len(pronouns) != 1 or pronoun is None:
            continue  # played by people of either pronoun: the "They" template, checked elsewhere
        path, scenario = reg.current.scenarios[scenario_id]
        for i, stage in enumerate(scenario.stages):
            if problem := pronoun_problem(stage, pronoun):
                yield InputError(display_path(path), f"stages[{i}]", problem)
    for case in reg.edition_cases():
        pronoun = pronoun_of(case.persona)
        if pronoun is not None and case.case_need is not None:
            if problem := pronoun_problem(case.case_need.text, pronoun):
                source = reg.current.sources[case.id]
                yield InputError(source.file, source.field("hidden_need.text"), problem)


def pronoun_problem(text: str, pronoun: str) -> str | None:
    start = _STAGE_PRONOUN.match(text)
    if start and ("she" if start.group(1) in ("She", "Her") else "he") != pronoun:
        return f"starts with {start.group(1)!r}, but the persona is '{pronoun}' in its own card"
    # "Later that night, he asks ...": the first pronoun, with no one else named before it, is
    # the persona's too.
    first = None if start else pronoun_inside(text)
    if first is not None and ("she" if first.group(1).lower() in ("she", "her") else "he") != pronoun:
        return (f"{first.group(0)!r} ({text[:first.start()].strip()} …) is the persona, who is "
                f"'{pronoun}' in its own card")
    return None
