"""Edition 3 of the case library: every planted fault of issue 22 is rejected by `scenarios
validate` with one line naming file and field (exit 2), on a copy of a small third-edition
fixture library; random bytes in a card never produce a traceback."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from emobench.registry import load_registry
from emobench.registry.cli import app
from emobench.registry.loader import display_path
from tests.test_registry_errors import edit_yaml, write

runner = CliRunner()


def one_validate_error(lib: Path, file: str, field: str) -> str:
    """``validate`` refuses ``lib`` (exit 2) in exactly one line naming the file and the field; that line."""
    result = runner.invoke(app, ["validate", str(lib)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.stderr
    assert lines[0].startswith(f"error: {display_path(lib / file)}: {field}: "), lines[0]
    return lines[0]
ED3 = Path(__file__).parent / "data" / "registry" / "ed3"
IRIS, OTTO = "personas/iris.yaml", "personas/otto.yaml"
LOCKED, WORKSHOP = "scenarios/locked-out.yaml", "scenarios/the-workshop-key.yaml"
SPLIT = "scenarios/splits/test.yaml"


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    root = tmp_path / "lib"
    shutil.copytree(ED3, root)
    return root


def third_card(root: Path, cast: list[dict[str, Any]], stage: str = "Asks what to bring.") -> None:
    """A scenario only Iris plays (test3-04), with the given cast."""
    write(root / "scenarios/sunday-visit.yaml", (
        "id: sunday-visit\nversion: 1\ncategory: relations\ntopic: A visit to the old house.\n"
        f"stages: ['{stage}', 'Mentions the garden is overgrown.']\n"
        "memories:\n  - {period: adulthood, text: Painted the fence one wet summer.}\n"
        "  - {period: adulthood, text: Learned to bake bread badly.}\n"
        "  - {period: current, text: Found a map of the bus routes in a drawer.}\n"
        "opening: What do you bring to a house you grew up in?\nvalence: mixed\n"))
    edit_yaml(root / "scenarios/sunday-visit.yaml", lambda d: d.__setitem__("cast", cast))
    edit_yaml(root / SPLIT, lambda d: d.append({
        "id": "test3-04", "scenario": "sunday-visit", "persona": "iris",
        "iedr": {"C1": 1, "C2": 1, "C3": 2, "A1": 1, "A2": 1, "A3": 1, "P1": 1, "P2": 1, "P3": 1},
        "opening": "Going back to the old house on Sunday. What do people bring?",
        "hidden_need": {"axis": "C", "text": "To understand what the house still means now."}}))


def case_need(index: int, **change: Any) -> Callable[[Path], None]:
    return lambda r: edit_yaml(r / SPLIT, lambda d: d[index]["hidden_need"].update(change))


def replace(file: str, old: str, new: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        text = (root / file).read_text(encoding="utf-8")
        assert old in text, old
        write(root / file, text.replace(old, new))
    return change


def memory_before_birth(root: Path) -> None:
    edit_yaml(root / WORKSHOP, lambda d: (
        d["cast"].append({"name": "Mara", "relation": "apprentice", "status": "alive", "born": 2008}),
        d["memories"].__setitem__(1, {"period": "adulthood", "year": 2005,
                                      "text": "Mara's first weld held on the test rig in 2005."})))


def big_field(root: Path) -> None:
    text = (root / IRIS).read_text()
    write(root / IRIS, text.replace("background: A ferry", "background: " + "x" * (10 * 2**20) + " A ferry"))


def long_field(root: Path) -> None:
    write(root / IRIS, (root / IRIS).read_text().replace("background: A ferry", "background: " + "y" * 5000))


def not_utf8(root: Path) -> None:
    data = (root / IRIS).read_bytes().replace(b"who likes", b"who \xff likes")
    (root / IRIS).write_bytes(data)


# (name, plant the fault, file named, field named, words of the problem)
FAULTS: list[tuple[str, Callable[[Path], None], str, str, str]] = [
    ("relative dead in one cast, alive in another",
     lambda r: third_card(r, [{"name": "Rowan", "relation": "mother", "status": "alive"}]),
     "scenarios/sunday-visit.yaml", "cast[0].status", "Rowan (iris) is status 'alive' here but 'dead'"),
    ("memory dated after a cast member's death",
     replace(WORKSHOP, "{period: adulthood, text: Passed the marine engineering exam on the second try.}",
             "{period: adulthood, text: Rowan watched her pass the marine exam in 2022., year: 2022}"),
     WORKSHOP, "memories[1].year", "2022 is after Rowan died (2020)"),
    ("case id renamed to another edition's pattern", replace(SPLIT, "id: test3-03", "id: test2-03"),
     SPLIT, "cases[2].id", "'test2-03' does not match the edition's pattern test3-NN"),
    ("opening of spaces only", replace(WORKSHOP, "opening: What does", "opening: '   '\nx: What does"),
     WORKSHOP, "opening", "blank"),
    ("case opening of spaces only", replace(SPLIT, "opening: locked out AGAIN", "opening: '    '\n  x: locked out"),
     SPLIT, "cases[1].opening", "blank"),
    ("a 10 MB field", big_field, IRIS, "background", "over the 64 KB limit"),
    ("a field over 4,000 characters", long_field, IRIS, "background", "5,067 characters, over the 4,000 limit"),
    ("non-UTF-8 persona", not_utf8, IRIS, "background", "not UTF-8 (invalid start byte, byte 0xff) at line 6, column 34"),
    ("a name in no cast", replace(LOCKED, "Mentions it is the third", "Mentions Priya says it is the third"),
     LOCKED, "stages[1]", "names 'Priya', in no cast"),
    ("a relative's job differs", replace(WORKSHOP, "status: dead, died: 2020}", "status: dead, died: 2020, job: nurse}"),
     WORKSHOP, "cast[0].job", "Rowan (iris) is job 'nurse' here but 'teacher' in"),
    ("family missing from the persona", lambda r: third_card(r, [{"name": "Juno", "relation": "aunt", "status": "alive"}],
                                                             "Asks what Juno would bring."),
     "scenarios/sunday-visit.yaml", "cast[0].name", "Juno (aunt) is family of persona 'iris' but not in its facts.relatives"),
    ("a memory dated before the person was born", memory_before_birth,
     WORKSHOP, "memories[1].year", "2005 is before Mara was born (2008)"),
    ("duplicated memory", replace(LOCKED, "Stood outside in the rain for an hour last week.",
                                  "The manager handed over the keys without a speech."),
     WORKSHOP, "memories[2].text", "duplicates"),
    ("persona prose naming a scenario's cast", replace(OTTO, "background: A night-shift baker",
                                                        "background: Tobin's friend, a night-shift baker"),
     OTTO, "background", "names 'Tobin', cast of scenario 'the-workshop-key'"),
    ("hidden need on another axis", case_need(1, axis="P"), SPLIT, "cases[1].hidden_need.axis",
     "P, but persona 'otto' has dominant need A"),
    ("same need across a counterfactual set",
     case_need(1, text="To understand why small losses keep piling up, so the chaos has a shape she can follow."),
     SPLIT, "cases[1].hidden_need.text", "the same hidden need as test3-01"),
    ("hidden need restates a stage",
     case_need(2, text="Rowan would have wanted to see the place."),
     SPLIT, "cases[2].hidden_need.text", "content words with stage 3"),
    ("hidden need on a scenario", replace(LOCKED, "valence: negative", "valence: negative\nhidden_need: Company."),
     LOCKED, "hidden_need", "not a scenario field in edition 3"),
    ("case without hidden need", lambda r: edit_yaml(r / SPLIT, lambda d: d[0].pop("hidden_need")),
     SPLIT, "cases[0].hidden_need", "missing required field"),
    ("They template for one persona", replace(WORKSHOP, "She asks what", "They ask what"),
     WORKSHOP, "stages[0]", "a 'They' template"),
    ("menu of alternatives", replace(LOCKED, "Mentions it is the third time this month and laughs it off.",
                                     "Mentions no spare key, no landlord, or no neighbour to call."),
     LOCKED, "stages[1]", "offers a menu of alternatives"),
    ("persona without a home", replace(OTTO, "  home: Kell Harbour\n", ""), OTTO, "facts.home", "missing"),
]
def test_the_fixture_library_follows_every_rule(lib: Path) -> None:
    result = runner.invoke(app, ["validate", str(lib)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: edition 3, 2 personas, 2 scenarios, 1 counterfactual sets")
    reg = load_registry(lib)
    assert reg.case("test3-02").hidden_need.startswith("For somebody to sit with")
    assert reg.case("test3-02").case_need is not None and reg.scenarios["locked-out"].hidden_need is None


@pytest.mark.parametrize(("name", "plant", "file", "field", "problem"), FAULTS, ids=[f[0] for f in FAULTS])
def test_each_planted_fault_is_one_line_naming_file_and_field(
    lib: Path, name: str, plant: Callable[[Path], None], file: str, field: str, problem: str
) -> None:
    plant(lib)
    assert problem in one_validate_error(lib, file, field)


def test_the_hidden_need_changes_the_case_hash(lib: Path) -> None:
    before = load_registry(lib).case("test3-01").content_hash
    case_need(0, text="To see the pattern in the losses.")(lib)
    assert load_registry(lib).case("test3-01").content_hash != before


def test_stats_reports_the_shares(lib: Path) -> None:
    result = runner.invoke(app, ["stats", "--split", "test", "--root", str(lib)], env={"COLUMNS": "200"})
    assert result.exit_code == 1  # three cases cannot meet the test split's strata
    for words in ("shape: opening move", "most common: 'want'", "shape: ending in admission",
                  "positive_or_mixed_by_axis", "shape: counterfactual sets", "shape: hidden need in a stage"):
        assert words in result.stdout


CARD_FILES = [IRIS, WORKSHOP, SPLIT, "library.yaml"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(CARD_FILES),
       data=st.binary(max_size=300) | st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")),
       keep=st.integers(0, 2000))
def test_random_bytes_in_a_card_never_raise_a_traceback(lib: Path, which: str, data: bytes, keep: int) -> None:
    path = lib / which
    original = path.read_bytes()
    try:
        path.write_bytes(original[:keep] + data)  # a damaged tail, or a whole file of junk
        result = runner.invoke(app, ["validate", str(lib)])
        assert result.exit_code in (0, 2), result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        if result.exit_code == 2:
            assert len(result.stderr.strip().splitlines()) >= 1 and "Traceback" not in result.output
    finally:
        path.write_bytes(original)
