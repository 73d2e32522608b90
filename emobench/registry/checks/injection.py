"""Text addressed to the models inside a card: the simulated user and the judges read card
text as data, so a card may not speak to them (patterns in injection.yaml), nor hide text
from the checks with invisible characters or letters of another script that imitate ASCII.
The patterns match the folded text, accents off (emobench/registry/checks/normalise.py)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from functools import cache
from typing import Any

from emobench.errors import InputError
from emobench.registry.checks.normalise import fold, plain, unseen
from emobench.registry.checks.word_files import HERE, first_match, patterns, word_lists
from emobench.registry.loader import Registry, display_path

INJECTION = HERE / "injection.yaml"
_WORD = re.compile(r"\w+")


@cache
def _traditional() -> dict[int, str]:
    return {ord(pair[0]): pair[1] for pair in word_lists(INJECTION)["traditional"]}


def addressed_to_models(text: str) -> str | None:
    """The words by which a text speaks to the models (as folded, accents off), or None."""
    return first_match(plain(text).translate(_traditional()), patterns(INJECTION, "patterns"))


def disguised(text: str) -> str | None:
    """What hides the text from a reader or a rule: an invisible or control character, or a
    letter of another script inside a word, imitating an ASCII letter (Cyrillic о in 'Tоbin')."""
    if hidden := unseen(text):
        return f"holds {hidden}"
    if text.isascii():
        return None
    for word in _WORD.findall(text):
        if word.isascii():
            continue
        for char in word:
            name = unicodedata.name(char, "")
            if (ord(char) >= 0x250 and name.startswith("LATIN") and not unicodedata.decomposition(char)
                    and any(c.isascii() for c in word)):
                # a small capital or an IPA letter among plain ones (ʟate; not an accented ễ): the
                # confusables table maps few of them
                return f"{word!r} holds {name}, a phonetic letter or small capital among plain ones"
            plain = fold(char)
            # Latin letters of written languages (æ, ı, ơ: below U+0250) stay; IPA letters, small
            # capitals and the later Latin blocks (ɡ, ʟ, ᴀ) are look-alikes like any other script's
            if plain != char and plain.isascii() and plain.isalnum() and not (
                    ord(char) < 0x250 or unicodedata.name(char, "").startswith(("FULLWIDTH DIGIT", "DIGIT"))):
                return (f"{word!r} holds {unicodedata.name(char, hex(ord(char)))}, which imitates "
                        f"{plain!r}")
    return None


def _strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]")


def _problem(file: str, field: str, words: str) -> InputError:
    return InputError(file, field, f"speaks to the models ({words!r}): card text is read by the "
                      "simulated user and the judges as data, never as instructions")


def _text_problem(file: str, field: str, text: str) -> InputError | None:
    if hidden := disguised(text):
        return InputError(file, field, f"{hidden}: write card text as it reads, in plain letters")
    if words := addressed_to_models(text):
        return _problem(file, field, words)
    return None


def check_injection(reg: Registry) -> Iterator[InputError]:
    """Every text field of the current edition's cards and cases."""
    for path, card in [*reg.current.personas.values(), *reg.current.scenarios.values()]:
        for field, text in _strings(card.model_dump(exclude={"content_hash", "id"})):
            if problem := _text_problem(display_path(path), field, text):
                yield problem
    for case in reg.edition_cases():
        source = reg.current.sources[case.id]
        texts: list[tuple[str, str | None]] = [
            ("opening", case.opening_override),
            ("hidden_need.text", case.case_need.text if case.case_need else None)]
        for field, value in texts:
            if value and (problem := _text_problem(source.file, source.field(field), value)):
                yield problem
