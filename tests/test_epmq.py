"""EPM-Q (docs/method.md §5.4, §5.8): hand-worked episodes and property tests on the real MDEP lattice.

Hand examples use P0 = (-3, -4, 0): u = (0.6, 0.8, 0), delta_e = 0.6 C + 0.8 A, and the distance
to the tolerance zone (every axis >= -1) is d0 = sqrt(2^2 + 3^2) = sqrt(13).
"""

from __future__ import annotations

import math
from dataclasses import fields

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.profiles import load_profile
from emobench.scoring.epmq import EPMQ, EPMQ_WEIGHTS, INDEX_NAMES, epmq, zone_distance
from emobench.scoring.mdep import AXES, turn_vector

P0 = (-3.0, -4.0, 0.0)
D0 = math.sqrt(13)
EMPA = load_profile("empa")


def _groups_and_total(q: EPMQ) -> None:
    assert q.outcome == pytest.approx((q.rdi + q.etot + q.snet) / 3)
    assert q.efficiency == pytest.approx((q.rho + q.sproj + q.tau) / 3)
    assert q.stability == pytest.approx((q.rpos + q.align + q.pen) / 3)
    assert q.epmq == pytest.approx(0.4 * q.outcome + 0.2 * q.efficiency + 0.4 * q.stability)


def test_weights_are_the_method_weights() -> None:
    assert EPMQ_WEIGHTS == {"outcome": 0.4, "efficiency": 0.2, "stability": 0.4}


def test_zone_distance_ignores_overshoot() -> None:
    assert zone_distance((-3, -4, 0), -1.0) == D0
    assert zone_distance((5, -1, 0.5), -1.0) == 0.0  # past the origin, or on the zone's edge: 0
    assert zone_distance((-2, 7, 7), -1.0) == 1.0


def test_straight_right_way_path() -> None:
    # v = (1,1,0) twice: progress level 1 on C and A; P_T = (-1,-2,0), d_T = 1
    q = epmq(P0, [(1, 1, 0), (1, 1, 0)], net_levels=4, regression_levels=0)
    assert q.rdi == pytest.approx((100 * (D0 - 1) / D0 + 100) / 2)
    # delta_e = 1.4 each, E = 2.8: Etot = 100 * 2.8 / (1.2 d0); S_net counts levels: 4
    assert q.etot == pytest.approx(280 / (1.2 * D0))
    assert q.snet == pytest.approx(400 / (1.5 * D0))
    # Rho = E/T = 1.4 -> 56; Sproj averages over T+1 = 3 entries (turn 0 has delta_e 0) -> 37.33
    assert q.rho == pytest.approx(56.0)
    assert q.sproj == pytest.approx(100 * (2.8 / 3) / 2.5)
    assert q.tau == pytest.approx(100.0)  # a straight path toward the goal
    # Rpos and Align also count the turn-0 entry; cos 0.9899 (4 decimals)
    assert q.rpos == pytest.approx(200 / 3)
    assert q.align == pytest.approx(100 * (2 * 0.9899 / 3 + 1) / 2)
    assert q.pen == 100.0
    _groups_and_total(q)


def test_the_two_profiles_on_a_straight_wrong_way_path() -> None:
    # v = (-1,-1,0) twice (progress 1 + regression 1 on C and A): straight, but away from the goal
    args = dict(net_levels=0, regression_levels=4)
    mine, theirs = epmq(P0, [(-1, -1, 0)] * 2, **args), epmq(P0, [(-1, -1, 0)] * 2, profile=EMPA, **args)
    assert theirs.tau == 100.0 and mine.tau == 0.0  # fix 2: no efficiency credit the wrong way
    # P_T = (-5,-6,0), d_T = sqrt(41): RDI = (100 (d0 - d_T)/d0 + 100)/2 = 11.20
    assert mine.rdi == theirs.rdi == pytest.approx((100 * (D0 - math.sqrt(41)) / D0 + 100) / 2)
    assert (mine.etot, mine.rho, mine.sproj, mine.rpos) == (0.0, 0.0, 0.0, 0.0)
    # pen = 4 regression levels / 3 entries -> 100 (3 - 4/3)/3 = 55.56, in both
    assert mine.pen == theirs.pen == pytest.approx(100 * (3 - 4 / 3) / 3)


