"""Slicing and stratification of cases: filters, counts per dimension, and the split targets."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from emobench.errors import InputError
from emobench.registry.models import (
    AXES,
    BAND_EDGES,
    CATEGORIES,
    DIFFICULTIES,
    THRESHOLDS,
    VALENCES,
)

MIN_BAND_MARGIN = 0.5

if TYPE_CHECKING:
    from emobench.registry.models import Case

_CHOICES: dict[str, tuple[str, ...]] = {
    "category": CATEGORIES,
    "difficulty": DIFFICULTIES,
    "dominant_axis": AXES,
    "threshold": THRESHOLDS,
    "valence": VALENCES,
}

# How each stratification dimension reads off a case.
DIMENSIONS: dict[str, Callable[[Case], str]] = {
    "category": lambda case: case.scenario.category,
    "dominant_axis": lambda case: case.dominant_axis,
    "difficulty": lambda case: case.difficulty,
    "threshold": lambda case: case.persona.threshold,
    "valence": lambda case: case.valence,
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
    good_news = [c for c in cases if c.valence != "negative"]
    counts["positive_or_mixed_by_category"] = Counter(c.scenario.category for c in good_news)
    counts["positive_or_mixed_by_axis"] = Counter(c.dominant_axis for c in good_news)
    counts["band_margin"] = Counter(
        {f"below {MIN_BAND_MARGIN}": sum(band_margin(c) < MIN_BAND_MARGIN for c in cases)})
    return counts


@dataclass(frozen=True)
class Target:
    """A count one stratum must reach; count_share asks for at least that share of the split."""

    dimension: str
    value: str
    op: Literal["==", ">="]
    count: int = 0
    share: float = 0.0

    def needed(self, total: int) -> int:
        return max(self.count, math.ceil(self.share * total))

    def met(self, actual: int, total: int = 0) -> bool:
        need = self.needed(total)
        return actual == need if self.op == "==" else actual >= need

    def label(self, total: int = 0) -> str:
        need = self.needed(total)
        return str(need) if self.op == "==" else f"≥ {need}"


def stratum_count(counts: dict[str, Counter[str]], dimension: str, value: str) -> int:
    """Count of one stratum; "a+b" adds strata (e.g. positive+mixed valence)."""
    return sum(counts[dimension][part] for part in value.split("+"))


def band_margin(case: Case) -> float:
    """Distance of ||P0|| from the nearest difficulty band edge: one level changed near an
    edge moves a case to another band and breaks the split's difficulty counts."""
    return min(abs(case.p0_norm - edge) for edge in BAND_EDGES)


# The stratification of issue 3, mirroring the reference suite's test split; the second
# edition adds the valence share and a margin from the difficulty band edges, the third
# positive or mixed cases in every category and on every dominant axis.
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
        Target("valence", "positive+mixed", ">=", share=0.25),
        Target("band_margin", f"below {MIN_BAND_MARGIN}", "==", 0),
        # the third edition: good news on every topic and for every kind of need
        *(Target("positive_or_mixed_by_category", cat, ">=", 1) for cat in CATEGORIES),
        *(Target("positive_or_mixed_by_axis", axis, ">=", 1) for axis in AXES),
    ],
    "dev": [
        Target("total", "cases", ">=", 60),
        Target("valence", "positive+mixed", ">=", share=0.25),
    ],
}
# The Chinese library: its test split is stratified as the English one, its dev split is
# smaller (issue 32: at least 40 cases).
TARGETS["test-zh"] = TARGETS["test"]
TARGETS["dev-zh"] = [Target("total", "cases", ">=", 40), Target("valence", "positive+mixed", ">=", share=0.25)]
MIN_COUNTERFACTUAL_SETS = 12
