"""VADER's lexicon scores, one of the affect head's inputs.

VADER's lexicon ships inside the `vaderSentiment` wheel, so nothing is fetched at run time.
On its own it misreads negation and mixed messages ("I don't know how to find confidence."
scores +0.51), so the valence the trackers report is the affect head's (affect.valence), which
takes VADER's scores as four of its inputs beside the MiniLM embedding (docs/trackers.md).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer


@functools.lru_cache(maxsize=1)
def _analyzer() -> SentimentIntensityAnalyzer:
    # Building it parses the bundled lexicon files (~0.1 s): do it once per process, on first use.
    return SentimentIntensityAnalyzer()


def vader(texts: Sequence[str]) -> list[tuple[float, float, float, float]]:
    """VADER's (compound, pos, neg, neu) for each text; an empty text is (0, 0, 0, 0)."""
    analyzer = _analyzer()
    out = []
    for text in texts:
        s = analyzer.polarity_scores(text)
        out.append((float(s["compound"]), float(s["pos"]), float(s["neg"]), float(s["neu"])))
    return out

