"""Trajectory maths over a per-turn series: thirds, least-squares slope, and the valence
trajectory that leaves closing pleasantries out of the end point. Pure functions, no I/O."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

import numpy as np


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


def trailing_closings(closing: Sequence[bool]) -> int:
    """How many turns at the end are closing pleasantries; 0 when every turn is one (then
    there is nothing else to measure, and the turns are kept rather than leaving no end point)."""
    n = 0
    for flag in reversed(closing):
        if not flag:
            return n
        n += 1
    return 0


@dataclass(frozen=True)
class ValenceTrajectory:
    """Change in valence over the user's turns, the final pleasantries left out.

    `first`/`last` are the means of the first and last third of the measured turns; `slope` is
    their least-squares slope per turn (None for fewer than two measured turns).
    """

    first: float | None
    last: float | None
    slope: float | None
    closing_turns: int  # trailing pleasantries left out


def valence_trajectory(valences: Sequence[float], closing: Sequence[bool]) -> ValenceTrajectory:
    if len(valences) != len(closing):
        raise ValueError(f"{len(valences)} valences for {len(closing)} closing flags")
    cut = trailing_closings(closing)
    measured = list(valences[: len(valences) - cut])
    first, last = thirds(measured)
    return ValenceTrajectory(first=first, last=last, slope=slope(measured), closing_turns=cut)
