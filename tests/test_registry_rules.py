"""`scenarios validate` enforces the authoring rules on any library: one broken card per rule,
each rejected with one line naming file and field (exit 2); archived editions stay frozen."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from emobench.errors import InputError
from emobench.registry import load_registry
from emobench.registry.cli import app
from emobench.registry.hashing import registry_version
from emobench.registry.loader import _load_edition, display_path
from tests.test_registry_errors import TINY, edit_yaml, set_case, set_iedr, set_key, write

runner = CliRunner()
PERSONA, OTHER = "personas/ada.yaml", "personas/ben.yaml"
SCENARIO, NEW_JOB = "scenarios/lost-keys.yaml", "scenarios/new-job.yaml"
SPLIT = "scenarios/splits/mini.yaml"


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    root = tmp_path / "lib"
    shutil.copytree(TINY, root)
    return root


def add_case(path: Path, case: dict[str, Any]) -> None:
    edit_yaml(path, lambda d: d.append(case))


LEVELS = {"C1": 1, "C2": 1, "C3": 1, "A1": 1, "A2": 1, "A3": 2, "P1": 1, "P2": 1, "P3": 1}


def split_test_dev(root: Path, dev_persona: str) -> None:
    """mini-03 (new-job, ben) moves to a test split; dev plays new-job with dev_persona."""
    edit_yaml(root / SPLIT, lambda d: d.pop(2))
    write(root / "scenarios/splits/test.yaml",
          "- {id: t-01, scenario: new-job, persona: ben, opening: first day tmrw!!,\n"
          "   iedr: {C1: 1, C2: 0, C3: 0, A1: 1, A2: 1, A3: 2, P1: 2, P2: 2, P3: 1}}\n")
    write(root / "scenarios/splits/dev.yaml",
          f"- {{id: d-01, scenario: new-job, persona: {dev_persona}, opening: What to wear,\n"
          "   iedr: {C1: 1, C2: 1, C3: 1, A1: 1, A2: 1, A3: 2, P1: 1, P2: 1, P3: 1}}\n")


def second_c_high_persona(root: Path) -> None:
    text = (root / PERSONA).read_text().replace("id: ada", "id: cy").replace("Ada Test", "Cy Test")
    write(root / "personas/cy.yaml", text)
    add_case(root / SPLIT, {"id": "mini-04", "scenario": "lost-keys", "persona": "cy",
                            "iedr": {**LEVELS, "C3": 3}, "opening": "Locksmith at night: how?"})


def renamed_persona_file(root: Path) -> None:
    (root / PERSONA).rename(root / "personas/adele.yaml")


def orphan_scenario(root: Path) -> None:
    write(root / "scenarios/spare.yaml", (root / NEW_JOB).read_text().replace("id: new-job", "id: spare"))


def orphan_persona(root: Path) -> None:
    write(root / "personas/dot.yaml", (root / PERSONA).read_text().replace("id: ada", "id: dot"))


def memory(index: int, **change: Any) -> Callable[[Path], None]:
    return lambda r: edit_yaml(r / SCENARIO, lambda d: d["memories"][index].update(change))


def cast(**member: Any) -> Callable[[Path], None]:
    return lambda r: edit_yaml(r / NEW_JOB, lambda d: d.__setitem__("cast", [member]))


# (name, break the library, file named, field named, words of the problem)
BROKEN: list[tuple[str, Callable[[Path], None], str, str, str]] = [
    ("duplicate pair", lambda r: add_case(r / SPLIT, {"id": "mini-04", "scenario": "new-job",
                                                      "persona": "ben", "iedr": LEVELS}),
     SPLIT, "cases[3]", "duplicate pair (scenario 'new-job', persona 'ben'): also case mini-03"),
    ("dev reuses a test pair", lambda r: split_test_dev(r, "ben"),
     "scenarios/splits/dev.yaml", "cases[0]",
     "dev case reuses test scenario 'new-job' with the same persona 'ben' (t-01)"),
    ("dev uses a test scenario", lambda r: (split_test_dev(r, "ada"), set_iedr(r / "scenarios/splits/dev.yaml", 0, "C3", 3)),
     NEW_JOB, "id", "counterfactual set spans splits dev, test"),
    ("file name differs from id", renamed_persona_file,
     "personas/adele.yaml", "id", "'ada' differs from the file name 'adele'"),
    ("orphan scenario", orphan_scenario, "scenarios/spare.yaml", "id", "orphan scenario"),
    ("orphan persona", orphan_persona, "personas/dot.yaml", "id", "orphan persona"),
    ("dominant priority is zero", lambda r: set_iedr(r / SPLIT, 2, "A3", 0),
     SPLIT, "cases[2].iedr.A3", "A-dominant persona 'ben' needs A3 > 0"),
    ("dominant priority is not the highest", lambda r: set_iedr(r / SPLIT, 2, "P3", 3),
     SPLIT, "cases[2].iedr.A3", "A3 = 2 is below P3 = 3"),
    ("counterfactual case without opening",
     lambda r: edit_yaml(r / SPLIT, lambda d: d[1].pop("opening")),
     SPLIT, "cases[1].opening", "needs its own opening in Ben Test's voice"),
    ("counterfactual personas alike", second_c_high_persona,
     SCENARIO, "id", "personas 'ada' and 'cy' share dominant need C and threshold high"),
    ("valence missing", lambda r: edit_yaml(r / SCENARIO, lambda d: d.pop("valence")),
     SCENARIO, "valence", "missing: negative, mixed or positive"),
    ("facts missing", lambda r: edit_yaml(r / PERSONA, lambda d: d.pop("facts")),
     PERSONA, "facts", "missing"),
    ("age contradicts birth year", lambda r: set_key(r / PERSONA, "age", 45),
     PERSONA, "facts.born", "born 1986 makes Ada Test 39 or 40 in 2026, but age is 45"),
    ("age contradicts a dated memory", memory(0, year=2001),
     SCENARIO, "memories[0].year", "2001 makes Ada Test (born 1986) 15, which does not fit 'childhood'"),
    ("a current memory from long ago", memory(2, year=2015),
     SCENARIO, "memories[2].year", "2015 is not 'current' in 2026"),
    ("a memory dated in the text only", memory(1, text="A flatmate changed the locks in 2009."),
     SCENARIO, "memories[1].year", "the text names 2009"),
    ("dead relative alive in the case", cast(name="Sam", relation="brother", status="alive"),
     NEW_JOB, "cast[0].status", "Sam is alive here but dead in persona 'ben' (case mini-03)"),
    ("relative's relation differs", cast(name="Sam", relation="cousin", status="dead"),
     NEW_JOB, "cast[0].relation", "Sam is 'cousin' here but 'brother' in persona 'ben'"),
]


@pytest.mark.parametrize(("name", "breaker", "file", "field", "problem"), BROKEN,
                         ids=[case[0] for case in BROKEN])
def test_each_rule_rejects_its_broken_card(
    lib: Path, name: str, breaker: Callable[[Path], None], file: str, field: str, problem: str
) -> None:
    breaker(lib)
    result = runner.invoke(app, ["validate", str(lib)])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {display_path(lib / file)}: {field}: "), lines[0]
    assert problem in lines[0]
    assert "Traceback" not in result.output


def test_the_tiny_library_follows_every_rule(lib: Path) -> None:
    result = runner.invoke(app, ["validate", str(lib)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: edition 2, 2 personas, 2 scenarios, 1 counterfactual sets")


def test_every_broken_rule_is_reported_at_once(lib: Path) -> None:
    set_iedr(lib / SPLIT, 2, "A3", 0)
    orphan_scenario(lib)
    memory(0, year=2001)(lib)
    result = runner.invoke(app, ["validate", str(lib)])
    assert result.exit_code == 2
    files = [line.split(": ")[1] for line in result.stderr.strip().splitlines()]
    assert sorted(files) == sorted(display_path(lib / f) for f in (SPLIT, "scenarios/spare.yaml", SCENARIO))


@pytest.mark.parametrize("word", ["yes", "no", "on", "off", "Yes"])
def test_yaml_booleans_must_be_literal(lib: Path, word: str) -> None:
    write(lib / NEW_JOB, (lib / NEW_JOB).read_text().replace("professional_help: false",
                                                             f"professional_help: {word}"))
    result = runner.invoke(app, ["validate", str(lib)])
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"error: {display_path(lib / NEW_JOB)}: professional_help: "
                                     f"Input should be a valid boolean, got {word!r}")


def test_literal_booleans_load(lib: Path) -> None:
    write(lib / NEW_JOB, (lib / NEW_JOB).read_text().replace("professional_help: false",
                                                             "professional_help: true"))
    assert load_registry(lib).scenarios["new-job"].professional_help is True


def test_stats_exits_1_when_a_target_is_missed(lib: Path) -> None:
    (lib / SPLIT).rename(lib / "scenarios/splits/dev.yaml")  # dev wants at least 60 cases
    result = runner.invoke(app, ["stats", "--split", "dev", "--root", str(lib)], env={"COLUMNS": "160"})
    assert result.exit_code == 1
    assert "some targets missed" in result.stdout and "✗" in result.stdout


def test_case_opening_overrides_the_scenario_opening(lib: Path) -> None:
    reg = load_registry(lib)
    assert reg.case("mini-02").opening.startswith("locked out AGAIN")
    assert reg.case("mini-03").opening == reg.scenarios["new-job"].opening
    before = reg.case("mini-02").content_hash
    set_case(lib / SPLIT, 1, "opening", "locked out. again.")
    assert load_registry(lib).case("mini-02").content_hash != before


# --- archived editions -----------------------------------------------------------------


def archive(root: Path, name: str = "v1", prefix: str = "old-0") -> Path:
    """Freeze the current tiny library as an archived edition with ids of its own."""
    folder = root / "editions" / name
    for part in ("personas", "scenarios"):
        shutil.copytree(root / part, folder / part)
    split = folder / "scenarios/splits/mini.yaml"
    split.write_text(split.read_text().replace("mini-0", prefix))
    write(folder / "edition.yaml", f"edition: 1\nversions: {{mini: '{'0' * 64}'}}\n")
    with pytest.raises(InputError, match="archived cards changed"):
        load_registry(root)
    cases = _load_edition(folder, 1, suffix=f"-{name}").cases[f"mini-{name}"]
    version = registry_version((c.id, c.content_hash) for c in cases)
    write(folder / "edition.yaml", f"edition: 1\nversions: {{mini: {version}}}\n")
    return folder


def test_an_archived_edition_loads_by_name_and_stays_frozen(lib: Path) -> None:
    folder = archive(lib)
    reg = load_registry(lib)
    assert reg.splits == ["mini", "mini-v1"] and reg.archived_splits == ["mini-v1"]
    assert [c.id for c in reg.cases("mini-v1")] == ["old-01", "old-02", "old-03"]
    assert reg.split_with_version(reg.version("mini-v1")) == "mini-v1"
    assert reg.version("mini-v1") != reg.version("mini")
    # today's rules do not apply to the frozen edition, and it is not in the counterfactual count
    assert runner.invoke(app, ["validate", str(lib)]).exit_code == 0
    assert set(reg.counterfactual_sets()) == {"lost-keys"} and len(reg.counterfactual_sets()["lost-keys"]) == 2

    card = folder / "scenarios/new-job.yaml"
    card.write_text(card.read_text().replace("Starting a new job", "Starting a new role"))
    result = runner.invoke(app, ["validate", str(lib)])
    assert result.exit_code == 2
    assert f"{display_path(folder / 'edition.yaml')}: versions.mini: the archived cards changed" in result.stderr


def test_case_ids_stay_unique_across_editions(lib: Path) -> None:
    archive(lib, prefix="mini-0")
    with pytest.raises(InputError, match="case id 'mini-01' is also in split 'mini'"):
        load_registry(lib)
