"""EPM-Q (docs/method.md §5.4): nine indices in three groups, from an episode's EPM trajectory.

The formulas are fixed in docs/method.md, with our two fixes: every index is clipped to [0, 100], and
Tau is 0 unless the path moved toward the goal, (P_T - P0).u > 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Final

from emobench.trackers.epm import EPMEngine

EPMQ_WEIGHTS: Final = {"outcome": 0.4, "efficiency": 0.2, "stability": 0.4}


@dataclass(frozen=True)
class EPMQ:
    """Every index, group and the total, each in [0, 100]."""

    rdi: float
    etot: float
    snet: float
    rho: float
    sproj: float
    tau: float
    rpos: float
    align: float
    pen: float
    outcome: float
    efficiency: float
    stability: float
    epmq: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def _clip(x: float) -> float:
    return min(100.0, max(0.0, x))


def _mean3(a: float, b: float, c: float) -> float:
    return (a + b + c) / 3.0


def _path_ratio(path_length: float, displacement: float) -> float:
    """tau = path length / |P_T - P0|, floored at 1.

    A path that ends where it started (|P_T - P0| == 0) is infinitely roundabout: tau = inf.
    Its Tau index is 0 either way, since it did not move toward the goal.
    """
    if displacement == 0.0:
        return math.inf
    return max(1.0, path_length / displacement)


def epmq(
    p0: Sequence[float],
    vectors: Sequence[Sequence[float]],
    regression_total: float,
    *,
    n_turns: int | None = None,
) -> EPMQ:
    """Score one episode from P0, its judged turn vectors and the sum of its regression points.

    `vectors` holds one v_t per judged turn, so T = len(vectors). `regression_total` is the sum
    over those turns of `mdep.regression_points` (<= 0). `n_turns` is the episode's total turn
    count when some turns have no valid judgement; it only changes Rho = E / n_turns, which is
    how Rho and Sproj (mean delta_e over judged turns) differ. Every other index uses the judged
    turns, so an unjudged turn is never counted as a zero-regression or zero-work turn.
    """
    if not vectors:
        raise ValueError("EPM-Q needs at least one judged turn")
    if not math.isfinite(regression_total) or regression_total > 0.0:
        raise ValueError(f"regression_total is a sum of regression points, <= 0; got {regression_total}")
    t = len(vectors)
    total_turns = t if n_turns is None else n_turns
    if total_turns < t:
        raise ValueError(f"n_turns ({total_turns}) is less than the judged turns ({t})")

    engine = EPMEngine(p0)
    for v in vectors:
        engine.step(v)
    path = engine.path
    start, end = path[0], path[-1]
    r0 = math.hypot(*start)
    r_t = math.hypot(*end)
    energy = engine.energy
    delta_es = engine.delta_es
    s_net = sum(sum(v) for v in vectors)
    # (P_T - P0).u > 0, taken against -P0 (a positive multiple of u) so lattice input is exact.
    toward_goal = sum((b - a) * -a for a, b in zip(start, end, strict=True)) > 0.0
    path_length = sum(math.hypot(*v) for v in vectors)
    tau = _path_ratio(path_length, math.dist(start, end))
    pen = -regression_total / t

    rdi = _clip((100.0 * (r0 - r_t) / r0 + 100.0) / 2.0)
    etot = _clip(100.0 * max(0.0, energy) / (1.2 * r0))
    snet = _clip(100.0 * max(0.0, s_net) / (1.5 * r0))
    rho = _clip(100.0 * max(0.0, energy / total_turns) / 2.5)
    sproj = _clip(100.0 * max(0.0, sum(delta_es) / t) / 2.5)
    tau_index = _clip(100.0 * (3.0 - tau) / 2.0) if toward_goal else 0.0
    rpos = _clip(100.0 * sum(1 for d in delta_es if d > 0.0) / t)
    align = _clip(100.0 * (sum(engine.cosines) / t + 1.0) / 2.0)
    pen_index = _clip(100.0 * (3.0 - pen) / 3.0)

    outcome = _mean3(rdi, etot, snet)
    efficiency = _mean3(rho, sproj, tau_index)
    stability = _mean3(rpos, align, pen_index)
    total = EPMQ_WEIGHTS["outcome"] * outcome + EPMQ_WEIGHTS["efficiency"] * efficiency + EPMQ_WEIGHTS["stability"] * stability
    return EPMQ(
        rdi=rdi,
        etot=etot,
        snet=snet,
        rho=rho,
        sproj=sproj,
        tau=tau_index,
        rpos=rpos,
        align=align,
        pen=pen_index,
        outcome=outcome,
        efficiency=efficiency,
        stability=stability,
        epmq=_clip(total),  # weights sum to 1; the clip only absorbs float rounding
    )
