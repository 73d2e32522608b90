"""Reading English prose for the rules: names, verbs, content words (data in the YAML files
beside this module, English's pack)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from emobench.registry.checks.word_files import apostrophes, normalised, strings

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


@lru_cache(maxsize=1)
def story_words() -> StoryWords:
    names_path, words_path = HERE / "common_names.yaml", HERE / "story_words.yaml"
    names = yaml.safe_load(names_path.read_text(encoding="utf-8"))
    words = yaml.safe_load(words_path.read_text(encoding="utf-8"))
    return StoryWords(
        common_names=frozenset(apostrophes(n) for n in strings(names, "names", names_path)),
        family=frozenset(strings(words, "family", words_path)),
        adverbs=frozenset(strings(words, "adverbs", words_path)),
        admission_verbs=frozenset(strings(words, "admission_verbs", words_path)),
        menus=tuple(re.compile(p, re.IGNORECASE) for p in strings(words, "menus", words_path)),
        stopwords=frozenset(strings(words, "stopwords", words_path)),
    )


def name_words(*names: str | None) -> set[str]:
    """The words a name may appear as: "Ama Owusu" allows Ama, Owusu and Ama's."""
    out: set[str] = set()
    for name in names:
        for word in _TOKEN.findall(apostrophes(name or "")):
            out.add(_bare(word))
    return out


def _bare(word: str) -> str:
    word = apostrophes(word)
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
    for token in _TOKEN.findall(apostrophes(text.lower())):
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


@lru_cache(maxsize=8192)
def concept_lemmas(text: str) -> frozenset[str]:
    """What a text is about, however it is worded: its content words, each synonym of
    need_concepts.yaml read as its group's first word and every other word as its stem (the
    verb lemma without a final e: "piling", "piles" and "pile" are one)."""
    concepts, stop = _concepts(), story_words().stopwords
    found = set()
    for token in _TOKEN.findall(apostrophes(text.lower())):
        word = token.split("'")[0]
        if word and word not in stop and len(word) > 1:
            stem = lemma(word)
            found.add(concepts.get(_fold(word)) or concepts.get(stem)
                      or (stem[:-1] if len(stem) > 3 and stem.endswith("e") else stem))
    return frozenset(found)


def word_runs(text: str, length: int) -> list[str]:
    """Every run of `length` words in text, lower case, punctuation ignored, in order."""
    words = normalised(apostrophes(text)).split()
    return [" ".join(words[i:i + length]) for i in range(len(words) - length + 1)]


def shared_run(a: str, b: str, length: int) -> str:
    """The first run of `length` words that a and b share, or ""."""
    grams = set(word_runs(b, length))
    return next((run for run in word_runs(a, length) if run in grams), "")


def english_family(relation: str) -> bool:
    """A family relation ("her late husband", "stepmother"), read by its last word."""
    return relation.split()[-1].lower() in story_words().family
