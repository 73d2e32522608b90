"""MDEP points (docs/method.md §5.2): turn vectors, regression points and the judges' median level."""

from __future__ import annotations

import itertools

import pytest

from emobench.scoring.mdep import AXES, median_level, regression_points, turn_vector

LEVELS = range(3)


def _levels(c: int, a: int, p: int) -> dict[str, int]:
    return dict(zip(AXES, (c, a, p), strict=True))


def test_turn_vector_points_per_axis() -> None:
    # C: progress 2 (+3) + regression 0 (0) = 3
    # A: progress 1 (+1) + regression 2 (-5) = -4
    # P: progress 0 (0)  + regression 1 (-2) = -2
    assert turn_vector(_levels(2, 1, 0), _levels(0, 2, 1)) == (3.0, -4.0, -2.0)
    # C regression level 2 is -4 (A and P are -5)
    assert turn_vector(_levels(0, 0, 0), _levels(2, 2, 2)) == (-4.0, -5.0, -5.0)
    assert regression_points(_levels(2, 2, 2)) == -14.0
    assert regression_points(_levels(1, 0, 2)) == -7.0  # -2 + 0 - 5


def test_turn_vector_bounds_over_the_whole_lattice() -> None:
    seen = set()
    for prog in itertools.product(LEVELS, repeat=3):
        for reg in itertools.product(LEVELS, repeat=3):
            c, a, p = turn_vector(_levels(*prog), _levels(*reg))
            assert -4 <= c <= 3 and -5 <= a <= 3 and -5 <= p <= 3
            assert -14 <= regression_points(_levels(*reg)) <= 0
            seen.add(c)
    # C reaches every value in {0,1,3} + {0,-2,-4}
    assert seen == {-4.0, -3.0, -2.0, -1.0, 0.0, 1.0, 3.0}


@pytest.mark.parametrize(
    ("progress", "regression"),
    [
        (_levels(3, 0, 0), _levels(0, 0, 0)),  # level out of range
        (_levels(0, 0, 0), _levels(0, -1, 0)),
        ({"C": 0, "A": 0}, _levels(0, 0, 0)),  # missing axis
        ({**_levels(0, 0, 0), "X": 1}, _levels(0, 0, 0)),  # unknown axis
        (_levels(True, 0, 0), _levels(0, 0, 0)),  # a bool is not a level
    ],
)
def test_turn_vector_rejects_bad_levels(progress: dict[str, int], regression: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        turn_vector(progress, regression)


def test_median_level_uses_the_lower_median() -> None:
    assert median_level([2]) == 2
    assert median_level([0, 1, 2]) == 1
    assert median_level([2, 0, 2]) == 2
    # Even count: the lower median, i.e. the highest level a strict majority reached.
    assert median_level([0, 2]) == 0
    assert median_level([1, 2]) == 1
    assert median_level([2, 2, 1, 0]) == 1  # sorted 0,1,2,2 -> lower median 1; 3 of 4 judges gave >= 1
    assert median_level([2, 2, 2, 0]) == 2


def test_median_level_rejects_empty_and_bad_levels() -> None:
    with pytest.raises(ValueError):
        median_level([])
    with pytest.raises(ValueError):
        median_level([1, 3])
