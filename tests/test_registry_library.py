"""The shipped library: validates against its authoring rules, its splits meet the
stratification of issue 3 and the second edition's valence share, and the first edition
still loads as test-v1 / dev-v1 with the versions its runs recorded.

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
        "valence": Counter(c.valence for c in cases),
    }

# The archived editions' split versions, as recorded by runs made on them.
FIRST_EDITION = {
    "test-v1": "6b583557674dfb06db01606166842efbbaab766fbaa7455cb99ae64ba207cff8",
    "dev-v1": "57892b8d18dfdb794f092b1bcc7bc6590a040aca74b0a9c17e4e4cfe142ff25c",
}
SECOND_EDITION = {
    "test-v2": "6299029fe17fead60c339f9941e3d53c2a7e11148845b0dfafbd24a169268377",
    "dev-v2": "a7609352ccdef12206ac292e4a8c69c5cabc8e60d67dc4d611ff93020f42e533",
    "demo-v2": "f37374fad87b3e5e9c2e71f4b435900b8f9fab7a3b9f0ede8920ca7b44bfe56c",
}
THIRD_EDITION = {
    "test-v3": "918572a974967cfd5cb687a9ef86c263c2ac1341e1fcc43a555cf0ac8f7e29ea",
    "dev-v3": "8053ee351be61f2e70ac9dcb524f3ac38caf3cf5cf9c38291f6154a9d81cbbb0",
    "demo-v3": "f725c54946bf3090468ae737e91a211be9e0eff467699d4e0e7281d54d991a89",
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
    # good news, pride and relief are at least a quarter of the split
    assert got["valence"]["positive"] + got["valence"]["mixed"] >= 30 / 4
    assert got["valence"]["positive"] >= 1 and got["valence"]["mixed"] >= 1
    # one level changed must not move a case to another band
    edges = (27, 32, 36)
    assert all(min(abs(c.p0_norm - e) for e in edges) >= 0.5 for c in cases)


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
    assert got["valence"]["positive"] + got["valence"]["mixed"] >= len(dev) / 4


def test_archived_editions_stay_loadable_with_their_recorded_versions(reg: Registry) -> None:
    archived = {**FIRST_EDITION, **SECOND_EDITION, **THIRD_EDITION}
    assert reg.archived_splits == sorted(archived)
    for split, version in archived.items():
        assert reg.version(split) == version
        assert reg.split_with_version(version) == split
    old = reg.case("test-04")
    assert old.split == "test-v1" and old.persona.age == 71  # the first edition, as it was
    second = reg.case("test2-04")
    assert second.split == "test-v2" and second.persona.age == 75
    # an archived case keeps its scenario's hidden need; the current edition's cases hold their own
    assert second.case_need is None and second.hidden_need == second.scenario.hidden_need
    assert all(c.case_need is not None and c.scenario.hidden_need is None for c in reg.edition_cases())
    third = reg.case("test3-08")
    assert third.split == "test-v3" and third.persona.id == "tomasz-kowalski" and third.case_need is not None
    assert reg.version("test") not in (FIRST_EDITION["test-v1"], SECOND_EDITION["test-v2"], THIRD_EDITION["test-v3"])


def test_demo_split(reg: Registry) -> None:
    demo = reg.cases("demo")
    assert len(demo) == 2
    assert len({c.scenario.id for c in demo}) == 2 and len({c.persona.id for c in demo}) == 2
    # from edition 4 the demo cases copy dev cases (pair, levels, opening and hidden need), so demo
    # numbers mean what dev numbers mean and nothing in demo comes from the held-out test split
    dev = {(c.scenario.id, c.persona.id): c for c in reg.cases("dev")}
    for c in demo:
        twin = dev[(c.scenario.id, c.persona.id)]
        assert (twin.iedr, twin.opening, twin.hidden_need) == (c.iedr, c.opening, c.hidden_need), c.id
    test = reg.cases("test")
    assert not {c.persona.id for c in demo} & {c.persona.id for c in test}
    assert not {c.scenario.id for c in demo} & {c.scenario.id for c in test}


def test_counterfactual_sets(reg: Registry) -> None:
    sets = reg.counterfactual_sets()
    assert len(sets) >= 10
    # each member opens in its own voice: no two openings of a set are the same
    for cases in sets.values():
        openings = [c.opening for c in cases]
        assert all(c.opening_override for c in cases) and len(set(openings)) == len(openings)
    for scenario_id, cases in sets.items():
        personas = {c.persona.id: c.persona for c in cases}
        assert 2 <= len(personas) <= 3, scenario_id
        # members must differ in what they need or how hard they are to reach
        profiles = {(p.needs.dominant, p.threshold) for p in personas.values()}
        assert len(profiles) == len(personas), scenario_id
        assert len({c.split for c in cases if c.split != "demo"}) == 1, scenario_id
    singles = [c for c in reg.edition_cases() if c.scenario.id not in sets]
    assert all(c.counterfactual_set is None for c in singles)


def test_counterfactual_members_need_different_things_on_their_own_axis(reg: Registry) -> None:
    sets = reg.counterfactual_sets()
    assert len(sets) >= 12
    for scenario_id, cases in sets.items():
        needs = [" ".join(c.hidden_need.lower().split()) for c in cases]
        assert len(set(needs)) == len(needs), scenario_id
        for case in cases:
            assert case.case_need is not None and case.case_need.axis == case.dominant_axis, case.id
    assert all(c.case_need is not None and c.case_need.axis == c.dominant_axis for c in reg.edition_cases())


def test_files_are_named_by_id(reg: Registry) -> None:
    for folder, cards in (("personas", reg.personas), ("scenarios", reg.scenarios)):
        files = [*(ROOT / folder).glob("*.yaml"), *(ROOT / folder / "zh").glob("*.yaml")]
        assert {p.stem for p in files} == set(cards)


def test_levels_are_plausible_for_the_persona(reg: Registry) -> None:
    for case in reg.edition_cases():
        levels = case.iedr.model_dump()
        priority = {axis: levels[f"{axis}3"] for axis in "CAP"}
        assert priority[case.dominant_axis] == max(priority.values()), case.id


def test_cards_are_complete_and_varied(reg: Registry) -> None:
    for scenario in reg.scenarios.values():
        assert len({m.period for m in scenario.memories}) >= 2, scenario.id
    used = {c.scenario.id for c in reg.edition_cases()}
    assert used == set(reg.scenarios)
    assert {c.persona.id for c in reg.edition_cases()} == set(reg.personas)
    assert sum(s.professional_help for s in reg.scenarios.values()) >= 3
    personas = list(reg.personas.values())
    assert len({p.style.length for p in personas}) == 4
    assert min(p.age for p in personas) < 25 and max(p.age for p in personas) > 65
    # not one shape for every case: stage counts vary, and not every opening is a question
    scenarios = list(reg.scenarios.values())
    assert len({len(s.stages) for s in scenarios}) >= 4
    assert sum("?" not in s.opening for s in scenarios) >= 5
    assert all(p.facts is not None for p in personas)


def test_the_contradictions_of_the_first_edition_are_fixed(reg: Registry) -> None:
    pieter = reg.personas["pieter-de-vries"]
    joost = next(r for r in pieter.facts.relatives if r.name == "Joost") if pieter.facts else None
    assert joost is not None and joost.status == "dead" and (joost.born or 0) < pieter.facts.born  # type: ignore[union-attr]
    # no case asks Pieter about a living sibling, and the raft memory makes Joost the elder
    assert all(c.scenario.id != "inheritance-split" for c in reg.edition_cases() if c.persona.id == "pieter-de-vries")
    archived = {c.scenario.id: c.scenario for c in reg.cases("test-v3")}
    assert "when he was nine and Joost eleven" in archived["selling-the-boat"].memories[0].text
    gary = reg.personas["gary-thompson"]
    dance = archived["empty-house-after-wife"].memories[0]
    assert gary.facts is not None and dance.year == 1969 and dance.year - gary.facts.born >= 18


def test_case_api(reg: Registry) -> None:
    case = reg.case("test2-08")  # archived, so its numbers stay put
    assert case.p0 == (-21, -21, -22) and case.difficulty == "very_hard"
    assert case.dominant_axis == "C" and case.split == "test-v2"
    assert reg.filter(split="test", dominant_axis="C", threshold="high") == [
        c for c in reg.cases("test") if c.dominant_axis == "C" and c.persona.threshold == "high"
    ]
    assert len(reg.filter(category="health")) == len(
        [c for s in reg.splits for c in reg.cases(s) if c.scenario.category == "health"])
    assert Case.model_validate_json(case.model_dump_json()) == case
    good_news = reg.filter(split="test", valence="positive") + reg.filter(split="test", valence="mixed")
    assert len(good_news) >= 8 and all(c.scenario.valence in ("positive", "mixed") for c in good_news)
    assert len(reg.version("test")) == 64 and reg.version("test") != reg.version("dev")


def test_cli_validate_and_stats(reg: Registry) -> None:
    result = runner.invoke(app, ["validate", "--root", str(ROOT)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: edition 4, ")
    assert f"test: 30 cases, version {reg.version('test')[:16]}" in result.stdout
    assert f"test-v1: 30 cases, version {FIRST_EDITION['test-v1'][:16]}  (archived)" in result.stdout
    assert f"test-v2: 30 cases, version {SECOND_EDITION['test-v2'][:16]}  (archived)" in result.stdout
    assert f"test-v3: 30 cases, version {THIRD_EDITION['test-v3'][:16]}  (archived)" in result.stdout
    stats = runner.invoke(app, ["stats", "--split", "test", "--root", str(ROOT)],
                          env={"COLUMNS": "160"})
    assert stats.exit_code == 0
    assert "all targets met" in stats.stdout and "✗" not in stats.stdout
    # total, 6 categories, 3 axes, 4 bands, high threshold, valence share, band margin, good
    # news per category and per axis, sets, the four shape shares of the third edition, and the
    # fourth's three asking shares and four held-out checks
    assert stats.stdout.count("✓") == 1 + 6 + 3 + 4 + 1 + 1 + 1 + 6 + 3 + 1 + 4 + 3 + 4
    dev = runner.invoke(app, ["stats", "--split", "dev", "--root", str(ROOT)], env={"COLUMNS": "160"})
    assert dev.exit_code == 0 and "all targets met" in dev.stdout



def test_the_chinese_library_meets_the_english_targets(reg: Registry) -> None:
    test, dev, demo = reg.cases("test-zh"), reg.cases("dev-zh"), reg.cases("demo-zh")
    assert (len(test), len(dev), len(demo)) == (30, 40, 2)
    assert {c.language for c in test + dev + demo} == {"zh"}
    got = counts(test)
    assert got["axis"] == {"C": 10, "A": 10, "P": 10}
    assert got["difficulty"] == {"easy": 4, "medium": 10, "hard": 11, "very_hard": 5}
    # held out: no test-zh persona or scenario is played in dev-zh or demo-zh
    for side in (dev, demo):
        assert not {c.persona.id for c in test} & {c.persona.id for c in side}
        assert not {c.scenario.id for c in test} & {c.scenario.id for c in side}
    # demo-zh replays dev-zh cases outside counterfactual sets
    replayed = {(c.scenario.id, c.persona.id, c.iedr) for c in dev}
    assert all((c.scenario.id, c.persona.id, c.iedr) in replayed for c in demo)
    assert not {c.scenario.id for c in demo} & set(reg.counterfactual_sets())
    for split in ("test-zh", "dev-zh"):
        stats = runner.invoke(app, ["stats", "--split", split, "--root", str(ROOT)], env={"COLUMNS": "160"})
        assert stats.exit_code == 0 and "all targets met" in stats.stdout and "✗" not in stats.stdout

def test_cli_list_and_show() -> None:
    # on the archived second edition, whose cards cannot move; show renders its scenario's need
    listed = runner.invoke(app, ["list", "--split", "test-v2", "--axis", "P", "--difficulty", "hard",
                                 "--root", str(ROOT)], env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and "5 cases" in listed.stdout
    shown = runner.invoke(app, ["show", "test2-04", "--root", str(ROOT)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    for words in ("P0 = (-9, -27, -24)", "‖P0‖ = 37.23", "very_hard", "dominant axis = A",
                  "professional help", "Gary Thompson", "valence: negative", "split=test-v2"):
        assert words in shown.stdout
    hidden = load_registry(ROOT).case("test2-04").scenario.hidden_need
    assert hidden is not None and hidden[:40] in " ".join(shown.stdout.split())


def test_the_leaderboard_refuses_to_mix_editions(reg: Registry, tmp_path: Path) -> None:
    # Runs on two editions' test splits both say split "test"; their registry versions
    # differ, so their scores are not merged.
    from emobench.errors import InputError
    from emobench.publish.provenance import check_mergeable
    from emobench.publish.runs import load_run
    from tests.synthetic_runs import SubjectTruth, write_run

    old = write_run(tmp_path / "old", [SubjectTruth("a")], n_cases=5, registry_version=FIRST_EDITION["test-v1"])
    new = write_run(tmp_path / "new", [SubjectTruth("b")], n_cases=5, registry_version=reg.version("test"))
    with pytest.raises(InputError, match="cannot merge: registry_version"):
        check_mergeable([load_run(old), load_run(new)], force=False)
    second = write_run(tmp_path / "second", [SubjectTruth("d")], n_cases=5,
                       registry_version=SECOND_EDITION["test-v2"])
    with pytest.raises(InputError, match="cannot merge: registry_version"):
        check_mergeable([load_run(second), load_run(new)], force=False)
    same = write_run(tmp_path / "same", [SubjectTruth("c")], n_cases=5, registry_version=reg.version("test"))
    assert check_mergeable([load_run(new), load_run(same)], force=False) == []
