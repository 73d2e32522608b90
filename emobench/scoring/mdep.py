"""Per-turn MDEP points (docs/method.md §5.2): judge levels -> the EPM turn vector v_t = (C, A, P)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Final

AXES: Final = ("C", "A", "P")
MAX_LEVEL: Final = 2
# Points indexed by level 0/1/2.
PROGRESS_POINTS: Final = (0, 1, 3)
REGRESSION_POINTS: Final = {"C": (0, -2, -4), "A": (0, -2, -5), "P": (0, -2, -5)}


def _checked(level: int, what: str) -> int:
    # bool is an int subclass; a True level is almost certainly a parsing slip. A plain int (every
    # parsed verdict's) skips the ABC check, which was most of a turn's aggregation time.
    wrong_type = type(level) is not int and (isinstance(level, bool) or not isinstance(level, Integral))
    if wrong_type or not 0 <= level <= MAX_LEVEL:
        raise ValueError(f"{what} must be an integer level 0..{MAX_LEVEL}, got {level!r}")
    return int(level)


def _level(levels: Mapping[str, int], axis: str, kind: str) -> int:
    if axis not in levels:
        raise ValueError(f"{kind} level missing for axis {axis}")
    return _checked(levels[axis], f"{kind} level of axis {axis}")


def _check_axes(levels: Mapping[str, int], kind: str) -> None:
    extra = set(levels) - set(AXES)
    if extra:
        raise ValueError(f"unknown {kind} axes {sorted(extra)}; expected {AXES}")


def turn_vector(progress: Mapping[str, int], regression: Mapping[str, int]) -> tuple[float, float, float]:
    """v_t: per axis, progress points plus (negative) regression points."""
    _check_axes(progress, "progress")
    _check_axes(regression, "regression")
    c, a, p = (
        float(
            PROGRESS_POINTS[_level(progress, axis, "progress")] + REGRESSION_POINTS[axis][_level(regression, axis, "regression")]
        )
        for axis in AXES
    )
    return (c, a, p)


def regression_points(regression: Mapping[str, int]) -> float:
    """Sum of one turn's regression points over the three axes (<= 0); feeds EPM-Q's Pen."""
    _check_axes(regression, "regression")
    return float(sum(REGRESSION_POINTS[axis][_level(regression, axis, "regression")] for axis in AXES))


def median_level(levels: Sequence[int]) -> int:
    """Median across judges of one item's level, always a level 0..2.

    With an even count the lower median is used. Equivalently: the result is the highest level
    that a strict majority of judges awarded or exceeded. So a non-zero level, progress credit
    or regression penalty alike, needs majority support; a split two-judge panel (0 vs 2)
    yields 0 on either kind of item. Invalid judgements must be left out by the caller, never
    passed as 0.
    """
    if not levels:
        raise ValueError("median_level needs at least one valid judge level")
    checked = [_checked(level, "judge level") for level in levels]
    return sorted(checked)[(len(checked) - 1) // 2]
