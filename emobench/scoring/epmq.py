"""EPM-Q (docs/method.md §5.4, §5.8): nine indices in three groups, from an episode's EPM trajectory.

The definitions are EMPA's, read from the scoring profile: distances are to the tolerance zone
(every axis >= -1), S_net and Pen count MDEP levels, and Rpos, Align, Sproj and Pen average over
T+1 entries (the trajectory's turn-0 entry has delta_e 0 and cos 0). The `emobench` profile adds
our two fixes: each index capped to [0, 100], and Tau 0 unless the path moved toward the goal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from emobench.profiles import ScoringProfile, load_profile
from emobench.trackers.epm import EPMEngine

INDEX_NAMES = ("rdi", "etot", "snet", "rho", "sproj", "tau", "rpos", "align", "pen")
EPMQ_WEIGHTS = load_profile().indices.weights.model_dump()  # the same in every profile


@dataclass(frozen=True)
class EPMQ:
    """Every index, group and the total (in [0, 100] under a capping profile)."""

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


def zone_distance(p: Sequence[float], floor: float) -> float:
    """Distance from P to the tolerance zone where every axis is >= floor; overshoot costs nothing."""
    return math.sqrt(sum((floor - x) ** 2 for x in p if x < floor))


def _mean3(a: float, b: float, c: float) -> float:
    return (a + b + c) / 3.0


def _tau(path_length: float, displacement: float) -> float:
    """100 (3 - tau) / 2 with tau = path length / |P_T - P0| floored at 1, the index floored at 0.

    A path that ends where it started has no displacement to be roundabout about: Tau 100, as
    EMPA scores it (the `emobench` profile's progress gate then sets it to 0).
    """
    if displacement == 0.0:
        return 100.0
    return max(0.0, 100.0 * (3.0 - max(1.0, path_length / displacement)) / 2.0)


def epmq(
    p0: Sequence[float],
    vectors: Sequence[Sequence[float]],
    *,
    net_levels: int,
    regression_levels: int,
    n_turns: int | None = None,
    profile: ScoringProfile | None = None,
) -> EPMQ:
    """Score one episode from P0, its judged turn vectors and its MDEP level totals.

    `vectors` holds one v_t per judged turn, so T = len(vectors). `net_levels` is the sum over
    those turns and axes of (progress level - regression level); `regression_levels` the sum of
    regression levels (>= 0). `n_turns` is the episode's total turn count when some turns have
    no valid judgement; it only changes Rho = E / n_turns. Every other index uses the judged
    turns, so an unjudged turn is never counted as a zero-regression or zero-work turn.
    """
    profile = profile or load_profile()
    rules = profile.indices
    if not vectors:
        raise ValueError("EPM-Q needs at least one judged turn")
    if regression_levels < 0:
        raise ValueError(f"regression_levels is a sum of levels, >= 0; got {regression_levels}")
    t = len(vectors)
    total_turns = t if n_turns is None else n_turns
    if total_turns < t:
        raise ValueError(f"n_turns ({total_turns}) is less than the judged turns ({t})")

    engine = EPMEngine(p0, rules=profile.engine)
    for v in vectors:
        engine.step(v)
    path = engine.path
    start, end = path[0], path[-1]
    d0 = zone_distance(start, rules.zone_floor)
    if d0 == 0.0:
        raise ValueError(f"P0 {tuple(start)} is inside the tolerance zone: no deficit to score")
    d_t = zone_distance(end, rules.zone_floor)
    energy = round(engine.energy, profile.engine.value_decimals)
    entries = t + 1  # the turn-0 entry counts, with delta_e 0 and cos 0
    # (P_T - P0).u > 0, taken against -P0 (a positive multiple of u) so lattice input is exact.
    toward_goal = sum((b - a) * -a for a, b in zip(start, end, strict=True)) > 0.0
    path_length = sum(math.hypot(*v) for v in vectors)

    index = {
        "rdi": min(100.0, max(0.0, (100.0 * (d0 - d_t) / d0 + 100.0) / 2.0)),
        "etot": 100.0 * max(0.0, energy) / (rules.etot_scale * d0),
        "snet": 100.0 * max(0, net_levels) / (rules.snet_scale * d0),
        "rho": 100.0 * max(0.0, energy / total_turns) / rules.rate_scale,
        "sproj": 100.0 * max(0.0, sum(engine.delta_es) / entries) / rules.rate_scale,
        "tau": _tau(path_length, math.dist(start, end)),
        "rpos": 100.0 * sum(1 for d in engine.delta_es if d > 0.0) / entries,
        "align": 100.0 * (sum(engine.cosines) / entries + 1.0) / 2.0,
        "pen": max(0.0, 100.0 * (3.0 - regression_levels / entries) / 3.0),
    }
    if rules.tau_needs_progress and not toward_goal:
        index["tau"] = 0.0
    if rules.cap_at_100:
        index = {name: min(100.0, value) for name, value in index.items()}

    outcome = _mean3(index["rdi"], index["etot"], index["snet"])
    efficiency = _mean3(index["rho"], index["sproj"], index["tau"])
    stability = _mean3(index["rpos"], index["align"], index["pen"])
    w = rules.weights
    return EPMQ(
        **index,
        outcome=outcome,
        efficiency=efficiency,
        stability=stability,
        epmq=w.outcome * outcome + w.efficiency * efficiency + w.stability * stability,
    )
