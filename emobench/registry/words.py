"""Reading a card's prose for the rules: names, verbs, content words (data in the YAML files
beside this module), so the rules stay about the library and the lists stay editable data."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import yaml

from emobench.errors import InputError

HERE = Path(__file__).parent
_TOKEN = re.compile(r"[^\W\d_][\w'’-]*")
# A capitalised word right after one of these starts a sentence (or a quotation).
_OPENERS = ".!?…:;\"“”‘(—–"
_SUBJECTS = frozenset({"he", "she", "they", "i"})


@dataclass(frozen=True)
class StoryWords:
    common_names: frozenset[str]
    family: frozenset[str]
    adverbs: frozenset[str]
    admission_verbs: frozenset[str]
    menus: tuple[re.Pattern[str], ...]
    stopwords: frozenset[str]


def _apostrophes(word: str) -> str:
    return word.replace("’", "'")


def _strings(data: dict[str, Any], key: str, path: Path) -> list[str]:
    """A word list; a bare YAML boolean (no, on, off) would silently become False or True."""
    items = data.get(key)
    if not isinstance(items, list) or not all(isinstance(w, str) for w in items):
        raise InputError(path, key, "must be a list of strings (quote no, on, off, yes)")
    return items


@lru_cache(maxsize=1)
def story_words() -> StoryWords:
    names_path, words_path = HERE / "common_names.yaml", HERE / "story_words.yaml"
    names = yaml.safe_load(names_path.read_text(encoding="utf-8"))
    words = yaml.safe_load(words_path.read_text(encoding="utf-8"))
    return StoryWords(
        common_names=frozenset(_apostrophes(n) for n in _strings(names, "names", names_path)),
        family=frozenset(_strings(words, "family", words_path)),
        adverbs=frozenset(_strings(words, "adverbs", words_path)),
        admission_verbs=frozenset(_strings(words, "admission_verbs", words_path)),
        menus=tuple(re.compile(p, re.IGNORECASE) for p in _strings(words, "menus", words_path)),
        stopwords=frozenset(_strings(words, "stopwords", words_path)),
    )


@cache
def word_lists(file_name: str) -> dict[str, tuple[str, ...]]:
    """Every list of strings in a word file beside this module (shape_words.yaml, ...)."""
    path = HERE / file_name
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {key: tuple(_strings(data, key, path)) for key in data}


@cache
def patterns(file_name: str, key: str) -> tuple[re.Pattern[str], ...]:
    """A list of regular expressions from a word file, compiled case-insensitively."""
    return tuple(re.compile(p, re.IGNORECASE) for p in word_lists(file_name)[key])


def first_match(text: str, found: tuple[re.Pattern[str], ...]) -> str | None:
    """The first pattern's match in text, as written there, or None."""
    for pattern in found:
        if match := pattern.search(_apostrophes(text)):
            return match.group(0)
    return None


def name_words(*names: str | None) -> set[str]:
    """The words a name may appear as: "Ama Owusu" allows Ama, Owusu and Ama's."""
    out: set[str] = set()
    for name in names:
        for word in _TOKEN.findall(_apostrophes(name or "")):
            out.add(_bare(word))
    return out


def _bare(word: str) -> str:
    word = _apostrophes(word)
    return word[:-2] if word.endswith("'s") else word.rstrip("'")


def capitalised_mid_sentence(text: str) -> list[str]:
    """Capitalised words that do not start a sentence or quotation, in order, once each.
    All-capital words (OK, AGAIN, ICU) are emphasis or acronyms, not names of people; "I"
    is in the common list anyway."""
    found: dict[str, None] = {}
    for match in _TOKEN.finditer(text):
        word = _bare(match.group())
        if not word[:1].isupper() or word.isupper() or any(ch.isdigit() for ch in word):
            continue  # a single letter (grade A, T-junction), an acronym or a code (F2s)
        before = text[:match.start()].rstrip()
        if not before or before[-1] in _OPENERS:
            continue
        found.setdefault(word, None)
    return list(found)


def lemma(word: str) -> str:
    """A simple verb lemma: asks/asked/asking -> ask, admits/admitted -> admit, goes -> go."""
    w = word.lower().strip("'’")
    for suffix, repl in (("ies", "y"), ("ied", "y")):
        if w.endswith(suffix) and len(w) > 4:
            return w[: -len(suffix)] + repl
    if w.endswith(("sses", "shes", "ches", "xes", "zes", "oes")) and len(w) > 4:
        return w[:-2]
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) > len(suffix) + 2:
            w = w[: -len(suffix)]
            if len(w) > 2 and w[-1] == w[-2] and w[-1] not in "lszaeiou":  # seeing -> see
                w = w[:-1]  # admitted -> admit, stopping -> stop
            return w
    if w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        return w[:-1]
    return w


def first_verb(stage: str, subjects: set[str]) -> str:
    """The stage's first verb after its subject ("She asks…", "Mateo asks…", "Asks…")."""
    tokens = [t for t in _TOKEN.findall(stage)]
    skip = story_words().adverbs
    i = 0
    if tokens and (tokens[0].lower() in _SUBJECTS or _bare(tokens[0]) in subjects):
        i = 1
    while i < len(tokens) - 1 and (tokens[i].lower() in skip or tokens[i].lower().endswith("ly")):
        i += 1
    return lemma(tokens[i]) if i < len(tokens) else ""


def content_words(text: str) -> set[str]:
    stop = story_words().stopwords
    out = set()
    for token in _TOKEN.findall(_apostrophes(text.lower())):
        word = token.split("'")[0]
        if word and word not in stop and len(word) > 1:
            out.add(_fold(word))
    return out


@lru_cache(maxsize=1)
def _concepts() -> dict[str, str]:
    path = HERE / "need_concepts.yaml"
    groups = yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
    return {_fold(word): group[0] for group in groups for word in group}


def _fold(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def concept_words(text: str, synonyms: bool = True) -> set[str]:
    """Content words, each synonym of need_concepts.yaml replaced by its group's first word."""
    words = content_words(text)
    if not synonyms:
        return words
    concepts = _concepts()
    return {concepts.get(word, word) for word in words}


def word_runs(text: str, length: int) -> list[str]:
    """Every run of `length` words in text, lower case, punctuation ignored, in order."""
    words = normalised(_apostrophes(text)).split()
    return [" ".join(words[i:i + length]) for i in range(len(words) - length + 1)]


def shared_run(a: str, b: str, length: int) -> str:
    """The first run of `length` words that a and b share, or ""."""
    grams = set(word_runs(b, length))
    return next((run for run in word_runs(a, length) if run in grams), "")


def normalised(text: str) -> str:
    """Text for duplicate detection: lower case, letters and digits only, single spaces."""
    return " ".join(re.findall(r"\w+", text.lower()))
