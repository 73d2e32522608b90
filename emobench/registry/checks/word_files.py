"""Reading the checks' word files (YAML lists of words and patterns beside the module or in a
language pack), so the rules stay about the library and the lists stay editable data."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from emobench.errors import InputError

HERE = Path(__file__).parent


def apostrophes(word: str) -> str:
    return word.replace("’", "'")


def strings(data: dict[str, Any], key: str, path: Path) -> list[str]:
    """A word list; a bare YAML boolean (no, on, off) would silently become False or True."""
    items = data.get(key)
    if not isinstance(items, list) or not all(isinstance(w, str) for w in items):
        raise InputError(path, key, "must be a list of strings (quote no, on, off, yes)")
    return items


@cache
def word_lists(path: Path) -> dict[str, tuple[str, ...]]:
    """Every list of strings in a word file (shape_words.yaml, ...)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {key: tuple(strings(data, key, path)) for key in data}


@cache
def patterns(path: Path, key: str) -> tuple[re.Pattern[str], ...]:
    """A list of regular expressions from a word file, compiled case-insensitively."""
    return tuple(re.compile(p, re.IGNORECASE) for p in word_lists(path)[key])


def first_match(text: str, found: tuple[re.Pattern[str], ...]) -> str | None:
    """The first pattern's match in text, as written there, or None."""
    for pattern in found:
        if match := pattern.search(apostrophes(text)):
            return match.group(0)
    return None


def normalised(text: str) -> str:
    """Text for duplicate detection: lower case, letters and digits only, single spaces."""
    return " ".join(re.findall(r"\w+", text.lower()))
