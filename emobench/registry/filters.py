"""Slicing and stratification of cases: filters, counts per dimension, and the split targets."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from emobench.errors import InputError
from emobench.registry.models import AXES, CATEGORIES, DIFFICULTIES, THRESHOLDS

if TYPE_CHECKING:
    from emobench.registry.models import Case

_CHOICES: dict[str, tuple[str, ...]] = {
    "category": CATEGORIES,
    "difficulty": DIFFICULTIES,
    "dominant_axis": AXES,
    "threshold": THRESHOLDS,
}

# How each stratification dimension reads off a case.
DIMENSIONS: dict[str, Callable[[Case], str]] = {
    "category": lambda case: case.scenario.category,
    "dominant_axis": lambda case: case.dominant_axis,
    "difficulty": lambda case: case.difficulty,
    "threshold": lambda case: case.persona.threshold,
}


def filter_cases(cases: Iterable[Case], **wanted: str | None) -> list[Case]:
    """Cases matching every given dimension; an unknown value is an error, not an empty list."""
    active = {dim: value for dim, value in wanted.items() if value is not None}
    for dim, value in active.items():
        if value not in _CHOICES[dim]:
            raise InputError("filter", dim, f"unknown value {value!r} (one of {', '.join(_CHOICES[dim])})")
    return [c for c in cases if all(DIMENSIONS[dim](c) == v for dim, v in active.items())]


def stratification(cases: Iterable[Case]) -> dict[str, Counter[str]]:
    cases = list(cases)
    counts = {dim: Counter(read(c) for c in cases) for dim, read in DIMENSIONS.items()}
    counts["total"] = Counter({"cases": len(cases)})
    return counts


@dataclass(frozen=True)
class Target:
    dimension: str
    value: str
    op: Literal["==", ">="]
    count: int

    def met(self, actual: int) -> bool:
        return actual == self.count if self.op == "==" else actual >= self.count

    def __str__(self) -> str:
        return str(self.count) if self.op == "==" else f"≥ {self.count}"


# The stratification of issue 3, mirroring the reference suite's test split.
TARGETS: dict[str, list[Target]] = {
    "test": [
        Target("total", "cases", "==", 30),
        *(Target("category", cat, "==", 5) for cat in CATEGORIES),
        *(Target("dominant_axis", axis, "==", 10) for axis in AXES),
        Target("difficulty", "easy", "==", 4),
        Target("difficulty", "medium", "==", 10),
        Target("difficulty", "hard", "==", 11),
        Target("difficulty", "very_hard", "==", 5),
        Target("threshold", "high", ">=", 9),
    ],
    "dev": [Target("total", "cases", ">=", 60)],
}
MIN_COUNTERFACTUAL_SETS = 10
