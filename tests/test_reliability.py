"""Judge reliability statistics on constructed data with known answers."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from emobench.scoring.reliability import EXACT_MAX, krippendorff_alpha, position_flip_rate, spearman, spearman_rho

nan = np.nan


def test_alpha_perfect_agreement_is_one() -> None:
    ratings = np.array([[0, 1, 2, 2, 1], [0, 1, 2, 2, 1], [0, 1, 2, 2, 1]], dtype=float)
    for level in ("nominal", "ordinal", "interval"):
        assert krippendorff_alpha(ratings, level) == pytest.approx(1.0)


def test_alpha_nominal_by_hand() -> None:
    # Judges x units: J1 = 1 1 2 2, J2 = 1 2 2 2.
    # Coincidences (each unit adds both ordered pairs, weight 1/(m_u - 1) = 1):
    #   unit 1 (1,1): o11 += 2; unit 2 (1,2): o12 += 1, o21 += 1; units 3, 4 (2,2): o22 += 4
    #   n1 = 3, n2 = 5, n = 8
    # alpha = 1 - (n - 1) * sum_{c!=k} o_ck / sum_{c!=k} n_c n_k = 1 - 7 * 2 / (2 * 3 * 5) = 8/15
    ratings = np.array([[1, 1, 2, 2], [1, 2, 2, 2]], dtype=float)
    assert krippendorff_alpha(ratings, "nominal") == pytest.approx(8 / 15)


def test_alpha_ordinal_by_hand() -> None:
    # J1 = 0 1 2 2, J2 = 0 2 2 1 (levels 0..2 as in MDEP).
    # Coincidences: o00 = 2, o12 = o21 = 2, o22 = 2; n0 = 2, n1 = 2, n2 = 4, n = 8.
    # Ordinal delta(c,k) = (sum_{g=c..k} n_g - (n_c + n_k)/2)^2:
    #   delta01 = (4 - 2)^2 = 4, delta12 = (6 - 3)^2 = 9, delta02 = (8 - 3)^2 = 25
    # observed  sum o_ck delta = 2*9 + 2*9 = 36
    # expected  sum n_c n_k delta = 2 * (2*2*4 + 2*4*25 + 2*4*9) = 576
    # alpha = 1 - (n - 1) * 36 / 576 = 1 - 252/576 = 0.5625
    ratings = np.array([[0, 1, 2, 2], [0, 2, 2, 1]], dtype=float)
    assert krippendorff_alpha(ratings) == pytest.approx(0.5625)


def test_alpha_textbook_example_with_missing_data() -> None:
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 observers, 12 units,
    # missing values. Published: nominal .743, ordinal .815, interval .849, ratio .797.
    ratings = np.array(
        [
            [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
            [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
        ]
    )
    assert krippendorff_alpha(ratings, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(ratings, "ordinal") == pytest.approx(0.815, abs=5e-4)
    assert krippendorff_alpha(ratings, "interval") == pytest.approx(0.849, abs=5e-4)
    assert krippendorff_alpha(ratings, "ratio") == pytest.approx(0.797, abs=5e-4)


def test_alpha_undefined_cases_are_nan() -> None:
    assert math.isnan(krippendorff_alpha(np.array([[0, 1, 2]], dtype=float)))  # one judge
    assert math.isnan(krippendorff_alpha(np.array([[1, 1, 1], [1, 1, 1]], dtype=float)))  # one value
    assert math.isnan(krippendorff_alpha(np.array([[1, nan, 2], [nan, 2, nan]])))  # nothing pairable
    # The only other value sits in a unit with a single rating, so it cannot disagree with anyone.
    assert math.isnan(krippendorff_alpha(np.array([[1, 1, 2], [1, 1, nan]])))
    with pytest.raises(ValueError):
        krippendorff_alpha(np.zeros(3))
    with pytest.raises(ValueError):
        krippendorff_alpha(np.zeros((2, 3)), "fuzzy")


def test_spearman() -> None:
    # A monotone but non-linear relation: rho = 1
    rho, p = spearman([1, 2, 3, 4, 5], [1, 8, 27, 64, 125])
    assert rho == pytest.approx(1.0) and p < 0.05
    # Reversed ranks: rho = -1
    assert spearman([1, 2, 3, 4], [10, 5, 2, 1])[0] == pytest.approx(-1.0)
    # Ranks x = 1..5, y = 2 1 4 3 5: d^2 = 1+1+1+1+0 = 4, rho = 1 - 6*4/(5*24) = 0.8
    assert spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5])[0] == pytest.approx(0.8)


def _brute_force_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided exact p by hand: the share of the n! pairings whose |rho| reaches the observed one
    (rho of mid-ranks: their covariance over a constant no pairing changes)."""
    rx, ry = stats.rankdata(x).tolist(), stats.rankdata(y).tolist()
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    dx, dy = [v - mx for v in rx], [v - my for v in ry]
    observed = abs(sum(a * b for a, b in zip(dx, dy, strict=True)))
    pairings = list(itertools.permutations(dy))
    hits = sum(abs(sum(a * b for a, b in zip(dx, perm, strict=True))) >= observed - 1e-9 for perm in pairings)
    return hits / len(pairings)


