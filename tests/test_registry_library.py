"""The shipped library: validates, and its splits meet the stratification of issue 3.

Counts are computed from the loaded files, so editing a card that breaks a target fails here.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from emobench.registry import Case, Registry, load_registry
from emobench.registry.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


@pytest.fixture(scope="module")
def reg() -> Registry:
    return load_registry(ROOT)


def counts(cases: list[Case]) -> dict[str, Counter[str]]:
    return {
        "category": Counter(c.scenario.category for c in cases),
        "axis": Counter(c.dominant_axis for c in cases),
        "difficulty": Counter(c.difficulty for c in cases),
        "threshold": Counter(c.persona.threshold for c in cases),
    }


def test_test_split_stratification(reg: Registry) -> None:
    cases = reg.cases("test")
    got = counts(cases)
    assert len(cases) == 30
    assert got["category"] == dict.fromkeys(
        ["life", "health", "leisure", "values", "relations", "career"], 5)
    assert got["axis"] == {"C": 10, "A": 10, "P": 10}
    assert got["difficulty"] == {"easy": 4, "medium": 10, "hard": 11, "very_hard": 5}
    assert got["threshold"]["high"] >= 9
    assert {"low", "medium"} <= set(got["threshold"])


def test_dev_split_is_large_and_disjoint_from_test(reg: Registry) -> None:
    dev, test = reg.cases("dev"), reg.cases("test")
    assert len(dev) >= 60
    assert not {c.id for c in dev} & {c.id for c in test}
    # no test scenario leaks into dev, so tuning on dev cannot tune on test stories
    assert not {c.scenario.id for c in dev} & {c.scenario.id for c in test}
    got = counts(dev)
    assert set(got["category"]) == {"life", "health", "leisure", "values", "relations", "career"}
    assert set(got["axis"]) == {"C", "A", "P"}
    assert set(got["difficulty"]) == {"easy", "medium", "hard", "very_hard"}


def test_demo_split(reg: Registry) -> None:
    demo = reg.cases("demo")
    assert len(demo) == 2
    assert len({c.scenario.id for c in demo}) == 2 and len({c.persona.id for c in demo}) == 2
    # the demo pairs are test pairs with the same levels, so demo numbers mean the same thing
    test_pairs = {(c.scenario.id, c.persona.id): c.iedr for c in reg.cases("test")}
    assert all(test_pairs[(c.scenario.id, c.persona.id)] == c.iedr for c in demo)


def test_counterfactual_sets(reg: Registry) -> None:
    sets = reg.counterfactual_sets()
    assert len(sets) >= 10
    for scenario_id, cases in sets.items():
        personas = {c.persona.id: c.persona for c in cases}
        assert 2 <= len(personas) <= 3, scenario_id
        # members must differ in what they need or how hard they are to reach
        profiles = {(p.needs.dominant, p.threshold) for p in personas.values()}
        assert len(profiles) == len(personas), scenario_id
        assert len({c.split for c in cases if c.split != "demo"}) == 1, scenario_id
    singles = [c for c in reg.all_cases() if c.scenario.id not in sets]
    assert all(c.counterfactual_set is None for c in singles)


def test_files_are_named_by_id(reg: Registry) -> None:
    for folder, cards in (("personas", reg.personas), ("scenarios", reg.scenarios)):
        assert {p.stem for p in (ROOT / folder).glob("*.yaml")} == set(cards)


def test_levels_are_plausible_for_the_persona(reg: Registry) -> None:
    for case in reg.all_cases():
        levels = case.iedr.model_dump()
        priority = {axis: levels[f"{axis}3"] for axis in "CAP"}
        assert priority[case.dominant_axis] == max(priority.values()), case.id


def test_cards_are_complete_and_varied(reg: Registry) -> None:
    for scenario in reg.scenarios.values():
        assert len({m.period for m in scenario.memories}) >= 2, scenario.id
    used = {c.scenario.id for c in reg.all_cases()}
    assert used == set(reg.scenarios)
    assert {c.persona.id for c in reg.all_cases()} == set(reg.personas)
    assert sum(s.professional_help for s in reg.scenarios.values()) >= 3
    personas = list(reg.personas.values())
    assert len({p.style.length for p in personas}) == 4
    assert min(p.age for p in personas) < 25 and max(p.age for p in personas) > 65


def test_case_api(reg: Registry) -> None:
    case = reg.case("test-08")
    assert case.p0 == (-21, -21, -22) and case.difficulty == "very_hard"
    assert case.dominant_axis == "C" and case.split == "test"
    assert reg.filter(split="test", dominant_axis="C", threshold="high") == [
        c for c in reg.cases("test") if c.dominant_axis == "C" and c.persona.threshold == "high"
    ]
    assert len(reg.filter(category="health")) == len(
        [c for s in reg.splits for c in reg.cases(s) if c.scenario.category == "health"])
    assert Case.model_validate_json(case.model_dump_json()) == case
    assert len(reg.version("test")) == 64 and reg.version("test") != reg.version("dev")


def test_cli_validate_and_stats(reg: Registry) -> None:
    result = runner.invoke(app, ["validate", "--root", str(ROOT)])
    assert result.exit_code == 0, result.output
    assert f"test: 30 cases, version {reg.version('test')[:16]}" in result.stdout
    stats = runner.invoke(app, ["stats", "--split", "test", "--root", str(ROOT)],
                          env={"COLUMNS": "160"})
    assert stats.exit_code == 0
    assert "all targets met" in stats.stdout and "✗" not in stats.stdout
    assert stats.stdout.count("✓") == 1 + 6 + 3 + 4 + 1 + 1


def test_cli_list_and_show() -> None:
    listed = runner.invoke(app, ["list", "--split", "test", "--axis", "P", "--difficulty", "hard",
                                 "--root", str(ROOT)], env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and "5 cases" in listed.stdout
    shown = runner.invoke(app, ["show", "test-04", "--root", str(ROOT)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    for words in ("P0 = (-9, -27, -24)", "‖P0‖ = 37.23", "very_hard", "dominant axis = A",
                  "professional help", "Gary Thompson"):
        assert words in shown.stdout
