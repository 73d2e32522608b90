"""Anytime-valid confidence sequences for the mean of a finite case library (docs/method.md §5.9).

A case library is a finite population: N cases, each with one bounded value (a subject's
per-case EPM-Q, or a pair's per-case difference). Played in a random order, the first n values
are a sample drawn without replacement. The sequence here is the betting construction for that
setting (Waudby-Smith and Ramdas): for every candidate mean m, two gamblers bet that the next
value lies above / below the mean of the cases not yet played *if* the population mean were m.
Their wealth is a nonnegative martingale when m is the truth, so by Ville's inequality it ever
reaches 2/alpha with probability at most alpha/2. The interval keeps the m at which neither has
got rich, at every time so far (running intersection), so it holds simultaneously over all n and
a run may stop whenever the data say so.

Pure numpy. The candidates are a grid over the value range, and endpoints are rounded outward to
it (a valid interval can only grow), at most one grid step (range / _GRID) wide of the exact set.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

# Grid steps per unit range: endpoints are at most 1/_GRID of (hi - lo) wider than exact.
_GRID = 2048
# Bet cap as a share of the largest bet that cannot bankrupt (the papers use 1/2 or 3/4).
_CAP = 0.5
# Runs per block in the batched path: keeps the (runs x grid) work arrays in cache.
_BLOCK = 64


@dataclass(frozen=True)
class SequenceInterval:
    """The confidence sequence's interval after `n` of `population` cases."""

    lower: float
    upper: float
    n: int
    population: int
    alpha: float

    def excludes(self, value: float = 0.0) -> bool:
        return value < self.lower or value > self.upper

    @property
    def half_width(self) -> float:
        return (self.upper - self.lower) / 2


def mean_sequence(
    values: Sequence[float] | np.ndarray, *, lo: float, hi: float, population: int, alpha: float = 0.05,
) -> SequenceInterval:
    """Anytime-valid (1-alpha) interval for the mean of `population` values in [lo, hi], sampled
    without replacement in random order; `values` are the observations so far, in order.

    The interval is the running intersection up to len(values): valid simultaneously over all n,
    so it may be recomputed after every wave and the run stopped at a data-dependent time.
    """
    y = _checked(values, lo, hi, population, alpha)
    if y.size == 0:
        return SequenceInterval(float(lo), float(hi), 0, population, alpha)
    return sequence_path(y, lo=lo, hi=hi, population=population, alpha=alpha)[-1]


def sequence_path(
    values: Sequence[float] | np.ndarray, *, lo: float, hi: float, population: int, alpha: float = 0.05,
) -> list[SequenceInterval]:
    """The interval after each observation (for simulations and plots)."""
    y = _checked(values, lo, hi, population, alpha)
    lower, upper = sequence_bounds(y, lo=lo, hi=hi, population=population, alpha=alpha)
    return [SequenceInterval(float(a), float(b), i + 1, population, alpha)
            for i, (a, b) in enumerate(zip(lower[0], upper[0], strict=True))]


def sequence_bounds(
    values: ArrayLike, *, lo: float, hi: float, population: int, alpha: float = 0.05,
) -> tuple[FloatArray, FloatArray]:
    """Batched path: `values` of shape (runs, n) or (n,) -> (lower, upper), each (runs, n).

    Row r, column t is the interval after t + 1 observations of run r; runs are independent.
    """
    y = _checked(values, lo, hi, population, alpha)
    y = np.atleast_2d(y)
    unit = (y - lo) / (hi - lo)
    # What the values seen force whatever the rest are: every unplayed case lies in [0, 1].
    seen = np.cumsum(unit, axis=1)
    forced_low = seen / population
    forced_high = (seen + population - np.arange(1, unit.shape[1] + 1)) / population
    # Running max / min: the forced bounds are nested too, but only up to rounding.
    low = np.maximum.accumulate(np.maximum(_lower_unit(unit, population, alpha), forced_low), axis=1)
    # The upper end is the lower end of the reflected values, so the two ends are one code path.
    high = np.minimum.accumulate(np.minimum(1.0 - _lower_unit(1.0 - unit, population, alpha), forced_high), axis=1)
    _settle_crossings(low, high, forced_low, forced_high)
    span = hi - lo
    return lo + span * low, lo + span * high


