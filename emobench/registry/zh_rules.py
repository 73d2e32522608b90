"""The authoring rules for the Chinese library (cards in personas/zh and scenarios/zh, splits
named like test-zh): the third and fourth editions' rules, read with Chinese word lists and a
segmenter instead of capitals and English words.

Each check yields one InputError per problem, naming the file and the field, as rules.py does.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from emobench.errors import InputError
from emobench.registry import fact_rules
from emobench.registry.loader import Registry, display_path
from emobench.registry.zh_words import is_family


def check_zh(reg: Registry) -> Iterator[InputError]:
    players = fact_rules.scenario_players(reg)
    yield from _split_ids(reg)
    yield from fact_rules.case_needs(reg)
    yield from fact_rules.people(reg, players, family_of=is_family)
    yield from fact_rules.duplicate_memories(reg)
    for path, persona in reg.current.personas.values():
        if persona.facts is not None and persona.facts.home is None:
            yield InputError(display_path(path), "facts.home", "missing: the persona's city or town")


def _split_ids(reg: Registry) -> Iterator[InputError]:
    for split in reg.edition_splits:
        base = split.removesuffix("-zh")
        pattern = re.compile(rf"^{re.escape(base)}zh-\d\d$")
        for case in reg.cases(split):
            if not pattern.match(case.id):
                source = reg.current.sources[case.id]
                yield InputError(source.file, source.field("id"), f"{case.id!r} does not match the "
                                 f"Chinese library's pattern {base}zh-NN (two digits)")