def test_the_two_profiles_on_an_overshoot() -> None:
    # v = (3,3,0) three times (progress 2 on C and A): E = 12.6, S_net = 12 levels, P_T = (6,5,0), d_T = 0
    args = dict(net_levels=12, regression_levels=0)
    mine, theirs = epmq(P0, [(3, 3, 0)] * 3, **args), epmq(P0, [(3, 3, 0)] * 3, profile=EMPA, **args)
    assert theirs.etot == pytest.approx(1260 / (1.2 * D0)) and theirs.etot > 100
    assert theirs.rho == pytest.approx(168.0)
    assert (mine.etot, mine.snet, mine.rho) == (100.0, 100.0, 100.0)  # fix 1: capped at 100
    assert mine.rdi == theirs.rdi == 100.0  # the tolerance zone: overshooting costs nothing
    assert theirs.epmq > 100 >= mine.epmq


def test_tau_with_zero_displacement() -> None:
    # P_T == P0 after a non-zero path: EMPA scores Tau 100; the default profile 0 (no progress)
    args = dict(net_levels=0, regression_levels=1)
    assert epmq(P0, [(1, 0, 0), (-1, 0, 0)], profile=EMPA, **args).tau == 100.0
    assert epmq(P0, [(1, 0, 0), (-1, 0, 0)], **args).tau == 0.0


def test_tau_of_a_bent_path() -> None:
    # v1 = (3,0,0), v2 = (0,3,0): path 6, displacement 3 sqrt2 -> tau = sqrt2 -> Tau 79.29
    q = epmq(P0, [(3, 0, 0), (0, 3, 0)], net_levels=4, regression_levels=0)
    assert q.tau == pytest.approx(100 * (3 - math.sqrt(2)) / 2)
    # tau > 3 floors Tau at 0: path 5 over displacement 1 (toward the goal)
    q = epmq(P0, [(1, 0, 0), (-1, 0, 0), (1, 0, 0), (-1, 0, 0), (1, 0, 0)], net_levels=1, regression_levels=2, profile=EMPA)
    assert q.tau == 0.0


def test_rho_uses_all_turns_when_some_were_not_judged() -> None:
    # Two judged turns of delta_e 1.4 in a 4-turn episode: Rho = 100 (2.8/4)/2.5 = 28
    q = epmq(P0, [(1, 1, 0), (1, 1, 0)], net_levels=4, regression_levels=0, n_turns=4)
    assert q.rho == pytest.approx(28.0)
    assert q.sproj == pytest.approx(100 * (2.8 / 3) / 2.5)


def test_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        epmq(P0, [], net_levels=0, regression_levels=0)
    with pytest.raises(ValueError):
        epmq((0, 0, 0), [(1, 1, 0)], net_levels=2, regression_levels=0)
    with pytest.raises(ValueError):
        epmq(P0, [(1, 1, 0)], net_levels=2, regression_levels=-1)
    with pytest.raises(ValueError):
        epmq(P0, [(1, 1, 0), (1, 1, 0)], net_levels=4, regression_levels=0, n_turns=1)


def test_as_dict_has_every_field() -> None:
    q = epmq(P0, [(1, 1, 0)], net_levels=2, regression_levels=0)
    assert list(q.as_dict()) == [f.name for f in fields(EPMQ)]


# Real inputs: IEDR P0 (each axis a sum of level steps 2/3/4, up to -27), MDEP levels 0..2.
p0s = st.tuples(*[st.integers(-27, 0).filter(lambda x: x == 0 or x <= -2)] * 3).filter(any)
levels = st.fixed_dictionaries({axis: st.integers(0, 2) for axis in AXES})
turns = st.lists(st.tuples(levels, levels), min_size=1, max_size=45)


@settings(max_examples=150, deadline=None)
@given(p0=p0s, judged=turns)
def test_the_profiles_differ_by_the_two_fixes_alone(p0: tuple[int, int, int], judged: list) -> None:
    vectors = [turn_vector(prog, reg) for prog, reg in judged]
    regression = sum(sum(reg.values()) for _, reg in judged)
    net = sum(sum(prog.values()) for prog, _ in judged) - regression
    mine = epmq(p0, vectors, net_levels=net, regression_levels=regression)
    theirs = epmq(p0, vectors, net_levels=net, regression_levels=regression, profile=EMPA)
    toward_goal = sum(sum(v[i] for v in vectors) * -p0[i] for i in range(3)) > 0
    for name in INDEX_NAMES:
        value, raw = getattr(mine, name), getattr(theirs, name)
        assert 0.0 <= value <= 100.0 and raw >= 0.0, name
        if name == "tau" and not toward_goal:
            assert value == 0.0
        else:
            assert value == min(100.0, raw), name
    _groups_and_total(mine)
    _groups_and_total(theirs)