def test_spearman_p_is_exact_at_small_n() -> None:
    # validate printed "rho = 1.000 (p = 0.0000, 4 turns)": 2 of the 4! = 24 pairings reach |rho| = 1.
    assert spearman([1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4]) == pytest.approx((1.0, 2 / 24))
    # rho = 0.8 on 5 is sum d^2 = 4; sum d^2 <= 4 for the identity, 4 adjacent swaps and 3 pairs of
    # disjoint adjacent swaps, and their 8 mirrors reach rho <= -0.8: 16 of 120 pairings.
    assert spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5])[1] == pytest.approx(16 / 120)
    # Above the exact range: scipy's t approximation, never below the least p a pairing can give.
    n = EXACT_MAX + 1
    assert spearman(list(range(n)), list(range(n)))[1] == pytest.approx(1 / math.factorial(n))
    x = np.arange(30.0)
    y = x + np.sin(x) * 5
    assert spearman(x, y)[1] == pytest.approx(stats.spearmanr(x, y).pvalue)


small = st.integers(3, 6).flatmap(
    lambda n: st.tuples(st.lists(st.integers(0, 4), min_size=n, max_size=n), st.lists(st.integers(0, 4), min_size=n, max_size=n)))


@settings(max_examples=20, deadline=None)
@given(small)
def test_spearman_exact_p_matches_enumeration(xy: tuple[list[int], list[int]]) -> None:
    x, y = xy
    rho, p = spearman(x, y)
    if len(set(x)) < 2 or len(set(y)) < 2:
        assert math.isnan(rho) and math.isnan(p)
        return
    assert 0 < p <= 1
    assert p == pytest.approx(_brute_force_p(x, y), abs=1e-12)
    assert rho == pytest.approx(spearman_rho(x, y))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=3, max_size=40), st.randoms(use_true_random=False))
def test_spearman_p_is_a_probability_and_never_0(x: list[float], rnd: object) -> None:
    y = list(x)
    rnd.shuffle(y)  # type: ignore[attr-defined]
    y = [v * 2 + 1 for v in y] if len(y) % 2 else y[::-1]  # also the perfect (anti)correlations
    rho, p = spearman(x, y)
    if math.isnan(rho):
        assert len(set(x)) < 2 or len(set(y)) < 2
        return
    assert 0 < p <= 1 and -1 <= rho <= 1


def test_spearman_drops_missing_pairs_and_needs_three() -> None:
    assert spearman([1, 2, nan, 4, 5], [1, 4, 9, nan, 25])[0] == pytest.approx(1.0)
    assert all(math.isnan(v) for v in spearman([1, 2, nan], [1, 2, 3]))
    assert all(math.isnan(v) for v in spearman([1, 1, 1, 1], [1, 2, 3, 4]))  # constant side
    with pytest.raises(ValueError):
        spearman([1, 2, 3], [1, 2])


def _verdict(case: str, judge: str, a: str, b: str, order: str, winner: str | None, seed: int = 0) -> dict[str, object]:
    return {
        "case_id": case,
        "seed": seed,
        "judge": judge,
        "dimension": "empathy",
        "subject_a": a,
        "subject_b": b,
        "order": order,
        "winner": winner,
    }


def test_position_flip_rate() -> None:
    df = pd.DataFrame(
        [
            # pair 1: same winner in both orders (the pair matches whichever column each subject is in)
            _verdict("c1", "j1", "x", "y", "ab", "x"),
            _verdict("c1", "j1", "y", "x", "ba", "x"),
            # pair 2: the first-shown transcript wins both times -> a flip
            _verdict("c2", "j1", "x", "y", "ab", "x"),
            _verdict("c2", "j1", "y", "x", "ba", "y"),
            # pair 3: subjects kept in the same columns, only the order flag differs; consistent
            _verdict("c3", "j1", "x", "y", "ab", "y"),
            _verdict("c3", "j1", "x", "y", "ba", "y"),
            # pair 4: another judge, a flip
            _verdict("c1", "j2", "x", "y", "ab", "y"),
            _verdict("c1", "j2", "x", "y", "ba", "x"),
            # incomplete: only one order, and a pair whose other verdict was invalid
            _verdict("c4", "j1", "x", "y", "ab", "x"),
            _verdict("c5", "j1", "x", "y", "ab", "x"),
            _verdict("c5", "j1", "x", "y", "ba", None),
            # a different seed is a different pair, complete and consistent
            _verdict("c1", "j1", "x", "y", "ab", "x", seed=1),
            _verdict("c1", "j1", "x", "y", "ba", "x", seed=1),
        ]
    )
    # 5 complete pairs, 2 flips
    assert position_flip_rate(df) == pytest.approx(2 / 5)


def test_position_flip_rate_edge_cases() -> None:
    one_order = pd.DataFrame([_verdict("c1", "j1", "x", "y", "ab", "x")])
    assert math.isnan(position_flip_rate(one_order))
    with pytest.raises(ValueError):
        position_flip_rate(pd.DataFrame([_verdict("c1", "j1", "x", "y", "ab", "z")]))  # stray winner
    with pytest.raises(ValueError):
        position_flip_rate(pd.DataFrame([_verdict("c1", "j1", "x", "y", "xy", "x")]))  # bad order
    dup = pd.DataFrame([_verdict("c1", "j1", "x", "y", "ab", "x"), _verdict("c1", "j1", "y", "x", "ab", "y")])
    with pytest.raises(ValueError):
        position_flip_rate(dup)
    with pytest.raises(ValueError):
        position_flip_rate(pd.DataFrame([_verdict("c1", "j1", "x", "y", "ab", "x", seed=None)]))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        position_flip_rate(pd.DataFrame({"case_id": ["c1"]}))
