"""The EPM engine (docs/method.md §5.3): the user's empathy deficit as a point moving in (C, A, P) space.

P_0 is the case's initial deficit; each judged turn adds its MDEP vector v_t. The ideal
direction u = -P0/|P0| points from P0 at the origin. Pure arithmetic, no I/O.

Arithmetic note. Judge vectors and P0 live on an integer lattice, so every quantity whose sign
decides a status is computed from integer-exact dot products with q = -P0 and only then divided
by |P0|. A subject that lands exactly on the origin therefore has E == |P0| exactly, and a turn
orthogonal to u has delta_e == 0 exactly, instead of either flipping on float rounding.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

Vec = tuple[float, float, float]
Status = Literal["success", "collapse", "stagnation_regression"]

EPS_FRACTION: Final = 0.05  # eps_dist = eps_dir = 0.05 |P0|; eps_E = |P0|
COLLAPSE_RUN: Final = 5  # collapse: this many most recent delta_e all < 0
STAGNATION_STATES: Final = 5  # states P_{t-4..t} whose norms must barely move
STAGNATION_STDEV: Final = 0.5
REGRESSION_WINDOW: Final = 8  # most recent delta_e inspected for regression
REGRESSION_SHARE: Final = 0.7  # strictly more than this share negative...
REGRESSION_SUM: Final = -1.0  # ...and their sum strictly below this


def _vec(values: Sequence[float], what: str) -> Vec:
    if len(values) != 3:
        raise ValueError(f"{what} must have 3 components (C, A, P), got {len(values)}")
    c, a, p = (float(x) for x in values)
    if not all(math.isfinite(x) for x in (c, a, p)):
        raise ValueError(f"{what} must be finite, got {tuple(values)}")
    return (c, a, p)


def _dot(x: Vec, y: Vec) -> float:
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2]


def _norm(x: Vec) -> float:
    return math.sqrt(_dot(x, x))


@dataclass(frozen=True)
class EPMStep:
    """The engine's state after one turn."""

    turn: int  # 1-based
    v: Vec
    p: Vec  # P_t
    delta_e: float  # effective work v_t . u
    cos: float  # alignment (v_t . u) / |v_t|, 0 for a zero vector
    energy: float  # E after this turn
    status: Status | None  # None before min_turns and while neither success nor failure


class EPMEngine:
    """Steps P_t = P_{t-1} + v_t and decides success or failure from `min_turns` on.

    Success is checked before failure, and collapse before stagnation_regression. Each failure
    rule needs its full window of history: collapse at least 5 turns, stagnation_regression
    at least 8. The engine keeps stepping after a status; stopping is the episode loop's job.
    """

    def __init__(self, p0: Sequence[float], min_turns: int = 12) -> None:
        start = _vec(p0, "P0")
        r0 = _norm(start)
        if r0 == 0.0:
            raise ValueError("P0 is the zero vector: the case has no deficit to repair")
        if min_turns < 1:
            raise ValueError(f"min_turns must be >= 1, got {min_turns}")
        self._p0 = start
        self._q: Vec = (-start[0], -start[1], -start[2])  # q = -P0 = |P0| u
        self._r0 = r0
        self._n2 = _dot(start, start)  # |P0|^2, exact for integer P0
        self._min_turns = min_turns
        self._path: list[Vec] = [start]
        self._delta_es: list[float] = []
        self._cosines: list[float] = []
        self._energy = 0.0

    @property
    def u(self) -> Vec:
        q, r0 = self._q, self._r0
        return (q[0] / r0, q[1] / r0, q[2] / r0)

    @property
    def path(self) -> list[Vec]:
        """P_0..P_t."""
        return list(self._path)

    @property
    def delta_es(self) -> list[float]:
        return list(self._delta_es)

    @property
    def cosines(self) -> list[float]:
        return list(self._cosines)

    @property
    def energy(self) -> float:
        """E = sum of delta_e so far (a running sum, in turn order)."""
        return self._energy

    @property
    def turns(self) -> int:
        return len(self._delta_es)

    def step(self, v: Sequence[float]) -> EPMStep:
        move = _vec(v, "turn vector")
        prev = self._path[-1]
        p = (prev[0] + move[0], prev[1] + move[1], prev[2] + move[2])
        delta_e = _dot(move, self._q) / self._r0
        length = _norm(move)
        # Clamped because rounding can push |cos| a hair past 1 for v parallel to u.
        cos = max(-1.0, min(1.0, delta_e / length)) if length > 0.0 else 0.0
        self._path.append(p)
        self._delta_es.append(delta_e)
        self._cosines.append(cos)
        self._energy += delta_e
        turn = len(self._delta_es)
        status = self._status() if turn >= self._min_turns else None
        return EPMStep(turn, move, p, delta_e, cos, self._energy, status)

    def _status(self) -> Status | None:
        if self._succeeded():
            return "success"
        recent = self._delta_es[-COLLAPSE_RUN:]
        if len(recent) == COLLAPSE_RUN and all(d < 0.0 for d in recent):
            return "collapse"
        if self._stagnating_and_regressing():
            return "stagnation_regression"
        return None

    def _succeeded(self) -> bool:
        # Each test is the docs/method.md inequality multiplied through by |P0| > 0:
        #   |P_t| <= eps_dist  <=>  |P_t|^2 <= 0.05^2 |P0|^2
        #   P_t.u >= -eps_dir  <=>  P_t.q >= -0.05 |P0|^2
        #   E >= eps_E         <=>  (P_t - P0).q >= |P0|^2   (since E = (P_t - P0).u)
        # E = P_t.u + |P0|, so `worked` means P_t.u >= 0 and already implies `crossed`; the
        # clause is kept as docs/method.md states it, and the tests pin the equivalence.
        p, p0, q, n2 = self._path[-1], self._p0, self._q, self._n2
        near = _dot(p, p) <= EPS_FRACTION**2 * n2
        crossed = _dot(p, q) >= -EPS_FRACTION * n2
        worked = _dot((p[0] - p0[0], p[1] - p0[1], p[2] - p0[2]), q) >= n2
        return (near or crossed) and worked

    def _stagnating_and_regressing(self) -> bool:
        if len(self._delta_es) < REGRESSION_WINDOW:
            return False
        # Population stdev (ddof=0): the 5 states are the whole window, not a sample.
        norms = [_norm(p) for p in self._path[-STAGNATION_STATES:]]
        if statistics.pstdev(norms) >= STAGNATION_STDEV:
            return False
        window = self._delta_es[-REGRESSION_WINDOW:]
        negative = sum(1 for d in window if d < 0.0)
        return negative > REGRESSION_SHARE * REGRESSION_WINDOW and sum(window) < REGRESSION_SUM
