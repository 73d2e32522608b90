"""Chinese: jieba's segments and runs of characters (words.py), the fact and prose rules that
read Chinese prose (facts.py, prose_facts.py), and character n-grams for meaning
(similarity.py): MiniLM does not read Chinese."""

from __future__ import annotations

import re

from emobench.registry.card_files import HELD_OUT_EDITION
from emobench.registry.checks.lang.zh import words
from emobench.registry.checks.lang.zh.facts import check_facts
from emobench.registry.checks.lang.zh.prose_facts import check_prose
from emobench.registry.checks.lang.zh.similarity import ChineseMeter
from emobench.registry.checks.pack import LanguagePack, MeaningReader, StoryShape, TextTools
from emobench.registry.models import Scenario

_YEAR = re.compile(r"(?<!\d)(19\d\d|20\d\d)(?!\d)")  # no word boundary before 年


def _names(*names: str | None) -> set[str]:
    # a Chinese name is one word (王建国); two characters already name one person
    return {name.strip() for name in names if name and len(name.strip()) >= 2}


def _shape(key: str, text: str) -> str | None:
    return words.first_match(text, words.patterns(words.SHAPE_WORDS, key))


def _asks(text: str) -> str | None:
    return next((m for m in ("?", "？") if m in text), None) or _shape("request_phrases", text)


def _opening_move(stage: str, names: list[str]) -> str:
    return words.first_verb(stage, set(names))


def _admits(stage: str, names: list[str]) -> bool:
    return _shape("admissions", stage) is not None


def _story(scenario: Scenario) -> str:
    return " ".join([scenario.topic, scenario.opening, *scenario.stages, *(m.text for m in scenario.memories)])


PACK = LanguagePack(
    code="zh",
    # Eight English words are about fifteen Chinese characters; four about seven.
    tools=TextTools(words.content_words, words.concept_words, words.char_runs, _names,
                    shared_run=15, why_run=7, why_run_content=2, unit="characters", whole_names=False),
    shape=StoryShape(_asks, lambda stage: _shape("scripted_outcomes", stage), _opening_move, _admits),
    meaning=MeaningReader(
        meter=ChineseMeter,
        cuts={"need~opening": 0.16, "need~why": 0.13, "siblings": 0.06, "story": 0.07, "twin": 0.1},
        # a phrase of the why: eight characters holding at least two content words
        story=_story, units=lambda text: words.char_runs(text, 1), phrase=8, joiner="", lemma=str.lower,
        need_frame=None, unchecked="Chinese texts by meaning"),
    year=_YEAR,
    facts_from=HELD_OUT_EDITION,
    facts=check_facts,
    family_of=words.is_family,
    prose=check_prose,
)
