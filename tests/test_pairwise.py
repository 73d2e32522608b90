"""Bradley-Terry ratings and case-resampled bootstrap CIs on simulated comparisons."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from emobench.scoring.pairwise import bradley_terry, bradley_terry_ci

COLUMNS = ["case_id", "subject_a", "subject_b", "winner"]
# Log-strengths: an Elo-like gap of 400 log10(e) * 0.7 = 304 points between neighbours.
TRUE_THETA = {"weak": -1.0, "fair": -0.3, "good": 0.4, "best": 1.1}


def _simulate(n_cases: int, seed: int) -> pd.DataFrame:
    """Every pair of subjects on every case, in both orders, winners drawn from Bradley-Terry."""
    rng = np.random.default_rng(seed)
    names = list(TRUE_THETA)
    rows = []
    for case in range(n_cases):
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                p_a = 1.0 / (1.0 + math.exp(TRUE_THETA[b] - TRUE_THETA[a]))
                for first, second in ((a, b), (b, a)):
                    rows.append((f"case-{case}", first, second, a if rng.random() < p_a else b))
    return pd.DataFrame(rows, columns=COLUMNS)


def test_recovers_the_order_of_known_strengths() -> None:
    ratings = bradley_terry(_simulate(120, seed=7))
    assert list(ratings.index) == ["best", "good", "fair", "weak"]
    assert ratings.mean() == pytest.approx(1000.0)
    # Gaps near the true 400 log10(e) * (theta_i - theta_j): best - weak = 0.4343 * 400 * 2.1 = 365
    assert ratings["best"] - ratings["weak"] == pytest.approx(400 * 2.1 / math.log(10), rel=0.15)


def test_two_subjects_match_the_closed_form() -> None:
    # 300 wins to 100: the MLE gap is 400 log10(300/100) = 190.85; the one virtual game of
    # the prior shrinks it only slightly.
    rows = [(f"c{i}", "a", "b", "a" if i < 300 else "b") for i in range(400)]
    ratings = bradley_terry(pd.DataFrame(rows, columns=COLUMNS))
    assert ratings["a"] - ratings["b"] == pytest.approx(400 * math.log10(3), abs=1.0)
    assert ratings["a"] - ratings["b"] < 400 * math.log10(3)
    assert ratings.mean() == pytest.approx(1000.0)


def test_even_record_gives_equal_ratings() -> None:
    rows = [("c1", "a", "b", "a"), ("c1", "b", "a", "b"), ("c2", "a", "b", "b"), ("c2", "b", "a", "a")]
    ratings = bradley_terry(pd.DataFrame(rows, columns=COLUMNS))
    assert ratings["a"] == pytest.approx(1000.0) and ratings["b"] == pytest.approx(1000.0)


def test_a_subject_that_always_wins_stays_finite() -> None:
    rows = [(f"c{i}", "top", other, "top") for i in range(30) for other in ("x", "y")]
    rows += [(f"c{i}", "x", "y", "x" if i % 2 else "y") for i in range(30)]
    ratings = bradley_terry(pd.DataFrame(rows, columns=COLUMNS))
    assert np.isfinite(ratings).all()
    assert ratings.index[0] == "top"
    assert ratings["x"] == pytest.approx(ratings["y"])
    assert ratings.mean() == pytest.approx(1000.0)


def test_invalid_verdicts_are_left_out_and_bad_rows_rejected() -> None:
    rows = [("c1", "a", "b", "a"), ("c2", "a", "b", None)]
    with_invalid = bradley_terry(pd.DataFrame(rows, columns=COLUMNS))
    only_valid = bradley_terry(pd.DataFrame(rows[:1], columns=COLUMNS))
    pd.testing.assert_series_equal(with_invalid, only_valid)
    with pytest.raises(ValueError):
        bradley_terry(pd.DataFrame([("c1", "a", "b", "z")], columns=COLUMNS))
    with pytest.raises(ValueError):
        bradley_terry(pd.DataFrame([("c1", "a", "b", None)], columns=COLUMNS))
    with pytest.raises(ValueError):
        bradley_terry(pd.DataFrame([(None, "a", "b", "a")], columns=COLUMNS))
    with pytest.raises(ValueError):
        bradley_terry(pd.DataFrame({"case_id": ["c1"]}))


def test_ci_contains_the_estimate_and_is_reproducible() -> None:
    df = _simulate(40, seed=3)
    ci = bradley_terry_ci(df, n_boot=300, seed=11)
    assert list(ci.columns) == ["subject", "rating", "lo", "hi"]
    assert list(ci["subject"]) == ["best", "good", "fair", "weak"]
    point = bradley_terry(df)
    assert ci.set_index("subject")["rating"].to_numpy() == pytest.approx(point.to_numpy())
    assert ((ci["lo"] <= ci["rating"]) & (ci["rating"] <= ci["hi"])).all()
    assert (ci["hi"] - ci["lo"] > 0).all()
    pd.testing.assert_frame_equal(ci, bradley_terry_ci(df, n_boot=300, seed=11))
    assert not bradley_terry_ci(df, n_boot=300, seed=12).equals(ci)


def test_ci_narrows_with_more_cases() -> None:
    small = bradley_terry_ci(_simulate(20, seed=5), n_boot=200, seed=0)
    large = bradley_terry_ci(_simulate(200, seed=5), n_boot=200, seed=0)
    assert ((large["hi"] - large["lo"]).mean()) < ((small["hi"] - small["lo"]).mean())


def test_ci_resamples_whole_cases() -> None:
    # One case holds every comparison: each replicate redraws that case, so the interval is a point.
    rows = [("only", "a", "b", "a"), ("only", "b", "a", "a"), ("only", "a", "b", "b")]
    ci = bradley_terry_ci(pd.DataFrame(rows, columns=COLUMNS), n_boot=50)
    assert ci["lo"].to_numpy() == pytest.approx(ci["rating"].to_numpy())
    assert ci["hi"].to_numpy() == pytest.approx(ci["rating"].to_numpy())


def test_ci_rejects_bad_arguments() -> None:
    df = _simulate(3, seed=0)
    with pytest.raises(ValueError):
        bradley_terry_ci(df, n_boot=0)
    with pytest.raises(ValueError):
        bradley_terry_ci(df, ci=1.0)
