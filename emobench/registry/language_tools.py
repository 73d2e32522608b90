"""How the rules read text in each library language: the English readers of words.py (words
and capitals) or the Chinese ones of zh_words.py (jieba's segments, runs of characters)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from emobench.registry import words, zh_words
from emobench.registry.loader import Registry
from emobench.registry.models import DEFAULT_LANGUAGE, Language
from emobench.registry.prose import prose_words

MIN_NAME_CHARS = 3  # shorter English name words (Li, Jo) are too common to count as a shared person


def _english_names(*names: str | None) -> set[str]:
    return {w for w in words.name_words(*names)
            if len(w) >= MIN_NAME_CHARS and w not in prose_words().place_words}


def _chinese_names(*names: str | None) -> set[str]:
    # a Chinese name is one word (王建国); two characters already name one person
    return {name.strip() for name in names if name and len(name.strip()) >= 2}


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

    def run_content(self, run: str) -> int:
        return len(self.content_words(run))


ENGLISH = TextTools(words.content_words, words.concept_words, words.word_runs, _english_names,
                    shared_run=8, why_run=4, why_run_content=2, unit="words")
# Eight English words are about fifteen Chinese characters; four about seven.
CHINESE = TextTools(zh_words.content_words, zh_words.concept_words, zh_words.char_runs, _chinese_names,
                    shared_run=15, why_run=7, why_run_content=2, unit="characters")
TOOLS: dict[Language, TextTools] = {"en": ENGLISH, "zh": CHINESE}


def language_of(reg: Registry) -> Language:
    """The language of a library view's splits (English for a library of several)."""
    found = {reg.language(split) for split in reg.edition_splits}
    return found.pop() if len(found) == 1 else DEFAULT_LANGUAGE


def tools(reg: Registry) -> TextTools:
    return TOOLS[language_of(reg)]
