"""The affect head: a linear read-out of MiniLM embeddings plus VADER scores (pure numpy).

Two outputs per text, trained by scripts/train_affect_head.py on GoEmotions (see
weights/MODEL_CARD.md): a multi-label emotion layer (one logistic unit per class, each with its
own threshold chosen on the dev split) and a three-way polarity layer whose P(positive) -
P(negative) is the text's valence in [-1, 1]. The weights file's sha256 is recorded in
weights/affect_head.json and checked on load, so a changed or damaged file never scores silently.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from emobench.errors import InputError
from emobench.trackers.lexicon import vader

WEIGHTS_PATH: Final = Path(__file__).parent / "weights" / "affect_head.npz"
NEUTRAL: Final = "neutral"
_ARRAYS = ("classes", "negative", "mean", "scale", "emotion_w", "emotion_b", "thresholds", "valence_w", "valence_b")

Matrix = npt.NDArray[np.float64]


def _expit(z: Matrix) -> Matrix:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)))  # overflow-free logistic


@dataclass(frozen=True)
class AffectHead:
    """Weights of the head; build it with `AffectHead.load()`."""

    classes: tuple[str, ...]
    negative: frozenset[str]  # classes that mark a message as distressed (not a pleasantry)
    thresholds: npt.NDArray[np.float64]
    mean: Matrix
    scale: Matrix
    emotion_w: Matrix
    emotion_b: Matrix
    valence_w: Matrix
    valence_b: Matrix
    sha256: str

    @classmethod
    def load(cls, path: Path = WEIGHTS_PATH, *, check: bool = True) -> AffectHead:
        """Read the weights; with `check`, refuse a file whose sha256 differs from the recorded one."""
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise InputError(path, "", f"cannot read the affect head: {exc.strerror or exc}") from None
        digest = hashlib.sha256(raw).hexdigest()
        if check and digest != recorded_sha256(path):
            raise InputError(path, "", "sha256 differs from the one recorded in affect_head.json; retrain or restore")
        with np.load(path, allow_pickle=False) as data:
            missing = [name for name in _ARRAYS if name not in data]
            if missing:
                raise InputError(path, missing[0], "array missing from the affect head")
            arrays = {name: data[name] for name in _ARRAYS}
        classes = tuple(str(c) for c in arrays["classes"])
        if NEUTRAL not in classes:
            raise InputError(path, "classes", f"expected a {NEUTRAL!r} class")
        f64 = {name: arrays[name].astype(np.float64) for name in _ARRAYS[2:]}
        return cls(
            classes=classes,
            negative=frozenset(c for c, neg in zip(classes, arrays["negative"].tolist(), strict=True) if neg),
            sha256=digest,
            **f64,
        )

    @property
    def version(self) -> str:
        """"affect-head+<first 8 hex of the weights' sha256>", recorded with every score row."""
        return f"affect-head+{self.sha256[:8]}"

    def features(self, embeddings: npt.NDArray[np.floating], texts: Sequence[str]) -> Matrix:
        """Standardised input: the embedding and VADER's compound, pos, neg and neu scores."""
        x = np.hstack([np.asarray(embeddings, dtype=np.float64), np.asarray(vader(texts), dtype=np.float64).reshape(-1, 4)])
        return np.asarray((x - self.mean) / self.scale)

    def emotion_probs(self, embeddings: npt.NDArray[np.floating], texts: Sequence[str]) -> Matrix:
        """P(class) per text and class (independent units: a text can carry several emotions)."""
        return _expit(self.features(embeddings, texts) @ self.emotion_w + self.emotion_b)

    def valence(self, embeddings: npt.NDArray[np.floating], texts: Sequence[str]) -> Matrix:
        """P(positive) - P(negative) per text, in [-1, 1]."""
        z = self.features(embeddings, texts) @ self.valence_w + self.valence_b
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        return np.asarray(p[:, 2] - p[:, 0])

    def labels(self, probs: Sequence[float]) -> tuple[str, ...]:
        """The classes that `fire`, strongest (probability / threshold) first."""
        row = np.asarray(probs, dtype=np.float64)
        on = fire(row[None, :], self.thresholds, self.classes.index(NEUTRAL))[0]
        ratio = row / self.thresholds
        return tuple(self.classes[j] for j in sorted(np.flatnonzero(on), key=lambda j: -ratio[j]))


def fire(probs: Matrix, thresholds: npt.NDArray[np.float64], neutral: int) -> npt.NDArray[np.bool_]:
    """Which classes a text carries: each emotion at or over its threshold, unless the neutral
    unit is over its own and more confident (probability / threshold) than every emotion; and
    neutral alone when no emotion reaches its threshold. Neutral never stands beside an emotion."""
    ratio = probs / thresholds
    emotions = np.delete(ratio, neutral, axis=1)
    is_neutral = (emotions.max(axis=1) < 1.0) | ((ratio[:, neutral] >= 1.0) & (ratio[:, neutral] > emotions.max(axis=1)))
    out = ratio >= 1.0
    out[is_neutral] = False
    out[:, neutral] = is_neutral
    return np.asarray(out)


def recorded_sha256(weights: Path) -> str:
    """The sha256 that `<weights stem>.json` records for the weights file."""
    card = weights.with_suffix(".json")
    try:
        value = json.loads(card.read_text(encoding="utf-8")).get("sha256")
    except (OSError, ValueError) as exc:
        raise InputError(card, "", f"cannot read the affect head's provenance: {exc}") from None
    if not isinstance(value, str):
        raise InputError(card, "sha256", "expected the weights file's sha256")
    return value