def _settle_crossings(low: FloatArray, high: FloatArray, forced_low: FloatArray, forced_high: FloatArray) -> None:
    """In place: where the ends cross (the betting set is empty), a point instead.

    Under random play the truth stays inside with probability >= 1 - alpha, so crossing means
    the order contradicts random play (or an alpha-rare draw). Then the interval is a point: the
    crossing's midpoint kept inside the last interval, and from then on moved only as far as the
    values force (which nothing can contradict), so a full grid still ends at the exact mean.
    """
    for r in np.flatnonzero((low > high).any(axis=1)):
        first = int(np.argmax(low[r] > high[r]))
        point = (low[r, first] + high[r, first]) / 2
        if first > 0:
            point = min(max(point, low[r, first - 1]), high[r, first - 1])
        for t in range(first, low.shape[1]):
            point = min(max(point, forced_low[r, t]), forced_high[r, t])
            low[r, t] = high[r, t] = point


def _checked(values: ArrayLike, lo: float, hi: float, population: int, alpha: float) -> FloatArray:
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"confidence sequence: need finite lo < hi, got lo={lo}, hi={hi}")
    if not 0 < alpha < 1:
        raise ValueError(f"confidence sequence: alpha must be in (0, 1), got {alpha}")
    if isinstance(population, bool) or not isinstance(population, int | np.integer) or population < 1:
        raise ValueError(f"confidence sequence: population must be a positive integer, got {population!r}")
    y = np.asarray(values, dtype=np.float64)
    if y.ndim not in (1, 2):
        raise ValueError(f"confidence sequence: values must be 1-d (or 2-d runs x n), got shape {y.shape}")
    if y.shape[-1] > population:
        raise ValueError(f"confidence sequence: {y.shape[-1]} observations exceed the population of {population}")
    bad = ~((y >= lo) & (y <= hi))  # NaN is outside too
    if bad.any():
        first = y[bad].flat[0]
        raise ValueError(f"confidence sequence: value {first} outside [{lo}, {hi}]")
    return y


def _plugin_bets(y: FloatArray, alpha: float) -> FloatArray:
    """Predictable bet sizes: bet t uses only values before t (shape as y, values in [0, 1])."""
    runs, n = y.shape
    t = np.arange(1, n + 1, dtype=np.float64)
    # Regularised running mean and variance (a pseudo-observation at 1/2 with variance 1/4).
    mean = (0.5 + np.cumsum(y, axis=1)) / (t + 1)
    var = (0.25 + np.cumsum((y - mean) ** 2, axis=1)) / (t + 1)
    var_before = np.concatenate([np.full((runs, 1), 0.25), var[:, :-1]], axis=1)
    return np.sqrt(2 * math.log(2 / alpha) / (var_before * t * np.log1p(t)))


def _lower_unit(y: FloatArray, population: int, alpha: float) -> FloatArray:
    """Lower ends (running max) on the unit scale: the largest candidate mean the upward
    gambler has ever rejected (0 while none)."""
    out = np.empty_like(y)
    for start in range(0, y.shape[0], _BLOCK):
        out[start:start + _BLOCK] = _lower_block(y[start:start + _BLOCK], population, alpha)
    return out


def _lower_block(y: FloatArray, population: int, alpha: float) -> FloatArray:
    runs, n = y.shape
    grid = np.linspace(0.0, 1.0, _GRID + 1)
    bets = _plugin_bets(y, alpha)
    before = np.concatenate([np.zeros((runs, 1)), np.cumsum(y, axis=1)[:, :-1]], axis=1)
    threshold = 2 / alpha
    wealth = np.ones((runs, grid.size))
    rest = np.empty_like(wealth)
    bet = np.empty_like(wealth)
    rejected = np.full(runs, -1)
    out = np.empty((runs, n))
    for i in range(n):
        # Mean of the N - i cases not yet played, if the population mean were m (clipped: an m
        # outside the feasible range is excluded by the forced bounds anyway).
        np.multiply(grid, population / (population - i), out=rest)
        rest -= before[:, i:i + 1] / (population - i)
        np.clip(rest, 0.0, 1.0, out=rest)
        # Capping the bet at _CAP / rest keeps every factor >= 1 - _CAP > 0; each factor falls
        # as m grows, so the rejected candidates are always a prefix of the grid.
        np.maximum(rest, 1e-300, out=bet)
        np.divide(_CAP, bet, out=bet)
        np.minimum(bet, bets[:, i:i + 1], out=bet)
        np.subtract(y[:, i:i + 1], rest, out=rest)
        rest *= bet
        rest += 1.0
        wealth *= rest
        # Once rejected a candidate stays rejected, so capping its wealth loses nothing and
        # keeps the product finite; underflow to 0 only keeps candidates (conservative).
        np.minimum(wealth, threshold, out=wealth)
        # Rejected candidates form a prefix, so their count locates its end (were rounding
        # ever to break the prefix, the count only moves the end down: conservative).
        rejected = np.maximum(rejected, np.count_nonzero(wealth >= threshold, axis=1) - 1)
        out[:, i] = np.where(rejected >= 0, grid[np.maximum(rejected, 0)], 0.0)
    return out
