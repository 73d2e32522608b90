"""What a language pack gives the engine (emobench/registry/checks/lang/<code>/pack.py): how
its prose is read (words, runs, names), how its stories' shape is read, how alike two of its
texts are in meaning, and the rules only that language needs (its fact and prose rules).

The checks in emobench/registry/checks/ are written once against these records; a library
language is one pack, listed in packs.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from emobench.errors import InputError
from emobench.registry.checks.facts import Players
from emobench.registry.loader import Registry
from emobench.registry.models import DEFAULT_LANGUAGE, Language, Scenario


@dataclass(frozen=True)
class TextTools:
    """The readers one language's rules use, and the run lengths they compare."""

    content_words: Callable[[str], set[str]]
    concept_words: Callable[[str, bool], set[str]]
    runs: Callable[[str, int], list[str]]
    names: Callable[..., set[str]]  # the words of names that mark the same person or place
    shared_run: int  # units in a row a test text may share with another split's text
    why_run: int  # units in a row a hidden need may not share with the persona's why ...
    why_run_content: int  # ... when at least this many content words are in them
    unit: str
    whole_names: bool  # a name is found as a whole word (English) or anywhere in the text (Chinese)

    def run_content(self, run: str) -> int:
        return len(self.content_words(run))


@dataclass(frozen=True)
class StoryShape:
    """How a stage's shape is read: what it asks, whether it scripts the outcome, its first
    move and whether it ends in an admission (names: who may be the stage's subject)."""

    asks: Callable[[str], str | None]
    scripted_outcome: Callable[[str], str | None]
    opening_move: Callable[[str, list[str]], str]
    admits: Callable[[str, list[str]], bool]


class Meter(Protocol):
    def cosines(self, a: Sequence[str], b: Sequence[str]) -> list[float]: ...


@dataclass(frozen=True)
class MeaningReader:
    """How the meaning checks (meaning.py) read this language."""

    meter: Callable[[Sequence[str]], Meter | None]  # from the library's texts; None: not installed
    cuts: dict[str, float]  # the similarity at or above which a pair is one text said twice
    story: Callable[[Scenario], str]  # the part of a scenario a retold story is compared on
    units: Callable[[str], list[str]]  # words (characters in Chinese) for the one-edit phrase rule
    phrase: int  # units in a phrase of the why the one-edit rule compares
    joiner: str
    lemma: Callable[[str], str]
    need_frame: re.Pattern[str] | None  # the frame a need opens with ("She needs"), left out
    unchecked: str  # the checks `validate` names when the meter is not installed
    # For the kinds in concept_kinds, a pair scores its cosine plus concept_weight times the
    # share of the shorter text's concepts the other holds (meaning.py, concept_share).
    concepts: Callable[[str], frozenset[str]] | None = None
    concept_weight: float = 0.0
    concept_kinds: frozenset[str] = frozenset()


@dataclass(frozen=True)
class LanguagePack:
    code: Language
    tools: TextTools
    shape: StoryShape
    meaning: MeaningReader
    year: re.Pattern[str]  # a year named in a memory's text
    facts_from: int  # the first edition the pack's fact rules hold for
    facts: Callable[[Registry, Players], Iterator[InputError]]  # the fact rules that read its prose
    family_of: Callable[[str], bool]  # whether a relation ("stepmother", 继母) is family
    prose: Callable[[Registry], Iterator[InputError]]  # the prose agrees with the facts


def language_of(reg: Registry) -> Language:
    """The language of a library view's splits (English for a library of several)."""
    found = {reg.language(split) for split in reg.edition_splits}
    return found.pop() if len(found) == 1 else DEFAULT_LANGUAGE
