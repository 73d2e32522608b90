"""A shared scenario card fits every persona who plays it: what its text says of the persona's
brothers and sisters (siblings, the eldest, an only child) is checked against each player's
facts, and so is what a case's own opening and need say (claims in card_fit.yaml).

Text is read folded (emobench/registry/checks/normalise.py). One InputError per claim and player,
naming the card's file and field.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from emobench.errors import InputError
from emobench.registry.checks.normalise import fold
from emobench.registry.checks.word_files import HERE, patterns, word_lists
from emobench.registry.loader import Registry, display_path
from emobench.registry.models import Persona

FIT = HERE / "card_fit.yaml"


@dataclass(frozen=True)
class Claim:
    key: str
    needs: str  # what the persona's facts must hold, as the problem says it

    def fits(self, siblings: list[str], older: list[str]) -> bool:
        return {"siblings": len(siblings) >= 1, "siblings_many": len(siblings) >= 2, "eldest": not older,
                "only_child": not siblings}[self.key]


CLAIMS = (Claim("siblings", "a brother or sister"), Claim("siblings_many", "two or more brothers and sisters"),
          Claim("eldest", "no older brother or sister"), Claim("only_child", "no brother or sister"))


@cache
def _relations() -> tuple[frozenset[str], frozenset[str]]:
    lists = word_lists(FIT)
    return frozenset(lists["sibling_relations"]), frozenset(lists["older_relations"])


def _family(persona: Persona) -> tuple[list[str], list[str]]:
    siblings, older = _relations()
    relatives = persona.facts.relatives if persona.facts else []
    return ([r.name for r in relatives if r.relation in siblings],
            [r.name for r in relatives if r.relation in older])


def claims(text: str) -> Iterator[tuple[Claim, str]]:
    """Each claim the text makes about the persona's siblings, with the words that make it."""
    folded = fold(text)
    for claim in CLAIMS:
        for pattern in patterns(FIT, claim.key):
            if match := pattern.search(folded):
                yield claim, match.group(0)
                break


def check_card_fit(reg: Registry) -> Iterator[InputError]:
    seen: set[tuple[str, str, str]] = set()
    for case in reg.edition_cases():
        persona = case.persona
        if persona.facts is None:
            continue
        siblings, older = _family(persona)
        path, scenario = reg.current.scenarios[case.scenario.id]
        source = reg.current.sources[case.id]
        texts = [(display_path(path), "topic", scenario.topic),
                 *((display_path(path), f"stages[{i}]", s) for i, s in enumerate(scenario.stages)),
                 *((display_path(path), f"memories[{i}].text", m.text) for i, m in enumerate(scenario.memories)),
                 (source.file, source.field("opening"), case.opening_override or ""),
                 (source.file, source.field("hidden_need.text"), case.case_need.text if case.case_need else "")]
        for file, field, text in texts:
            for claim, words in claims(text):
                if claim.fits(siblings, older) or (file, field, persona.id) in seen:
                    continue
                seen.add((file, field, persona.id))
                has = ", ".join(older if claim.key == "eldest" else siblings) or "none"
                yield InputError(file, field, f"{words!r} needs {claim.needs}, but persona {persona.id!r} "
                                 f"(case {case.id}) has {has} in facts.relatives: a shared card fits "
                                 "every persona who plays it")
