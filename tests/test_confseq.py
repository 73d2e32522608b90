"""The anytime-valid confidence sequence (emobench.scoring.confseq, docs/method.md §5.9)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.scoring.confseq import SequenceInterval, mean_sequence, sequence_bounds, sequence_path

REFERENCE = Path(__file__).parent / "data" / "confseq_reference.json"
STEP = 1 / 2048  # the grid step on the unit scale: endpoints are exact up to one step


@pytest.mark.parametrize("case", json.loads(REFERENCE.read_text())["cases"], ids=["skewed", "u-shaped", "flat"])
def test_matches_confseq_betting_cs(case):
    """Known values: confseq's own betting intervals (bench/confseq_reference.py) on three populations."""
    lower, upper = sequence_bounds(case["values"], lo=0.0, hi=1.0, population=case["population"], alpha=case["alpha"])
    np.testing.assert_allclose(lower[0], case["lower"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(upper[0], case["upper"], rtol=0, atol=1e-12)


def _hoeffding_wor(x: np.ndarray, population: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """An independent, cruder valid sequence: Hoeffding's bound for sampling without replacement
    with predictable bets (each step's value minus the unplayed cases' mean is a martingale
    difference in an interval of length 1), two-sided at alpha/2 each, running intersection."""
    t = np.arange(1, x.size + 1)
    lam = np.minimum(np.sqrt(8 * math.log(2 / alpha) / (t * np.log1p(t))), 1.0)
    before = np.concatenate([[0.0], np.cumsum(x)[:-1]])
    weight = population / (population - t + 1)
    centre = np.cumsum(lam * (x + before / (population - t + 1))) / np.cumsum(lam * weight)
    half = (math.log(2 / alpha) + np.cumsum(lam**2 / 8)) / np.cumsum(lam * weight)
    return np.maximum.accumulate(centre - half), np.minimum.accumulate(centre + half)


@pytest.mark.parametrize("shape", [(5.0, 3.0), (2.0, 2.0), (8.0, 8.0)])
def test_narrower_than_hoeffding_and_holds_the_sample_mean(shape):
    rng = np.random.default_rng(7)
    population = 60
    x = rng.permutation(rng.beta(shape[0], shape[1], population))
    lower, upper = sequence_bounds(x, lo=0.0, hi=1.0, population=population)
    h_lower, h_upper = _hoeffding_wor(x, population, 0.05)
    mean_so_far = np.cumsum(x) / np.arange(1, population + 1)
    assert np.all(lower[0] <= mean_so_far + 1e-12) and np.all(mean_so_far - 1e-12 <= upper[0])
    # After the first few cases (when both are still near the whole range) betting is inside Hoeffding's.
    assert np.all(lower[0, 5:] >= h_lower[5:] - STEP) and np.all(upper[0, 5:] <= h_upper[5:] + STEP)
    # Low-variance data: betting is much narrower, not merely no wider.
    assert (upper[0, 29] - lower[0, 29]) < 0.8 * (h_upper[29] - h_lower[29])


def test_coverage_under_optional_stopping():
    """Stop at the first wave of 5 whose interval excludes 0, as an eager user would: the
    sequence still covers the finite population's mean (a fixed-n normal interval does not)."""
    rng = np.random.default_rng(11)
    population = 30
    pop = np.clip(rng.normal(0.08, 0.35, population), -1, 1)  # small true difference, noisy cases
    truth = pop.mean()
    runs = np.array([rng.permutation(pop) for _ in range(200)])
    lower, upper = sequence_bounds(runs, lo=-1.0, hi=1.0, population=population)
    waves = np.arange(4, population, 5)
    resolved = (lower[:, waves] > 0) | (upper[:, waves] < 0)
    stop = np.where(resolved.any(axis=1), waves[np.argmax(resolved, axis=1)], population - 1)
    rows = np.arange(runs.shape[0])
    covered = (lower[rows, stop] <= truth + 1e-12) & (truth - 1e-12 <= upper[rows, stop])
    assert covered.mean() >= 0.95
    # The same stopping rule with a fixed-n 95% normal interval misses far more often.
    n = waves + 1
    mean = np.cumsum(runs, axis=1)[:, waves] / n
    sd = np.stack([runs[:, :k].std(axis=1, ddof=1) for k in n], axis=1)
    naive_lo, naive_hi = mean - 1.96 * sd / np.sqrt(n), mean + 1.96 * sd / np.sqrt(n)
    naive_resolved = (naive_lo > 0) | (naive_hi < 0)
    naive_stop = np.where(naive_resolved.any(axis=1), np.argmax(naive_resolved, axis=1), n.size - 1)
    naive_cover = (naive_lo[rows, naive_stop] <= truth) & (truth <= naive_hi[rows, naive_stop])
    assert naive_cover.mean() < covered.mean()


def test_interval_record():
    iv = mean_sequence([3.0, 4.0, 3.5], lo=0.0, hi=5.0, population=20, alpha=0.1)
    assert isinstance(iv, SequenceInterval)
    assert (iv.n, iv.population, iv.alpha) == (3, 20, 0.1)
    assert iv.half_width == pytest.approx((iv.upper - iv.lower) / 2)
    assert iv.excludes(0.0) and not iv.excludes(iv.lower) and iv.excludes(iv.upper + 1e-9)
    empty = mean_sequence([], lo=0.0, hi=5.0, population=20)
    assert (empty.lower, empty.upper, empty.n) == (0.0, 5.0, 0)
    assert sequence_path([], lo=0.0, hi=5.0, population=20) == []


@pytest.mark.parametrize(("values", "kwargs", "message"), [
    ([0.5, 1.5], {}, "outside"),
    ([0.5, float("nan")], {}, "outside"),
    ([0.5] * 4, {"population": 3}, "exceed the population"),
    ([0.5], {"lo": 1.0, "hi": 1.0}, "lo < hi"),
    ([0.5], {"alpha": 1.0}, "alpha"),
    ([0.5], {"population": 0}, "population"),
])
def test_bad_input(values, kwargs, message):
    args = {"lo": 0.0, "hi": 1.0, "population": 10, **kwargs}
    with pytest.raises(ValueError, match=message):
        mean_sequence(values, **args)


# A population of 1..40 cases in [0, 1], and how many of them have been played.
populations = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40)


@settings(max_examples=30, deadline=None)
@given(pop=populations, data=st.data())
def test_properties(pop, data):
    n = data.draw(st.integers(1, len(pop)))
    alpha = data.draw(st.sampled_from([0.01, 0.05, 0.2]))
    x = np.array(pop[:n])
    path = sequence_path(x, lo=0.0, hi=1.0, population=len(pop), alpha=alpha)
    lows = np.array([p.lower for p in path])
    highs = np.array([p.upper for p in path])
    # Inside the range, never inverted, nested (running intersection) up to rounding; an order
    # that contradicts random play may empty the betting set, and then the interval is a point.
    assert np.all((lows >= 0) & (lows <= highs) & (highs <= 1))
    point = highs - lows <= 1e-12
    contradicted = np.argmax(point) if point.any() and point[np.argmax(point):].all() else n
    assert np.all(np.diff(lows[:contradicted + 1]) >= -1e-12)
    assert np.all(np.diff(highs[:contradicted + 1]) <= 1e-12)
    # Each interval uses only what was seen by then: a prefix gives the same interval.
    k = data.draw(st.integers(1, n))
    assert mean_sequence(x[:k], lo=0.0, hi=1.0, population=len(pop), alpha=alpha) == path[k - 1]
    # Whatever the unplayed cases are, they lie in [0, 1]: no wider than what that forces.
    assert lows[-1] >= x.sum() / len(pop) - 1e-12
    assert highs[-1] <= (x.sum() + len(pop) - n) / len(pop) + 1e-12


def test_contradicted_order_becomes_a_point_that_ends_at_the_mean():
    """Seven failures then 23 successes is no random order: the betting set empties (allowed: it
    promises coverage under random play only), the interval is then a point, and the full grid
    still ends at the exact mean, which the values force."""
    order = np.r_[np.zeros(7), np.ones(23)]
    path = sequence_path(order, lo=0.0, hi=1.0, population=30)
    assert any(p.excludes(23 / 30) for p in path)
    first = next(i for i, p in enumerate(path) if p.lower == p.upper)
    assert first < 25 and all(p.lower == p.upper for p in path[first:])
    assert path[-1].lower == pytest.approx(23 / 30, abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(pop=populations)
def test_collapses_to_the_population_mean(pop):
    iv = mean_sequence(pop, lo=0.0, hi=1.0, population=len(pop))
    assert iv.lower == pytest.approx(np.mean(pop), abs=1e-12)
    assert iv.upper == pytest.approx(np.mean(pop), abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(pop=populations, scale=st.floats(0.01, 100.0), shift=st.floats(-100.0, 100.0))
def test_affine_and_reflection(pop, scale, shift):
    n = max(1, len(pop) // 2)
    x = np.array(pop[:n])
    base = mean_sequence(x, lo=0.0, hi=1.0, population=len(pop))
    moved = mean_sequence(scale * x + shift, lo=shift, hi=scale + shift, population=len(pop))
    tol = STEP * scale + 1e-9 * (1 + abs(shift))
    assert moved.lower == pytest.approx(scale * base.lower + shift, abs=tol)
    assert moved.upper == pytest.approx(scale * base.upper + shift, abs=tol)
    flipped = mean_sequence(1.0 - x, lo=0.0, hi=1.0, population=len(pop))
    assert flipped.lower == pytest.approx(1.0 - base.upper, abs=STEP + 1e-9)
    assert flipped.upper == pytest.approx(1.0 - base.lower, abs=STEP + 1e-9)
