"""How alike two Chinese texts are in meaning: the cosine of their character 2-3-gram TF-IDF
vectors (sublinear term frequency, smoothed IDF fitted on the texts of the library being
checked), after the words of one idea (similarity.yaml and need_concepts.yaml beside this
module: 理清, 梳理, 弄懂 ...) are folded into one. MiniLM, English's meter, was trained on
English and does not read Chinese.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import cache

from emobench.registry.checks.lang.zh import words as zh_words

SIMILARITY = "similarity.yaml"
_GRAM_CHARS = re.compile(r"[\u4e00-\u9fff0-9A-Za-z]+")


@cache
def _folding() -> tuple[re.Pattern[str], dict[str, str]]:
    groups = [*zh_words.data(SIMILARITY)["groups"], *zh_words.data(zh_words.NEED_CONCEPTS)["groups"]]
    head = {word: group[0] for group in reversed(groups) for word in group}
    words = sorted(head, key=len, reverse=True)  # the longest word first: 理不顺 before 理顺
    return re.compile("|".join(map(re.escape, words))), head


def folded(text: str) -> str:
    """The text with the words of one idea written as that idea's first word, punctuation gone."""
    pattern, head = _folding()
    return "".join(_GRAM_CHARS.findall(pattern.sub(lambda m: head[m.group(0)], text)))


def grams(text: str) -> list[str]:
    chars = folded(text)
    return [chars[i:i + n] for n in (2, 3) for i in range(len(chars) - n + 1)]


class ChineseMeter:
    """Character 2-3-gram TF-IDF cosines, the IDF fitted on a corpus (the library's texts)."""

    def __init__(self, corpus: Sequence[str]) -> None:
        self._docs = len(corpus)
        self._df = Counter(g for text in corpus for g in set(grams(text)))
        self._vectors: dict[str, dict[str, float]] = {}

    def _vector(self, text: str) -> dict[str, float]:
        if text not in self._vectors:  # a story is compared with every story of the other side
            self._vectors[text] = self._weigh(text)
        return self._vectors[text]

    def _weigh(self, text: str) -> dict[str, float]:
        weights = {g: (1 + math.log(n)) * math.log((1 + self._docs) / (1 + self._df.get(g, 0)))
                   for g, n in Counter(grams(text)).items()}
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        return {g: w / norm for g, w in weights.items()}

    def cosines(self, a: Sequence[str], b: Sequence[str]) -> list[float]:
        out = []
        for x, y in zip(a, b, strict=True):
            u, v = self._vector(x), self._vector(y)
            out.append(sum(w * v.get(g, 0.0) for g, w in u.items()))
        return out
