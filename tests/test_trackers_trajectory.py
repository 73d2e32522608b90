"""Trajectory maths: thirds, slope, and the valence trajectory without closing pleasantries."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emobench.trackers.trajectory import slope, third_size, thirds, trailing_closings, valence_trajectory

finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False)


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


@pytest.mark.parametrize(
    ("closing", "expected"),
    [
        ([], 0),
        ([False, False], 0),
        ([False, True], 1),
        ([True, False, True, True], 2),  # a mid-conversation thanks stays measured
        ([True, True, True], 0),  # nothing but pleasantries: kept, or there is no end point
    ],
)
def test_trailing_closings(closing: list[bool], expected: int) -> None:
    assert trailing_closings(closing) == expected


def test_closing_pleasantries_do_not_lift_the_end_point() -> None:
    # Falls from -0.2 to -0.6, then a polite goodbye that a lexicon would score +0.8.
    values = [-0.2, -0.3, -0.5, -0.6, 0.8, 0.7]
    t = valence_trajectory(values, [False, False, False, False, True, True])
    assert t.closing_turns == 2
    assert t.first == pytest.approx(-0.25) and t.last == pytest.approx(-0.55)
    assert t.slope is not None and t.slope < 0
    naive = valence_trajectory(values, [False] * 6)
    assert naive.slope is not None and naive.slope > 0  # what the pleasantries would have made of it


def test_trajectory_of_nothing() -> None:
    t = valence_trajectory([], [])
    assert (t.first, t.last, t.slope, t.closing_turns) == (None, None, None, 0)
    with pytest.raises(ValueError, match="2 valences for 1 closing flags"):
        valence_trajectory([0.1, 0.2], [False])


valences = st.lists(st.floats(min_value=-1, max_value=1, allow_nan=False), min_size=1, max_size=40)


@given(values=valences, tail=st.lists(st.floats(min_value=-1, max_value=1, allow_nan=False), min_size=1, max_size=5))
def test_appended_pleasantries_change_nothing_but_their_count(values: list[float], tail: list[float]) -> None:
    base = valence_trajectory(values, [False] * len(values))
    padded = valence_trajectory(values + tail, [False] * len(values) + [True] * len(tail))
    assert padded.closing_turns == len(tail)
    assert (padded.first, padded.last, padded.slope) == (base.first, base.last, base.slope)


@given(values=valences, shift=st.floats(min_value=-1, max_value=1, allow_nan=False),
       flags=st.lists(st.booleans(), min_size=40, max_size=40))
def test_slope_ignores_a_shift_and_ends_follow_it(values: list[float], shift: float, flags: list[bool]) -> None:
    closing = flags[: len(values)]
    base = valence_trajectory(values, closing)
    moved = valence_trajectory([v + shift for v in values], closing)
    assert moved.closing_turns == base.closing_turns
    assert (moved.slope is None) == (base.slope is None)
    if base.slope is not None and moved.slope is not None:
        assert moved.slope == pytest.approx(base.slope, abs=1e-9)
    assert base.first is not None and moved.first is not None and base.last is not None and moved.last is not None
    assert moved.first == pytest.approx(base.first + shift, abs=1e-9)
    assert moved.last == pytest.approx(base.last + shift, abs=1e-9)


@given(values=valences, flags=st.lists(st.booleans(), min_size=40, max_size=40))
def test_end_point_is_bounded_by_the_measured_turns(values: list[float], flags: list[bool]) -> None:
    closing = flags[: len(values)]
    t = valence_trajectory(values, closing)
    measured = values[: len(values) - t.closing_turns]
    assert measured and t.last is not None
    assert min(measured) - 1e-12 <= t.last <= max(measured) + 1e-12
    assert t.closing_turns == 0 or not closing[len(values) - t.closing_turns - 1]
