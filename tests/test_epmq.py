"""EPM-Q (docs/method.md §5.4): hand-worked episodes and property tests on the real MDEP lattice.

Hand examples use P0 = (-3, -4, 0): r0 = 5, u = (0.6, 0.8, 0), delta_e = 0.6 C + 0.8 A.
"""

from __future__ import annotations

import math
from dataclasses import fields

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.scoring.epmq import EPMQ, EPMQ_WEIGHTS, epmq
from emobench.scoring.mdep import AXES, regression_points, turn_vector
from emobench.trackers.epm import EPMEngine

P0 = (-3.0, -4.0, 0.0)
SQRT2 = math.sqrt(2.0)
INDICES = ("rdi", "etot", "snet", "rho", "sproj", "tau", "rpos", "align", "pen")


def _groups_and_total(q: EPMQ) -> None:
    assert q.outcome == pytest.approx((q.rdi + q.etot + q.snet) / 3)
    assert q.efficiency == pytest.approx((q.rho + q.sproj + q.tau) / 3)
    assert q.stability == pytest.approx((q.rpos + q.align + q.pen) / 3)
    assert q.epmq == pytest.approx(0.4 * q.outcome + 0.2 * q.efficiency + 0.4 * q.stability)


def test_weights_are_the_design_weights() -> None:
    assert EPMQ_WEIGHTS == {"outcome": 0.4, "efficiency": 0.2, "stability": 0.4}


def test_straight_right_way_path() -> None:
    # v = (1,1,0) twice (progress level 1 on C and A, no regression)
    q = epmq(P0, [(1, 1, 0), (1, 1, 0)], 0.0)
    # P_T = (-1,-2,0), r_T = sqrt(5): RDI = (100 (5 - sqrt5)/5 + 100)/2 = 77.64
    assert q.rdi == pytest.approx((100 * (5 - math.sqrt(5)) / 5 + 100) / 2)
    # delta_e = 1.4 each, E = 2.8: Etot = 100 * 2.8 / (1.2 * 5) = 46.67
    assert q.etot == pytest.approx(280 / 6)
    # S_net = 4: Snet = 100 * 4 / 7.5 = 53.33
    assert q.snet == pytest.approx(400 / 7.5)
    # Rho = Sproj = 100 * 1.4 / 2.5 = 56
    assert (q.rho, q.sproj) == (pytest.approx(56.0), pytest.approx(56.0))
    # path 2 sqrt2 / displacement |(2,2,0)| = 2 sqrt2 -> tau = 1 -> Tau = 100 (moved toward goal)
    assert q.tau == pytest.approx(100.0)
    # Rpos 100; cos = 1.4/sqrt2 = 0.98995 -> Align = 99.50; pen = 0 -> Pen = 100
    assert q.rpos == 100.0
    assert q.align == pytest.approx(100 * (1.4 / SQRT2 + 1) / 2)
    assert q.pen == 100.0
    # Outcome 59.21, Efficiency 70.67, Stability 99.83 -> EPM-Q = 23.69 + 14.13 + 39.93 = 77.75
    assert q.epmq == pytest.approx(77.7516, abs=1e-4)
    _groups_and_total(q)


def test_straight_wrong_way_path_earns_no_tau() -> None:
    # v = (-1,-1,0) twice: progress 1 + regression 1 on C and A; regression points -4 per turn
    q = epmq(P0, [(-1, -1, 0), (-1, -1, 0)], -8.0)
    # P_T = (-5,-6,0), r_T = sqrt(61) = 7.81: RDI = (100 (5 - 7.81)/5 + 100)/2 = 21.90
    assert q.rdi == pytest.approx((100 * (5 - math.sqrt(61)) / 5 + 100) / 2)
    # E = -2.8, S_net = -4: Etot = Snet = Rho = Sproj = 0
    assert (q.etot, q.snet, q.rho, q.sproj) == (0.0, 0.0, 0.0, 0.0)
    # tau = 1 (a straight path): the unfixed formula gives 100, but (P_T - P0).u = -2.8 < 0 -> 0
    assert q.tau == 0.0
    # Rpos 0; cos = -0.98995 -> Align = 100 (1 - 0.98995)/2 = 0.50
    assert q.rpos == 0.0
    assert q.align == pytest.approx(100 * (1 - 1.4 / SQRT2) / 2)
    # pen = 8/2 = 4 -> 100 (3 - 4)/3 = -33.3, clipped to 0
    assert q.pen == 0.0
    # Outcome 7.30, Efficiency 0, Stability 0.168 -> EPM-Q = 2.987
    assert q.epmq == pytest.approx(2.98667, abs=1e-4)
    _groups_and_total(q)


def test_overshoot_clips_indices_at_100() -> None:
    # v = (3,3,0) three times: delta_e = 4.2 each, E = 12.6, S_net = 18, P_T = (6,5,0)
    q = epmq(P0, [(3, 3, 0)] * 3, 0.0)
    # Etot = 1260/6 = 210, Snet = 1800/7.5 = 240, Rho = Sproj = 420/2.5 = 168: all clipped to 100
    assert (q.etot, q.snet, q.rho, q.sproj) == (100.0, 100.0, 100.0, 100.0)
    # r_T = sqrt(61) > r0: overshooting the origin is penalised by RDI = 21.90
    assert q.rdi == pytest.approx((100 * (5 - math.sqrt(61)) / 5 + 100) / 2)
    _groups_and_total(q)


