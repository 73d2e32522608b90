"""Readings the English fact rules (prose_facts.py) share beyond one template: a reference that
says "late", death said by pronoun after the person is named, the
persona's pronoun inside a stage, and the cheap test that spares compiling a template."""

from __future__ import annotations

import re
from functools import lru_cache

from emobench.registry.checks.lang.en.prose_words import Person, named_by, words_of
from emobench.registry.checks.lang.en.words import capitalised_mid_sentence


@lru_cache(maxsize=8192)
def compiled(pattern: str) -> re.Pattern[str]:
    # one pattern per person and template: more than the re module's own cache keeps
    return re.compile(pattern, re.IGNORECASE)


# Death said of a person by pronoun, after they were named: "so we scattered her ashes".
_PRONOUN_DEATH = re.compile(
    r"\b(?:her|his)\s+(?:ashes|funeral|grave|graveside|headstone|burial|cremation|coffin|urn|wake|memorial|"
    r"obituary|eulogy|deathbed|death)\b|\b(?:buried|cremated|mourned|mourning|lost)\s+(?:her|him)\b|"
    r"\b(?:she|he)\s+(?:died|passed away|passed on|was buried|was cremated)\b", re.IGNORECASE)
_PRONOUN_REACH = 200  # characters after the name that a pronoun is read as theirs


def late_reference(ref: str, text: str) -> re.Match[str] | None:
    """ "my late husband", "her late father": a reference to the person that says "late"."""
    return next((m for m in compiled(ref).finditer(text) if re.search(r"\blate\b", m.group(0), re.I)), None)


def pronoun_death(ref: str, people: list[Person], text: str) -> re.Match[str] | None:
    """A pronoun's death words soon after the person is named, when no one dead is named in
    the text (the pronoun could be theirs)."""
    present = words_of(text)
    dead = {_gender(p.relation) for p in people if p.status == "dead" and named_by(p, people) & present}
    for named in compiled(ref).finditer(text):
        window = text[named.end():named.end() + _PRONOUN_REACH]
        found = _PRONOUN_DEATH.search(window)
        said = _gender(found.group(0)) if found else None
        if found and not dead & {said, None}:  # a dead person the pronoun could stand for is named
            return found
    return None


_FEMALE = re.compile(r"\b(?:she|her|mother|mum|mom|mam|sister|wife|daughter|aunt|niece|grandmother|gran|"
                     r"girlfriend|fianc[ée]e|stepmother|stepsister|stepdaughter|granddaughter)\b", re.I)
_MALE = re.compile(r"\b(?:he|him|his|father|dad|papa|brother|husband|son|uncle|nephew|grandfather|grandad|"
                   r"boyfriend|fianc[ée]|stepfather|stepbrother|stepson|grandson|half-brother)\b", re.I)


def _gender(words: str) -> str | None:
    """ "f" or "m" when the words (a relation, a pronoun phrase) say it, else None."""
    return "f" if _FEMALE.search(words) else "m" if _MALE.search(words) else None


@lru_cache(maxsize=1024)
def _anchors(template: str) -> tuple[str, ...]:
    """The template's own words: every match holds one of them, so a text with none is not
    searched (compiling a template for each person costs more than all the searching)."""
    bare = re.sub(r"\{\w+\}|\\[a-zA-Z]", " ", template)
    return tuple({w for w in re.findall(r"[a-z']{3,}", bare.lower())})


def may_match(template: str, text: str) -> bool:
    low = text.lower()
    anchors = _anchors(template)
    return not anchors or any(a in low for a in anchors)


_ANY_PRONOUN = re.compile(r"\b(she|he|her|his)\b", re.IGNORECASE)
# Words before a pronoun that name someone else it could stand for.
_SOMEONE = re.compile(r"\b(?:someone|somebody|anyone|everyone|nobody|man|woman|boy|girl|person|they|"
                      r"mother|father|mum|dad|mom|brother|sister|son|daughter|wife|husband|partner|friend|"
                      r"boss|manager|colleague|neighbour|neighbor|doctor|nurse|teacher|landlord|child|baby|"
                      r"aunt|uncle|cousin|gran|grandad|grandma|grandpa|nan|who|whom)\b", re.IGNORECASE)


def pronoun_inside(text: str) -> re.Match[str] | None:
    """The text's first pronoun when no one else is named before it: the persona's ("Later that
    evening, he asks …"; not "When Sam calls, he …")."""
    first = _ANY_PRONOUN.search(text)
    before = text[:first.start()] if first else ""
    if first is None or _SOMEONE.search(before) or capitalised_mid_sentence(before):
        return None
    return first
