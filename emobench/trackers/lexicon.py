"""Lexicon valence tracker (VADER) and the trajectory helpers shared by the per-turn trackers.

VADER's lexicon ships inside the `vaderSentiment` wheel, so nothing is fetched at run time.
Each user message is scored as a whole: its compound score in [-1, 1].
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from statistics import fmean

import numpy as np
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer


@functools.lru_cache(maxsize=1)
def _analyzer() -> SentimentIntensityAnalyzer:
    # Building it parses the bundled lexicon files (~0.1 s): do it once per process, on first use.
    return SentimentIntensityAnalyzer()


def valence(texts: Sequence[str]) -> list[float]:
    """VADER compound score of each text, in [-1, 1]; an empty text scores 0."""
    analyzer = _analyzer()
    return [float(analyzer.polarity_scores(text)["compound"]) for text in texts]


def third_size(n: int) -> int:
    """How many items each end "third" of an n-item sequence holds: ceil(n / 3).

    Rounding up keeps every end non-empty and never lets the two ends overlap for n >= 2:
    n=1 -> the one item is both thirds; n=2 -> first and last item; n=4 -> the first two and
    the last two; n=5 -> the first two and the last two, the middle item in neither.
    """
    return math.ceil(n / 3)


def thirds(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean of the first third and of the last third of `values` (see `third_size`).

    (None, None) for an empty sequence.
    """
    if not values:
        return None, None
    k = third_size(len(values))
    return fmean(values[:k]), fmean(values[-k:])


def slope(values: Sequence[float]) -> float | None:
    """Least-squares slope of `values` against the turn index 0, 1, 2, ... (units per turn).

    None for fewer than two points. Used for the valence and the emotion-meter trajectories.
    """
    if len(values) < 2:
        return None
    y = np.asarray(values, dtype=np.float64)
    x = np.arange(y.size, dtype=np.float64)
    # Centred closed form of the least-squares fit; x has no repeats, so the denominator is > 0.
    x -= x.mean()
    return float(x @ (y - y.mean()) / (x @ x))
