"""The EPM engine (docs/method.md §5.3): the user's empathy deficit as a point moving in (C, A, P) space.

P_0 is the case's initial deficit; each judged turn adds its MDEP vector v_t. The ideal
direction u = -P0/|P0| points from P0 at the origin. Pure arithmetic, no I/O.

Rounding follows the scoring profile (docs/method.md §5.8): u is rounded first, and delta_e,
cos, |P|, E and the thresholds are read rounded, as EMPA stores and reads them. This is what
makes a replay of EMPA's recorded verdicts stop on the same turn, and EPM-Q reads the same
rounded values. Effective work is |v| cos(theta), accumulated in turn order.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from emobench.profiles import EngineRules, load_profile

Vec = tuple[float, float, float]
Status = Literal["success", "collapse", "stagnation_regression", "oscillation"]
FAILURES: tuple[Status, ...] = ("collapse", "stagnation_regression", "oscillation")


def _vec(values: Sequence[float], what: str) -> Vec:
    if len(values) != 3:
        raise ValueError(f"{what} must have 3 components (C, A, P), got {len(values)}")
    c, a, p = float(values[0]), float(values[1]), float(values[2])  # no generator: a turn steps this
    if not (math.isfinite(c) and math.isfinite(a) and math.isfinite(p)):
        raise ValueError(f"{what} must be finite, got {tuple(values)}")
    return (c, a, p)


def _dot(x: Vec, y: Vec) -> float:
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2]


def _norm(x: Vec) -> float:
    return math.sqrt(_dot(x, x))


def _l1(x: Vec, y: Vec) -> float:
    return abs(x[0] - y[0]) + abs(x[1] - y[1]) + abs(x[2] - y[2])


@dataclass(frozen=True)
class EPMStep:
    """The engine's state after one turn."""

    turn: int  # 1-based
    v: Vec
    p: Vec  # P_t
    delta_e: float  # effective work v_t . u, rounded
    cos: float  # alignment (v_t . u) / |v_t|, rounded; 0 for a zero vector
    energy: float  # E after this turn, unrounded
    status: Status | None  # None before min_turns and while neither success nor failure


class EPMEngine:
    """Steps P_t = P_{t-1} + v_t and decides success or failure from `min_turns` on.

    Checked in this order: success, collapse, stagnation_regression, oscillation. Each failure
    rule needs its full window of history. The engine keeps stepping after a status; stopping
    is the episode loop's job. `rules` defaults to the default scoring profile's.
    """

    def __init__(self, p0: Sequence[float], min_turns: int = 12, rules: EngineRules | None = None) -> None:
        start = _vec(p0, "P0")
        r0 = _norm(start)
        if r0 == 0.0:
            raise ValueError("P0 is the zero vector: the case has no deficit to repair")
        if min_turns < 1:
            raise ValueError(f"min_turns must be >= 1, got {min_turns}")
        self.rules = rules or load_profile().engine
        digits = self.rules.value_decimals
        self._u: Vec = _vec([round(-x / r0, self.rules.direction_decimals) for x in start], "u")
        self._eps = round(self.rules.epsilon_fraction * r0, digits)  # eps_dist = eps_dir
        self._eps_energy = round(r0, digits)
        self._min_turns = min_turns
        self._path: list[Vec] = [start]
        self._norms: list[float] = [round(r0, digits)]
        self._delta_es: list[float] = []
        self._cosines: list[float] = []
        self._energy = 0.0

    @property
    def u(self) -> Vec:
        return self._u

    @property
    def path(self) -> list[Vec]:
        """P_0..P_t."""
        return list(self._path)

    @property
    def delta_es(self) -> list[float]:
        """Rounded delta_e per turn."""
        return list(self._delta_es)

    @property
    def cosines(self) -> list[float]:
        return list(self._cosines)

    @property
    def energy(self) -> float:
        """E = sum of |v| cos(theta) so far, unrounded, in turn order."""
        return self._energy

    @property
    def turns(self) -> int:
        return len(self._delta_es)

    def step(self, v: Sequence[float]) -> EPMStep:
        move = _vec(v, "turn vector")
        prev = self._path[-1]
        p = (prev[0] + move[0], prev[1] + move[1], prev[2] + move[2])
        length = _norm(move)
        cos = _dot(move, self._u) / length if length > 0.0 else 0.0
        work = length * cos
        digits = self.rules.value_decimals
        self._path.append(p)
        self._norms.append(round(_norm(p), digits))
        self._delta_es.append(round(work, digits))
        self._cosines.append(round(cos, self.rules.cosine_decimals))
        self._energy += work
        turn = len(self._delta_es)
        status = self._status() if turn >= self._min_turns else None
        return EPMStep(turn, move, p, self._delta_es[-1], self._cosines[-1], self._energy, status)

    def _status(self) -> Status | None:
        if self._succeeded():
            return "success"
        run = self._delta_es[-self.rules.collapse_run :]
        if len(run) == self.rules.collapse_run and all(d < 0.0 for d in run):
            return "collapse"
        if self._stagnating_and_regressing():
            return "stagnation_regression"
        if self._oscillating():
            return "oscillation"
        return None

    def _succeeded(self) -> bool:
        digits = self.rules.value_decimals
        near = self._norms[-1] <= self._eps
        crossed = round(_dot(self._path[-1], self._u), digits) >= -self._eps
        return (near or crossed) and round(self._energy, digits) >= self._eps_energy

    def _stagnating_and_regressing(self) -> bool:
        r = self.rules
        if len(self._delta_es) < r.regression_window:
            return False
        # Sample stdev (ddof 1), as EMPA computes it.
        if statistics.stdev(self._norms[-r.stagnation_states :]) >= r.stagnation_stdev:
            return False
        window = self._delta_es[-r.regression_window :]
        negative = sum(1 for d in window if d < 0.0)
        return negative > r.regression_share * r.regression_window and sum(window) < r.regression_sum

    def _oscillating(self) -> bool:
        points = self._path[-self.rules.oscillation_points :]
        if len(points) < self.rules.oscillation_points:
            return False
        moved = sum(_l1(a, b) for a, b in pairwise(points))
        return moved >= self.rules.oscillation_path and _l1(points[0], points[-1]) < self.rules.oscillation_span
