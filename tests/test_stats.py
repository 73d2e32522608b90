"""emobench.scoring.stats: bootstrap by case, Wilson, MDD; coverage and power by simulation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from emobench.gate.compare import is_regression
from emobench.scoring.stats import (
    bootstrap_case_means,
    cases_needed,
    effective_trials,
    minimum_detectable_difference,
    paired_difference,
    wilson_interval,
)

ONE = np.intp


def _one_stratum(n: int) -> list[np.ndarray]:
    return [np.zeros(n, dtype=ONE)]


def test_wilson_matches_textbook_values() -> None:
    lo, hi = wilson_interval(0.5, 100)
    assert (float(lo), float(hi)) == pytest.approx((0.40383, 0.59617), abs=1e-5)
    lo, hi = wilson_interval(0.0, 10)
    assert (float(lo), float(hi)) == pytest.approx((0.0, 0.27753), abs=1e-5)


@given(st.integers(0, 500), st.integers(1, 500))
def test_wilson_brackets_the_estimate(k: int, n: int) -> None:
    k = min(k, n)
    lo, hi = wilson_interval(k / n, n)
    assert 0.0 <= lo <= k / n + 1e-12 and k / n - 1e-12 <= hi <= 1.0


def test_effective_trials_bounded_by_cases_and_episodes() -> None:
    p = np.array([0.5, 0.5, 0.0, 0.5])
    var = np.array([1e-9, 1.0, 0.0, 0.25 / 150])
    n_eff = effective_trials(p, var, np.full(4, 50.0), np.full(4, 150.0))
    assert n_eff.tolist() == [150.0, 50.0, 50.0, pytest.approx(150.0)]


def test_bootstrap_point_is_the_mean_and_missing_values_drop_out() -> None:
    rng = np.random.default_rng(0)
    v = rng.normal(50, 10, (40, 3))
    v[:5, 1] = np.nan
    est = bootstrap_case_means(v, _one_stratum(40), n_boot=500, seed=1)[0]
    assert est.point[0] == pytest.approx(np.nanmean(v, axis=0))
    assert np.all(est.lo[0] < est.point[0]) and np.all(est.point[0] < est.hi[0])


def test_bootstrap_is_seeded() -> None:
    v = np.random.default_rng(0).normal(size=(30, 2))
    a = bootstrap_case_means(v, _one_stratum(30), n_boot=300, seed=7)[0]
    b = bootstrap_case_means(v, _one_stratum(30), n_boot=300, seed=7)[0]
    c = bootstrap_case_means(v, _one_stratum(30), n_boot=300, seed=8)[0]
    assert np.array_equal(a.lo, b.lo) and np.array_equal(a.hi, b.hi)
    assert not np.array_equal(a.lo, c.lo)


def test_bootstrap_resamples_within_strata() -> None:
    # Stratum 0 is constant: a within-stratum resample can never move its mean.
    v = np.r_[np.full(10, 3.0), np.arange(20.0)][:, None]
    codes = np.r_[np.zeros(10, dtype=ONE), np.ones(20, dtype=ONE)]
    flat, strat = bootstrap_case_means(v, [np.zeros(30, dtype=ONE), codes], n_boot=400, seed=0)
    assert strat.point[:, 0].tolist() == [3.0, 9.5]
    assert strat.lo[0, 0] == pytest.approx(3.0) and strat.hi[0, 0] == pytest.approx(3.0)
    assert strat.lo[1, 0] < 9.5 < strat.hi[1, 0]
    assert flat.point[0, 0] == pytest.approx(v.mean())


def test_bootstrap_ci_covers_the_truth_95_percent() -> None:
    """1,200 independent synthetic benchmarks drawn from known truths, all seeded.

    Each has 100 cases with a case effect and 3 seeds per case; the estimand is the population
    mean of the per-case means (the truth, 60). Columns are independent datasets, evaluated in
    one vectorised call per batch with its own bootstrap seed.
    """
    truth, covered, total = 60.0, 0, 0
    for batch in range(4):
        rng = np.random.default_rng([2024, batch])
        reps, cases, seeds = 300, 100, 3
        case_effect = rng.normal(0, 8, (cases, reps))
        episodes = truth + case_effect[..., None] + rng.normal(0, 6, (cases, reps, seeds))
        per_case = episodes.mean(axis=2)
        est = bootstrap_case_means(per_case, _one_stratum(cases), n_boot=1000, seed=batch)[0]
        covered += int(((est.lo[0] <= truth) & (truth <= est.hi[0])).sum())
        total += reps
    assert 0.93 <= covered / total <= 0.97, covered / total


def test_paired_difference_and_mdd() -> None:
    d = np.random.default_rng(3).normal(-1.0, 4.0, 200)
    res = paired_difference(d, n_boot=2000, seed=0)
    assert res.n == 200 and res.mean == pytest.approx(d.mean())
    assert res.lo < res.mean < res.hi
    assert res.mdd == pytest.approx(2.8016 * d.std(ddof=1) / np.sqrt(200), rel=1e-4)
    with pytest.raises(ValueError):
        paired_difference(np.array([1.0]), n_boot=10, seed=0)


def test_cases_needed_is_the_smallest_n_reaching_the_difference() -> None:
    sd, delta = 7.5, 1.3
    n = cases_needed(delta, sd)
    assert minimum_detectable_difference(sd, n) <= delta
    assert minimum_detectable_difference(sd, n - 1) > delta


def test_gate_power_at_the_mdd_is_about_80_percent() -> None:
    """A true regression of exactly one MDD is caught about 80% of the time (two-sided 0.05)."""
    rng = np.random.default_rng(11)
    reps, cases, sd = 800, 80, 5.0
    mdd = minimum_detectable_difference(sd, cases)
    diffs = rng.normal(-mdd, sd, (cases, reps))
    est = bootstrap_case_means(diffs, _one_stratum(cases), n_boot=1000, seed=5)[0]
    power = float(is_regression(est.point[0], est.hi[0], 0.0).mean())
    assert 0.74 <= power <= 0.86, power
