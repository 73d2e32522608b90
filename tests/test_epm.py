"""EPM engine (docs/method.md §5.3) against hand-worked trajectories.

Most examples use P0 = (-3, -4, 0): |P0| = 5, u = (0.6, 0.8, 0), so delta_e = 0.6 C + 0.8 A,
eps_dist = eps_dir = 0.1 |P0| = 0.5 and eps_E = 5 (the default profile's rules, docs/method.md §5.8).
Note E = (P_t - P0).u = P_t.u + |P0|, so E >= eps_E holds exactly when P_t.u >= 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from emobench.trackers.epm import EPMEngine

P0 = (-3.0, -4.0, 0.0)


def _run(engine: EPMEngine, vectors: Sequence[Sequence[float]]) -> list[str | None]:
    return [engine.step(v).status for v in vectors]


def test_step_records_state_work_and_alignment() -> None:
    engine = EPMEngine(P0)
    assert engine.u == pytest.approx((0.6, 0.8, 0.0))
    s = engine.step((1, 1, 0))
    # P1 = (-2, -3, 0); delta_e = 0.6 + 0.8 = 1.4; cos = 1.4 / sqrt(2)
    assert s.turn == 1 and s.p == (-2.0, -3.0, 0.0)
    assert s.delta_e == pytest.approx(1.4)
    assert s.cos == round(1.4 / math.sqrt(2), 4)  # stored to 4 decimals
    s = engine.step((0, 0, 0))
    # A zero vector: no work, alignment taken as 0
    assert (s.delta_e, s.cos, s.energy) == (0.0, 0.0, pytest.approx(1.4))
    s = engine.step((0, 0, 3))
    # Orthogonal to u: no work, cos exactly 0
    assert s.delta_e == 0.0 and s.cos == 0.0
    assert engine.turns == 3
    assert engine.path == [P0, (-2.0, -3.0, 0.0), (-2.0, -3.0, 0.0), (-2.0, -3.0, 3.0)]


def test_success_by_distance() -> None:
    engine = EPMEngine(P0, min_turns=3)
    # v1 = (1,1,0): delta_e 1.4, P1 = (-2,-3,0)
    # v2 = (1,3,0): delta_e 0.6 + 2.4 = 3.0, P2 = (-1,0,0)
    # v3 = (1,0,0): delta_e 0.6, P3 = (0,0,0): |P3| = 0 <= 0.25, and E = 5.0 >= eps_E = 5
    # (E equals eps_E exactly: landing on the origin must succeed despite float rounding.)
    assert _run(engine, [(1, 1, 0), (1, 3, 0), (1, 0, 0)]) == [None, None, "success"]
    assert engine.energy == pytest.approx(5.0)


def test_success_by_crossing_the_ideal_line() -> None:
    engine = EPMEngine(P0, min_turns=2)
    # v = (3,3,0) twice: delta_e = 1.8 + 2.4 = 4.2 each, P2 = (3,2,0), E = 8.4 >= 5
    # |P2| = sqrt(13) = 3.61 > eps_dist, but P2.u = 1.8 + 1.6 = 3.4 >= -eps_dir
    steps = [engine.step((3, 3, 0)) for _ in range(2)]
    assert [s.status for s in steps] == [None, "success"]
    assert math.hypot(*steps[-1].p) > 0.25


def test_near_origin_without_enough_work_is_not_success() -> None:
    engine = EPMEngine(P0, min_turns=1)
    # v = (3, 3.9, 0): P1 = (0, -0.1, 0), |P1| = 0.1 <= eps_dist = 0.5 and P1.u = -0.08 >= -0.5,
    # but E = 1.8 + 3.12 = 4.92 < eps_E = 5, so the E condition fails.
    assert engine.step((3, 3.9, 0)).status is None


def test_collapse_after_five_negative_turns() -> None:
    engine = EPMEngine(P0)  # default min_turns = 12
    # Turns 1-7: v = 0 (delta_e 0, not negative). Turns 8-12: v = (-1,0,0), delta_e = -0.6.
    # At 12: the last 5 delta_e are all < 0; E = -3 < 5, so no success first.
    statuses = _run(engine, [(0, 0, 0)] * 7 + [(-1, 0, 0)] * 5)
    assert statuses == [None] * 11 + ["collapse"]


def test_min_turns_gates_every_status() -> None:
    engine = EPMEngine(P0)
    # delta_e = -0.6 every turn: the collapse pattern holds from turn 5, reported only at 12.
    assert _run(engine, [(-1, 0, 0)] * 12) == [None] * 11 + ["collapse"]
    engine = EPMEngine(P0, min_turns=4)
    # P3 = (6,5,0) is a success state from turn 2 on; reported from turn 4.
    assert _run(engine, [(3, 3, 0)] * 4) == [None, None, None, "success"]


STAGNATION = [(-1, 0, 0)] * 4 + [(0, 0, 0), (1, -1, -2), (0, 0, 0), (1, -1, 0)]


def test_stagnation_and_regression() -> None:
    engine = EPMEngine(P0, min_turns=8)
    # delta_e:  -0.6 x4, 0, 0.6 - 0.8 = -0.2, 0, -0.2
    # P4 = (-7,-4,0), P5 = P4, P6 = (-6,-5,-2), P7 = P6, P8 = (-5,-6,-2)
    # |P| over P4..P8: sqrt(65) each (49+16, 36+25+4, 25+36+4) -> stdev 0 < 0.5
    # last 8 delta_e: 6 negative (75% > 70%), sum = -2.4 - 0.4 = -2.8 < -1
    # last 5 delta_e (-0.6, 0, -0.2, 0, -0.2) are not all negative, so not a collapse
    assert _run(engine, STAGNATION) == [None] * 7 + ["stagnation_regression"]
    assert engine.energy == pytest.approx(-2.8)


def test_stagnation_needs_a_full_window_of_eight() -> None:
    engine = EPMEngine(P0, min_turns=1)
    # From turn 1 on, but the regression window needs 8 delta_e.
    assert _run(engine, STAGNATION)[-2:] == [None, "stagnation_regression"]


def test_no_stagnation_when_the_norm_moves() -> None:
    engine = EPMEngine(P0, min_turns=8)
    # As above but v6 = (-4,1,0): delta_e = -2.4 + 0.8 = -1.6, P6 = P7 = (-11,-3,0), P8 = (-10,-4,0)
    # |P| over P4..P8: 8.06, 8.06, 11.40, 11.40, 10.77 -> mean 9.94, sample stdev 1.73 >= 0.5
    # (regression still holds: 6 of 8 negative, sum -4.2; last 5 not all negative)
    vectors = [*STAGNATION[:5], (-4, 1, 0), (0, 0, 0), (1, -1, 0)]
    assert _run(engine, vectors)[-1] is None


def test_no_stagnation_when_the_regression_is_small() -> None:
    engine = EPMEngine(P0, min_turns=8)
    # STAGNATION scaled by 0.1: |P| over P4..P8 = 5.25, 5.25, 5.27, 5.27, 5.28 (stdev ~0.015)
    # and 6 of 8 delta_e negative, but their sum is -0.28, not below -1.
    assert _run(engine, [(0.1 * c, 0.1 * a, 0.1 * p) for c, a, p in STAGNATION])[-1] is None


def test_oscillation_back_and_forth() -> None:
    engine = EPMEngine(P0, min_turns=1)
    # v alternates (1,0,0), (-1,0,0): delta_e +0.6 / -0.6, so neither collapse nor regression.
    # Over the 12 points P0..P11 the moves add up to L1 length 11 >= 3, while P11 - P0 = (1,0,0)
    # is L1 1 < 3: oscillation, first possible once 12 points exist (turn 11).
    statuses = _run(engine, [(1, 0, 0), (-1, 0, 0)] * 5 + [(1, 0, 0)])
    assert statuses == [None] * 10 + ["oscillation"]


def test_no_oscillation_when_the_window_drifts() -> None:
    engine = EPMEngine(P0, min_turns=1)
    # The same zigzag with a drift along P (orthogonal to u, delta_e 0): P11 - P0 = (1,0,-3),
    # L1 4 >= 3, so the window went somewhere.
    vectors = [(1, 0, 0), (-1, 0, 0)] * 4 + [(1, 0, -1), (-1, 0, -1), (1, 0, -1)]
    assert _run(engine, vectors)[-1] is None


def test_thresholds_and_energy_are_read_rounded() -> None:
    # |P0| = sqrt(2) = 1.414...: eps_E reads 1.41 and E is compared rounded to 2 decimals.
    # u rounds to (0.7071, 0.7071, 0). v = (1,1,0) gives delta_e 1.4142 -> E 1.41 >= 1.41.
    engine = EPMEngine((-1.0, -1.0, 0.0), min_turns=1)
    assert engine.u == (0.7071, 0.7071, 0.0)
    step = engine.step((1, 1, 0))
    assert step.status == "success" and step.delta_e == 1.41
    assert engine.energy < math.sqrt(2)  # the unrounded E falls short of the unrounded |P0|


def test_success_is_checked_before_failure() -> None:
    engine = EPMEngine((-1.0, 0.0, 0.0), min_turns=6)
    # |P0| = 1, u = (1,0,0). v1 = (3,0,0): P1 = (2,0,0), E = 3. Then v = (-0.1,0,0) five times:
    # delta_e = -0.1 each (a collapse run), P6 = (1.5,0,0), E = 2.5 >= 1 and P6.u = 1.5 >= 0.
    assert _run(engine, [(3, 0, 0)] + [(-0.1, 0, 0)] * 5)[-1] == "success"


def test_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        EPMEngine((0, 0, 0))
    with pytest.raises(ValueError):
        EPMEngine((1, 2))
    with pytest.raises(ValueError):
        EPMEngine(P0, min_turns=0)
    engine = EPMEngine(P0)
    with pytest.raises(ValueError):
        engine.step((1, 0, math.nan))
