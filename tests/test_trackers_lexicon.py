"""VADER valence and the trajectory helpers (thirds, slope)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emobench.trackers.lexicon import slope, third_size, thirds, valence

finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False)


def test_valence_signs() -> None:
    positive, negative, neutral, empty = valence(
        [
            "Thank you, that really helped and I feel so much better now!",
            "I hate this, everything is awful and I'm miserable.",
            "The bus leaves at nine from the station.",
            "",
        ]
    )
    assert positive > 0.5
    assert negative < -0.5
    assert neutral == 0.0
    assert empty == 0.0


def test_valence_is_bounded_and_ordered() -> None:
    scores = valence(["I'm ok.", "I'm good.", "I'm really happy, this is wonderful!"])
    assert all(-1.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores)
    assert valence([]) == []


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], (None, None)),
        ([0.5], (0.5, 0.5)),  # one item is both thirds
        ([1.0, -1.0], (1.0, -1.0)),
        ([1.0, 2.0, 3.0], (1.0, 3.0)),
        ([1.0, 2.0, 3.0, 5.0], (1.5, 4.0)),  # ceil(4/3) = 2 each end
        ([1.0, 2.0, 100.0, 4.0, 6.0], (1.5, 5.0)),  # the middle item is in neither third
        ([0.0, 3.0, 6.0, 1.0, 1.0, 1.0, 2.0], (3.0, 4 / 3)),  # ceil(7/3) = 3 each end
    ],
)
def test_thirds_hand_computed(values: list[float], expected: tuple[float | None, float | None]) -> None:
    first, last = thirds(values)
    want_first, want_last = expected
    assert first == pytest.approx(want_first)
    assert last == pytest.approx(want_last)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], None),
        ([3.0], None),
        ([1.0, 4.0], 3.0),
        ([40.0, 40.0, 40.0], 0.0),
        # x = 0..3, y = 1, 3, 2, 5: sum((x - 1.5)(y - 2.75)) = 5.5, sum((x - 1.5)^2) = 5
        ([1.0, 3.0, 2.0, 5.0], 1.1),
    ],
)
def test_slope_hand_computed(values: list[float], expected: float | None) -> None:
    assert slope(values) == pytest.approx(expected)


@given(start=finite, step=finite, n=st.integers(min_value=2, max_value=60))
def test_slope_of_a_line_is_its_step(start: float, step: float, n: int) -> None:
    line = [start + step * i for i in range(n)]
    result = slope(line)
    assert result is not None
    assert result == pytest.approx(step, rel=1e-9, abs=1e-9 * (1 + abs(start)))


@given(value=finite, n=st.integers(min_value=1, max_value=60))
def test_thirds_of_a_constant_are_the_constant(value: float, n: int) -> None:
    first, last = thirds([value] * n)
    assert first == pytest.approx(value)
    assert last == pytest.approx(value)


@given(n=st.integers(min_value=1, max_value=1000))
def test_thirds_are_non_empty_and_disjoint(n: int) -> None:
    k = third_size(n)
    assert k >= 1
    assert 2 * k <= n or n == 1
    assert k == math.ceil(n / 3)
