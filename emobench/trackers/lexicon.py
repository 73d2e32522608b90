"""Per-turn valence: VADER's lexicon scores, and the combined valence the trackers report.

VADER's lexicon ships inside the `vaderSentiment` wheel, so nothing is fetched at run time.
On its own it misreads negation and mixed messages ("I don't know how to find confidence."
scores +0.51), so `valence` reads each text with the affect head, which takes VADER's scores
as four of its inputs beside the MiniLM embedding (see head.py and docs/trackers.md).
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


def valence(texts: Sequence[str]) -> list[float]:
    """The trackers' valence of each text, in [-1, 1] (0 for a blank text): the affect head's
    P(positive) - P(negative). Loads the encoder and the head once per process."""
    # Deferred: the affect tracker imports this module for `vader`, and loading it costs seconds.
    from emobench.trackers.affect import default_tracker

    return [reading.valence for reading in default_tracker().read(texts)]
