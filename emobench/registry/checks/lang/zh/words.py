"""Reading Chinese prose for the rules: jieba's segmenter and part-of-speech tags (MIT; its
dictionary takes about a second to load, so once and only when a Chinese card is checked),
and the Chinese word lists beside this module (prose_words.yaml, shape_words.yaml,
need_concepts.yaml)."""

from __future__ import annotations

import logging
import re
import warnings
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from emobench.errors import InputError

if TYPE_CHECKING:
    from jieba.posseg import POSTokenizer

HERE = Path(__file__).parent
PROSE_WORDS = "prose_words.yaml"
SHAPE_WORDS = "shape_words.yaml"
NEED_CONCEPTS = "need_concepts.yaml"
NAME_TAGS = frozenset({"nr", "nrfg", "nrt"})  # jieba's tags for a person's name
_CJK = re.compile(r"[\u4e00-\u9fff]")
_RUN_CHARS = re.compile(r"[\u4e00-\u9fff0-9A-Za-z]")
NUM = r"(\d{1,3}|[零〇一二两三四五六七八九十百]{1,4})"


@cache
def data(file_name: str) -> dict[str, Any]:
    path = HERE / file_name
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(loaded, dict):
        raise InputError(path, "", "expected a mapping of word lists")
    return loaded


def strings(file_name: str, key: str) -> tuple[str, ...]:
    items = data(file_name).get(key)
    if not isinstance(items, list) or not all(isinstance(w, str) for w in items):
        raise InputError(HERE / file_name, key, "must be a list of strings")
    return tuple(items)


@cache
def _tagger() -> POSTokenizer:
    with warnings.catch_warnings():
        # jieba 0.42.1 imports setuptools' deprecated pkg_resources to find its dictionary
        warnings.simplefilter("ignore", DeprecationWarning)
        import jieba
        from jieba.posseg import POSTokenizer

    jieba.setLogLevel(logging.WARNING)  # it prints its dictionary load to stderr otherwise
    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    return POSTokenizer(tokenizer)


def _frequency(word: str) -> int:
    freq: dict[str, int] = _tagger().tokenizer.FREQ
    return freq.get(word, 0)


@lru_cache(maxsize=4096)
def tagged(text: str) -> tuple[tuple[str, str], ...]:
    """(word, part-of-speech tag) pairs, in order."""
    return tuple((pair.word, pair.flag) for pair in _tagger().cut(text))


def person_names(text: str) -> list[str]:
    """Words jieba tags as a person's name, in order, once each: two to four characters that
    start with a common surname (two-character ones also rare in its dictionary, unlike 明白),
    without the relation and address words it mistakes for names (孙子, 老公, 阿姨)."""
    relations: dict[str, list[str]] = data(PROSE_WORDS)["relations"]
    skip = set(strings(PROSE_WORDS, "not_names")) | {w for words in relations.values() for w in words}
    family = set(strings(PROSE_WORDS, "surnames"))
    most = int(data(PROSE_WORDS)["max_name_frequency"])
    found = [w for w, tag in tagged(text) if tag in NAME_TAGS for w in (_unglued(w, family),)
             if 2 <= len(w) <= 4 and w not in skip and _CJK.search(w)
             and (w[:1] in family or w[:2] in family) and (len(w) >= 3 or _frequency(w) < most)]
    return list(dict.fromkeys(found))


def _unglued(word: str, family: set[str]) -> str:
    """The name without a word jieba glued before it (连孙强: 孙强): one of prose_words.yaml's
    `glued_before_names`, no surname itself, followed by one."""
    glue = set(strings(PROSE_WORDS, "glued_before_names"))
    if len(word) >= 3 and word[:1] in glue and word[:1] not in family and word[1:2] in family:
        return word[1:]
    return word


def surnames(name: str) -> set[str]:
    """The surname a Chinese name may start with: one character, or two (欧阳, 司马)."""
    return {name[:1], name[:2]} if len(name) >= 3 else {name[:1]}


def name_known(word: str, known: set[str]) -> bool:
    """A name the prose uses is known when it is a known name or part of one (建国 for 王建国),
    or a surname with a title or prefix (王阿姨, 老王)."""
    if any(word in name for name in known):
        return True
    titles = strings(PROSE_WORDS, "name_titles")
    family = {s for name in known if _CJK.search(name) for s in surnames(name)}
    for prefix in strings(PROSE_WORDS, "name_prefixes"):
        if word.startswith(prefix) and word[len(prefix):] in family | {n[-1:] for n in known}:
            return True
    return any(word.startswith(s) and word[len(s):] in titles for s in family)


def parse_number(text: str) -> int | None:
    """Digits or a Chinese numeral up to 999 (五十二, 一百零三, 两)."""
    if text.isdigit():
        return int(text)
    digits: dict[str, int] = data(PROSE_WORDS)["digits"]
    total, current = 0, 0
    for ch in text:
        if ch in digits:
            current = digits[ch]
        elif ch == "十":
            total += (current or 1) * 10
            current = 0
        elif ch == "百":
            total += (current or 1) * 100
            current = 0
        else:
            return None
    return total + current


def relation_group(relation: str) -> str | None:
    """The relation group of a recorded relation: the group of the longest word it ends with."""
    best: tuple[int, str] | None = None
    groups: dict[str, list[str]] = data(PROSE_WORDS)["relations"]
    for group, words in groups.items():
        for word in words:
            if relation.endswith(word) and (best is None or len(word) > best[0]):
                best = (len(word), group)
    return best[1] if best else None


def is_family(relation: str) -> bool:
    return relation_group(relation) in set(strings(PROSE_WORDS, "family_groups"))


def content_words(text: str) -> set[str]:
    """The words of a text that carry its content: two characters or more, not stopwords."""
    stop = set(strings(NEED_CONCEPTS, "stopwords"))
    return {w for w, _ in tagged(text) if len(w) >= 2 and _CJK.search(w) and w not in stop}


@cache
def _concepts() -> dict[str, str]:
    groups: list[list[str]] = data(NEED_CONCEPTS)["groups"]
    return {word: group[0] for group in groups for word in group}


def concept_words(text: str, synonyms: bool = True) -> set[str]:
    words = content_words(text)
    return {_concepts().get(w, w) for w in words} if synonyms else words


def char_runs(text: str, length: int) -> list[str]:
    """Every run of `length` characters in text, punctuation and spaces left out, in order."""
    chars = "".join(_RUN_CHARS.findall(text))
    return [chars[i:i + length] for i in range(len(chars) - length + 1)]


def patterns(file_name: str, key: str) -> tuple[re.Pattern[str], ...]:
    return _patterns(file_name, key)


@cache
def _patterns(file_name: str, key: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in strings(file_name, key))


def first_match(text: str, found: tuple[re.Pattern[str], ...]) -> str | None:
    for pattern in found:
        if match := pattern.search(text):
            return match.group(0)
    return None


_SUBJECT_WORDS = frozenset({"他", "她", "我", "他们", "她们"})


def first_verb(stage: str, subjects: set[str]) -> str:
    """The stage's first verb (jieba tag v...) after its subject and adverbs ("他说…" -> 说)."""
    pairs = [(w, tag) for w, tag in tagged(stage) if w.strip()]
    i = 0
    if pairs and (pairs[0][0] in _SUBJECT_WORDS or any(pairs[0][0] in s for s in subjects)):
        i = 1
    return next((w for w, tag in pairs[i:] if tag.startswith("v")), "")
