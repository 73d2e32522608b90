"""IEDR -> P0, ||P0|| and difficulty (docs/method.md §5.1), by hand-computed examples and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from emobench.registry import IEDRLevels
from emobench.registry.models import DIFFICULTIES, difficulty_of

ITEMS = ("C1", "C2", "C3", "A1", "A2", "A3", "P1", "P2", "P3")


def levels(**given_levels: int) -> IEDRLevels:
    return IEDRLevels(**{item: given_levels.get(item, 0) for item in ITEMS})


@pytest.mark.parametrize(
    ("given_levels", "p0", "difficulty"),
    [
        # all ones: C = 2+2+3, A = 2+4+3, P = 2+4+3; sqrt(49+81+81) = 14.53
        ({item: 1 for item in ITEMS}, (-7, -9, -9), "easy"),
        # all threes: C = 6+6+9, A = P = 6+12+9; sqrt(441+729+729) = 43.58
        ({item: 3 for item in ITEMS}, (-21, -27, -27), "very_hard"),
        # exactly 27 is still easy (the band is <= 27)
        ({"P1": 3, "P2": 3, "P3": 3}, (0, 0, -27), "easy"),
        # one step past 27: sqrt(4 + 729) = 27.07
        ({"C1": 1, "P1": 3, "P2": 3, "P3": 3}, (-2, 0, -27), "medium"),
        # exactly 36 is still hard: sqrt(144 + 576 + 576) = 36
        ({"C2": 3, "C3": 2, "A1": 3, "A2": 3, "A3": 2, "P1": 3, "P2": 3, "P3": 2},
         (-12, -24, -24), "hard"),
        # core items weigh 4 per level: A2 = 3 -> -12, P2 = 2 -> -8, C3 = 1 -> -3
        ({"A2": 3, "P2": 2, "C3": 1}, (-3, -12, -8), "easy"),
        # test2-08, the archived shaking-hands case: (-21, -21, -22), sqrt(1366) = 36.96
        ({"C1": 3, "C2": 3, "C3": 3, "A1": 3, "A2": 3, "A3": 1, "P1": 2, "P2": 3, "P3": 2},
         (-21, -21, -22), "very_hard"),
    ],
)
def test_p0_examples(given_levels: dict[str, int], p0: tuple[int, int, int], difficulty: str) -> None:
    iedr = levels(**given_levels)
    assert iedr.p0 == p0
    assert difficulty_of(iedr.p0) == difficulty


def test_medium_band_upper_edge() -> None:
    # (-12, -12, -27): sqrt(144+144+729) = 31.89 -> medium; one more A step -> 32.4 -> hard
    assert difficulty_of((-12, -12, -27)) == "medium"
    assert difficulty_of((-12, -14, -27)) == "hard"


def test_all_zero_is_invalid() -> None:
    with pytest.raises(ValidationError, match="zero vector"):
        levels()


@pytest.mark.parametrize("bad", [-1, 4, True, "2", 1.0])
def test_levels_are_strict_ints_in_range(bad: object) -> None:
    with pytest.raises(ValidationError):
        IEDRLevels.model_validate({**{item: 1 for item in ITEMS}, "A2": bad})


level_sets = st.fixed_dictionaries({item: st.integers(0, 3) for item in ITEMS}).filter(
    lambda d: any(d.values())
)


@given(level_sets)
def test_p0_bounds(given_levels: dict[str, int]) -> None:
    c, a, p = IEDRLevels(**given_levels).p0
    assert -21 <= c <= 0 and -27 <= a <= 0 and -27 <= p <= 0
    assert (c, a, p) != (0, 0, 0)
    assert math.hypot(c, a, p) <= math.sqrt(21**2 + 27**2 + 27**2)


@given(level_sets, st.sampled_from(ITEMS))
def test_p0_monotone_in_each_item(given_levels: dict[str, int], item: str) -> None:
    if given_levels[item] == 3:
        return
    before = IEDRLevels(**given_levels)
    after = IEDRLevels(**{**given_levels, item: given_levels[item] + 1})
    axis = "CAP".index(item[0])
    for i in range(3):
        if i == axis:
            assert after.p0[i] < before.p0[i]
        else:
            assert after.p0[i] == before.p0[i]
    # a larger deficit never makes a case easier
    rank = DIFFICULTIES.index
    assert rank(difficulty_of(after.p0)) >= rank(difficulty_of(before.p0))
