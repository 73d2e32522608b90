"""Reading what a card's prose says about people: who it refers to by relation, and what it
says of their death, contact, age, job and home (word lists in prose_words.yaml)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from emobench.errors import InputError

PROSE_WORDS = Path(__file__).parent / "prose_words.yaml"


@dataclass(frozen=True)
class Person:
    """Someone of the persona's life, as the facts or a cast record them."""

    name: str
    relation: str  # the last word of the recorded relation, lower case
    status: str
    born: int | None
    died: int | None
    where: str  # "persona 'x' facts.relatives[0]" or "the cast"


@dataclass(frozen=True)
class ProseWords:
    relations: dict[str, frozenset[str]]
    adjectives: tuple[str, ...]
    determiners: tuple[str, ...]
    indefinite: frozenset[str]
    generic_before: frozenset[str]
    parent_names: dict[str, str]
    death: tuple[str, ...]
    widowed: tuple[str, ...]
    living: tuple[str, ...]
    units: tuple[str, ...]
    tens: tuple[str, ...]
    ages: tuple[str, ...]
    identity_ages: tuple[str, ...]
    decades: tuple[str, ...]
    durations: tuple[str, ...]
    recent: tuple[str, ...]
    jobs: frozenset[str]
    job_synonyms: dict[str, str]
    job_conflicts: dict[str, tuple[str, ...]]
    homes: tuple[str, ...]
    relative_ages: tuple[str, ...]
    place_words: frozenset[str]
    children: frozenset[str]
    parents: frozenset[str]


def _strings(data: dict[str, Any], key: str) -> tuple[str, ...]:
    items = data.get(key)
    if not isinstance(items, list) or not all(isinstance(w, str) for w in items):
        raise InputError(PROSE_WORDS, key, "must be a list of strings (quote no, on, off, yes)")
    return tuple(items)


def _mapping(data: dict[str, Any], key: str) -> dict[str, Any]:
    items = data.get(key)
    if not isinstance(items, dict):
        raise InputError(PROSE_WORDS, key, "must be a mapping")
    return items


@cache
def prose_words() -> ProseWords:
    data = yaml.safe_load(PROSE_WORDS.read_text(encoding="utf-8"))
    numbers = _mapping(data, "numbers")
    return ProseWords(
        relations={word: frozenset(_strings(_mapping(data, "relations"), word))
                   for word in _mapping(data, "relations")},
        adjectives=_strings(data, "relation_adjectives"),
        determiners=_strings(data, "determiners"),
        indefinite=frozenset(_strings(data, "indefinite")),
        generic_before=frozenset(_strings(data, "generic_before")),
        parent_names={str(k): str(v) for k, v in _mapping(data, "parent_names").items()},
        death=_strings(data, "death_templates"),
        widowed=_strings(data, "widowed_templates"),
        living=_strings(data, "living_templates"),
        units=_strings(numbers, "units"),
        tens=_strings(numbers, "tens"),
        ages=_strings(data, "age_templates"),
        identity_ages=_strings(data, "identity_age_templates"),
        decades=_strings(data, "decade_templates"),
        durations=_strings(data, "duration_templates"),
        recent=_strings(data, "recent_templates"),
        jobs=frozenset(_strings(data, "jobs")),
        job_synonyms={str(k): str(v) for k, v in _mapping(data, "job_synonyms").items()},
        job_conflicts={str(k): _strings(_mapping(data, "job_conflicts"), k)
                       for k in _mapping(data, "job_conflicts")},
        homes=_strings(data, "home_templates"),
        relative_ages=_strings(data, "relative_age_templates"),
        place_words=frozenset(_strings(data, "place_words")),
        children=frozenset(_strings(data, "child_relations")),
        parents=frozenset(_strings(data, "parent_relations")),
    )


def relation_word(relation: str) -> str:
    """The word a relation is known by: its last ("older sister" -> sister, "son's fiancée" -> fiancée)."""
    return relation.split()[-1].lower() if relation.split() else ""


# ---- numbers -----------------------------------------------------------------------------

@cache
def number_pattern() -> str:
    """Digits, or a number in words up to ninety-nine ("thirty-four", "sixty two")."""
    words = prose_words()
    units = "|".join(words.units[1:10])
    tens = "|".join(words.tens)
    small = "|".join(sorted(words.units, key=len, reverse=True))
    return rf"(\d{{1,3}}|(?:{tens})(?:[- ](?:{units}))?|{small})"


def decade_pattern() -> str:
    """ "twenties" ... "nineties", as one group."""
    return "(" + "|".join(t[:-1] + "ies" for t in prose_words().tens) + ")"


def parse_decade(text: str) -> int | None:
    """20 for "twenties", ..., 90 for "nineties"."""
    tens = [t[:-1] + "ies" for t in prose_words().tens]
    text = text.lower()
    return 20 + 10 * tens.index(text) if text in tens else None


