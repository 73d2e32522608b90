"""The authoring rules of the current edition, checked on any library by `scenarios validate`.

Loading (emobench.registry.loader) stops at the first card a program cannot read; these rules
run on a loaded library and report every problem, one InputError per broken rule, naming the
file and the field. Archived editions are frozen and not checked against today's rules.

The engine runs the checks every language shares (the modules beside this one) and each
language's own rules from its pack (lang/<code>/pack.py, listed in packs.py) on that
language's cards and splits.
"""

from __future__ import annotations

import re

from emobench.errors import InputError
from emobench.registry.card_files import HELD_OUT_EDITION
from emobench.registry.checks.card_fit import check_card_fit
from emobench.registry.checks.facts import duplicate_memories, homes, people, scenario_players
from emobench.registry.checks.held_out import check_held_out
from emobench.registry.checks.injection import check_injection
from emobench.registry.checks.meaning import check_meaning
from emobench.registry.checks.needs import case_needs, check_needs, need_overlaps
from emobench.registry.checks.pack import LanguagePack
from emobench.registry.checks.packs import PACKS
from emobench.registry.checks.story_shape import check_scripted
from emobench.registry.checks.structure import check_structure
from emobench.registry.checks.training_pages import check_training
from emobench.registry.loader import Registry


def check_library(reg: Registry) -> list[InputError]:
    """Every broken authoring rule of the current edition, in file order; each language's
    cards and splits are held to the rules on their own (a Chinese test split is held out
    from the Chinese dev and demo splits)."""
    # once: they read the whole library
    problems = [*check_injection(reg), *check_training(reg), *check_card_fit(reg)]
    for language in reg.languages:
        problems += _language_rules(reg.view(language), PACKS[language])
    return sorted(problems, key=lambda e: (e.source, _natural(e.field), e.problem))


def _language_rules(reg: Registry, pack: LanguagePack) -> list[InputError]:
    edition = reg.info.edition
    problems = check_structure(reg, pack.year)
    if edition >= pack.facts_from:
        problems += _facts(reg, pack)
    if edition >= HELD_OUT_EDITION:
        problems += [*check_scripted(reg), *check_held_out(reg), *check_needs(reg, pack.tools),
                     *pack.prose(reg), *check_meaning(reg)]
    return problems


def _facts(reg: Registry, pack: LanguagePack) -> list[InputError]:
    """The fact rules every language shares, then the pack's own, which read its prose."""
    players = scenario_players(reg)
    return [*case_needs(reg), *need_overlaps(reg, pack.tools.content_words),
            *people(reg, players, family_of=pack.family_of), *duplicate_memories(reg), *homes(reg),
            *pack.facts(reg, players)]


def _natural(field: str) -> list[tuple[int, str]]:
    # cases[2] before cases[10]
    return [(int(part), "") if part.isdigit() else (-1, part) for part in re.split(r"(\d+)", field)]