def test_tau_of_a_bent_path() -> None:
    # v1 = (3,0,0), v2 = (0,3,0): path 6, displacement |(3,3,0)| = 3 sqrt2 -> tau = sqrt2
    # Tau = 100 (3 - sqrt2)/2 = 79.29
    q = epmq(P0, [(3, 0, 0), (0, 3, 0)], 0.0)
    assert q.tau == pytest.approx(100 * (3 - SQRT2) / 2)
    # A zigzag: path 1 + 1 + 3 = 5, displacement 3 -> tau = 5/3 -> Tau = 66.67
    q = epmq(P0, [(1, 0, 0), (-1, 0, 0), (3, 0, 0)], -2.0)
    assert q.tau == pytest.approx(100 * (3 - 5 / 3) / 2)
    # tau > 3 clips Tau to 0: path 1+1+1+1+1 = 5 over displacement 1 (toward the goal)
    q = epmq(P0, [(1, 0, 0), (-1, 0, 0), (1, 0, 0), (-1, 0, 0), (1, 0, 0)], -4.0)
    assert q.tau == 0.0


def test_tau_when_the_path_returns_to_p0() -> None:
    # P_T == P0: tau is infinite, and the path did not move toward the goal: Tau = 0
    q = epmq(P0, [(1, 0, 0), (-1, 0, 0)], -2.0)
    assert q.tau == 0.0
    q = epmq(P0, [(0, 0, 0)], 0.0)
    assert q.tau == 0.0 and q.align == 50.0 and q.rpos == 0.0


def test_rho_uses_all_turns_when_some_were_not_judged() -> None:
    # Two judged turns of delta_e 1.4 in a 4-turn episode: Sproj = 56, Rho = 100 * (2.8/4)/2.5 = 28
    q = epmq(P0, [(1, 1, 0), (1, 1, 0)], 0.0, n_turns=4)
    assert q.sproj == pytest.approx(56.0)
    assert q.rho == pytest.approx(28.0)


def test_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        epmq(P0, [], 0.0)
    with pytest.raises(ValueError):
        epmq((0, 0, 0), [(1, 1, 0)], 0.0)
    with pytest.raises(ValueError):
        epmq(P0, [(1, 1, 0)], 2.0)
    with pytest.raises(ValueError):
        epmq(P0, [(1, 1, 0), (1, 1, 0)], 0.0, n_turns=1)


def test_as_dict_has_every_field() -> None:
    q = epmq(P0, [(1, 1, 0)], 0.0)
    assert list(q.as_dict()) == [f.name for f in fields(EPMQ)]


# Real inputs: P0 components in the IEDR range -27..0 (not all zero), MDEP levels 0..2 per item.
p0s = st.tuples(*[st.integers(-27, 0)] * 3).filter(any)
levels = st.fixed_dictionaries({axis: st.integers(0, 2) for axis in AXES})
Judged = list[tuple[dict[str, int], dict[str, int]]]  # (progress, regression) levels per turn
turns = st.lists(st.tuples(levels, levels), min_size=1, max_size=45)


@settings(max_examples=120, deadline=None)
@given(p0=p0s, judged=turns)
def test_properties_on_the_mdep_lattice(p0: tuple[int, int, int], judged: Judged) -> None:
    vectors = [turn_vector(prog, reg) for prog, reg in judged]
    regression = sum(regression_points(reg) for _, reg in judged)
    q = epmq(p0, vectors, regression)
    for name, value in q.as_dict().items():
        assert 0.0 <= value <= 100.0, name
    assert q.rho == q.sproj  # every turn judged
    _groups_and_total(q)

    engine = EPMEngine(p0, min_turns=1)
    steps = [engine.step(v) for v in vectors]
    start, end = engine.path[0], engine.path[-1]
    assert end == tuple(p0[i] + sum(v[i] for v in vectors) for i in range(3))  # P_T = P0 + sum v
    assert engine.energy == pytest.approx(math.fsum(engine.delta_es), abs=1e-9)
    moved_along_u = sum((b - a) * u for a, b, u in zip(start, end, engine.u, strict=True))
    assert engine.energy == pytest.approx(moved_along_u, abs=1e-9)  # E = (P_T - P0).u
    assert all(-1.0 <= s.cos <= 1.0 for s in steps)
    if moved_along_u <= 0.0:
        assert q.tau == 0.0
    # E >= |P0| is the same as P_t.u >= 0, and then the distance/direction clause holds too,
    # so on the integer lattice success is exactly "P_t . (-P0) >= 0".
    for s in steps:
        crossed = sum(c * -x for c, x in zip(s.p, start, strict=True)) >= 0
        assert (s.status == "success") == crossed


@settings(max_examples=40, deadline=None)
@given(p0=p0s, judged=turns, min_turns=st.integers(1, 45))
def test_no_status_before_min_turns(p0: tuple[int, int, int], judged: Judged, min_turns: int) -> None:
    engine = EPMEngine(p0, min_turns=min_turns)
    for prog, reg in judged:
        step = engine.step(turn_vector(prog, reg))
        if step.turn < min_turns:
            assert step.status is None