WHEN = r"((?:this|last)\s+(?:year|spring|summer|autumn|fall|winter|month|week))"


def years_ago(when: str) -> set[int]:
    """How many years before the present "this spring" or "last year" may be."""
    this, what = when.lower().split()
    if what == "year":
        return {0} if this == "this" else {1}
    return {0, 1}


def parse_number(text: str) -> int | None:
    """The value of a number matched by number_pattern, or None."""
    text = text.lower().strip()
    if text.isdigit():
        return int(text)
    words = prose_words()
    parts = re.split(r"[- ]", text)
    if len(parts) == 1 and parts[0] in words.units:
        return words.units.index(parts[0])
    if parts[0] in words.tens and len(parts) <= 2:
        value = 20 + 10 * words.tens.index(parts[0])
        if len(parts) == 2:
            if parts[1] not in words.units[1:10]:
                return None
            value += words.units.index(parts[1])
        return value
    return None


# ---- references to people ----------------------------------------------------------------

def _alternatives(words: list[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


def relation_phrase(referring: list[str], determiners: tuple[str, ...] | None = None) -> str:
    return _relation_phrase(tuple(referring), determiners)


@cache
def _relation_phrase(referring: tuple[str, ...], determiners: tuple[str, ...] | None) -> str:
    """ "my|her|... [adjective ...] <one of the referring words>", as a regex without groups."""
    words = prose_words()
    dets = _alternatives(list(determiners or words.determiners[:5]))
    adjectives = _alternatives(list(words.adjectives))
    return rf"\b(?:{dets})\s+(?:(?:{adjectives})\s+)*(?:{_alternatives(list(referring))})\b(?!-)"


def referring_words(person: Person, people: list[Person]) -> list[str]:
    """The relation words that name this person and no one else of another status. A word that
    is exactly this person's relation and no one else's names them even beside someone of the
    other status the word could also mean ("my brother" beside a living stepbrother)."""
    out = []
    for word, stands_for in prose_words().relations.items():
        if person.relation not in stands_for:
            continue
        others = [p for p in people if p.relation in stands_for and p.status != person.status]
        exact = word == person.relation and not any(p.relation == word for p in people if p is not person)
        if not others or exact:
            out.append(word)
    return out


def reference(person: Person, people: list[Person]) -> str:
    return _reference(person, tuple(people))


@cache
def _reference(person: Person, people: tuple[Person, ...]) -> str:
    """A regex for every way the prose may name this person: the name (case kept), a relation
    phrase, or Mum/Dad for a parent."""
    names = [person.name, *(w for w in person.name.split() if len(w) >= 3)]
    parts = [rf"(?-i:\b(?:{_alternatives(names)})\b)"]
    referring = referring_words(person, list(people))
    if referring:
        parts.append(relation_phrase(referring))
        parents = [name for name, rel in prose_words().parent_names.items() if rel in referring]
        if parents:
            parts.append(rf"(?-i:\b(?:{_alternatives(parents)})\b)")
    return "(?:" + "|".join(parts) + ")"


def named_by(person: Person, people: list[Person]) -> frozenset[str]:
    """The lower-case words any reference to this person contains (its name's words, its
    relation words), so a text without one of them need not be searched."""
    return _named_by(person, tuple(people))


@cache
def _named_by(person: Person, people: tuple[Person, ...]) -> frozenset[str]:
    referring = referring_words(person, list(people))
    return frozenset({*(w.lower() for w in person.name.split()), *referring})


def words_of(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"[\w'-]+", text.lower().replace("’", "'")) +
                     re.findall(r"\w+", text.lower()))


@dataclass(frozen=True)
class Mention:
    """A person the prose refers to by relation: the words, and the relation word used."""

    words: str
    relation: str


@cache
def _mention_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    words = prose_words()
    return (re.compile(relation_phrase(list(words.relations), words.determiners), re.IGNORECASE),
            re.compile(rf"\b(?:{_alternatives(list(words.parent_names))})\b"))


def mentions(text: str) -> Iterator[Mention]:
    """Every "my brother", "her late husband", "a colleague" or standalone "Mum" in text."""
    words = prose_words()
    for match in _mention_patterns()[0].finditer(text.replace("’", "'")):
        phrase = match.group(0)
        relation = phrase.split()[-1].lower()
        determiner = phrase.split()[0].lower()
        before = text[:match.start()].split()
        if determiner in ("a", "an") and (relation not in words.indefinite or
                                          (before and before[-1].lower() in words.generic_before)):
            continue
        yield Mention(phrase, relation)
    for match in _mention_patterns()[1].finditer(text):
        yield Mention(match.group(0), words.parent_names[match.group(0)])
