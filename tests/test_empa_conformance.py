"""Conformance with EMPA's published numbers (docs/method.md §5.8), on a fixture of its recorded runs.

tests/data/empa_conformance.json holds, for a few cases chosen to exercise every rule, P0, the
MDEP levels EMPA read per turn, its turn vectors, its stop and its nine per-case indices (numbers
only; the source note is in the file). Replayed through the engine and EPM-Q under the `empa`
profile they must stop on the same turn for the same reason and give the same indices.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from emobench import profiles as profile_module
from emobench.profiles import PROFILE_NAMES, load_profile
from emobench.scoring.epmq import INDEX_NAMES, epmq
from emobench.scoring.mdep import AXES, turn_vector
from emobench.trackers.epm import EPMEngine

FIXTURE = json.loads((Path(__file__).parent / "data" / "empa_conformance.json").read_text())
CASES = FIXTURE["cases"]
EMPA = load_profile("empa")


def _replay(case: dict[str, Any]) -> tuple[int, str, dict[str, float]]:
    vectors, net, regression = [], 0, 0
    for levels in case["levels"]:
        if levels is None:  # a lost judgement, scored by EMPA as v = 0
            vectors.append((0.0, 0.0, 0.0))
            continue
        progress = dict(zip(AXES, levels[0::2], strict=True))
        regress = dict(zip(AXES, levels[1::2], strict=True))
        vectors.append(turn_vector(progress, regress))
        net += sum(progress.values()) - sum(regress.values())
        regression += sum(regress.values())
    assert vectors == [tuple(float(x) for x in v) for v in case["vectors"]]
    engine = EPMEngine(case["p0"], min_turns=12, rules=EMPA.engine)
    stop_turn, reason = len(vectors), "max_turns"
    for v in vectors:
        step = engine.step(v)
        if step.status is not None:
            stop_turn, reason = step.turn, f"epm_{step.status}"
            break
    q = epmq(case["p0"], vectors, net_levels=net, regression_levels=regression, profile=EMPA)
    return stop_turn, reason, {name: getattr(q, name) for name in INDEX_NAMES}


def test_the_fixture_exercises_every_rule() -> None:
    reasons = {c["stop"]["reason"] for c in CASES}
    assert {"epm_success", "epm_collapse", "epm_oscillation", "max_turns"} <= reasons
    assert any(None in c["levels"] for c in CASES)  # a lost judgement
    assert any(v > 100 for c in CASES for v in c["indices"].values())  # nothing capped at 100
    assert any(c["indices"]["rdi"] == 0.0 for c in CASES)  # RDI clamped at 0
    assert any(c["indices"]["tau"] == 0.0 for c in CASES)  # Tau floored at 0


@pytest.mark.parametrize("case", CASES, ids=[f"{c['model']}/{c['case']}" for c in CASES])
def test_replay_matches_empa(case: dict[str, Any]) -> None:
    stop_turn, reason, indices = _replay(case)
    assert (stop_turn, reason) == (case["stop"]["turn"], case["stop"]["reason"])
    for name in INDEX_NAMES:
        assert indices[name] == pytest.approx(case["indices"][name], abs=1e-9), name


def test_profile_files_differ_by_the_two_fixes_alone() -> None:
    folder = Path(profile_module.__file__).parent
    data = {name: yaml.safe_load((folder / f"{name}.yaml").read_text()) for name in PROFILE_NAMES}
    mine, theirs = data["emobench"], data["empa"]
    assert mine["engine"] == theirs["engine"]
    differ = {k for k in mine["indices"] if mine["indices"][k] != theirs["indices"][k]}
    assert differ == {"cap_at_100", "tau_needs_progress"}
    assert (mine["indices"]["cap_at_100"], mine["indices"]["tau_needs_progress"]) == (True, True)
    assert (theirs["indices"]["cap_at_100"], theirs["indices"]["tau_needs_progress"]) == (False, False)
    assert set(mine) == set(theirs) == {"name", "summary", "engine", "indices"}


def test_unknown_profile_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown scoring profile"):
        load_profile("paper")
