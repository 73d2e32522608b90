"""Edition 4 of the case library: every planted fault of issue 29 is rejected by `scenarios
validate` with one line naming file and field (exit 2), on a copy of a small fourth-edition
fixture library whose test split is held out from its dev and demo splits."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from emobench.registry.checks.lang.en.words import concept_words, normalised, shared_run
from emobench.registry.checks.story_shape import asks, scripted_outcome
from emobench.registry.cli import app
from emobench.registry.loader import display_path
from tests.test_registry_errors import edit_yaml, write
from tests.test_registry_fixture_faults import case_need, one_validate_error, replace

runner = CliRunner()
ED4 = Path(__file__).parent / "data" / "registry" / "ed4"
IRIS, SEFA = "personas/iris.yaml", "personas/sefa.yaml"
LOCKED, WORKSHOP, HARVEST = "scenarios/locked-out.yaml", "scenarios/the-workshop-key.yaml", "scenarios/first-harvest.yaml"
TEST, DEV, DEMO = "scenarios/splits/test.yaml", "scenarios/splits/dev.yaml", "scenarios/splits/demo.yaml"


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    root = tmp_path / "lib"
    shutil.copytree(ED4, root)
    return root


def iris_in_dev(root: Path) -> None:
    """Iris, a test persona, plays a dev scenario too."""
    write(root / "scenarios/night-bus.yaml", (
        "id: night-bus\nversion: 1\ncategory: life\ntopic: Missed the last bus home.\n"
        "stages: ['Mentions the last bus left early.', 'Says the walk home took two hours.']\n"
        "memories:\n  - {period: adulthood, text: Learned the timetable by heart one winter.}\n"
        "  - {period: adulthood, text: Fell asleep on a night bus once and woke at the depot.}\n"
        "  - {period: current, text: Her phone died at the stop.}\n"
        "opening: Walked home tonight. Two hours.\nvalence: negative\n"))
    edit_yaml(root / DEV, lambda d: d.append({
        "id": "dev4-02", "scenario": "night-bus", "persona": "iris",
        "iedr": {"C1": 1, "C2": 1, "C3": 2, "A1": 1, "A2": 1, "A3": 1, "P1": 1, "P2": 1, "P3": 1},
        "opening": "Walked home tonight. Two hours.",
        "hidden_need": {"axis": "C", "text": "To know why the evening went wrong from start to end."}}))


def story_retold(root: Path) -> None:
    """A dev scenario that retells the test story in other words."""
    edit_yaml(root / HARVEST, lambda d: d.update({
        "topic": "Locked out of his flat late at night again, the third lockout this month.",
        "stages": ["He wants a locksmith who works at night.", "He laughs off the third lockout this month.",
                   "He goes quiet, then says everything lately keeps slipping."]}))


def train_config(root: Path) -> None:
    (root / "configs").mkdir()
    write(root / "configs/train.yaml", "# a training config\nsplit: test  # held out!\nmax_turns: 2\n")


def train_doc(root: Path) -> None:
    (root / "docs").mkdir()
    write(root / "docs/train.md", 'Train on a case:\n\n    env.reset(host.case("test4-01"))\n')


# (name, plant the fault, file named, field named, words of the problem)
FAULTS: list[tuple[str, Callable[[Path], None], str, str, str]] = [
    ("a stage that decides the outcome",
     replace(WORKSHOP, "Lets slip that Rowan would have wanted to see the place.",
             "She decides to take the keys and open the workshop on Monday."),
     WORKSHOP, "stages[2]", "scripts the outcome ('decides to')"),
    ("a stage in which he says he will go",
     replace(HARVEST, "He goes quiet about the empty shed", "He says he will go and clear the empty shed"),
     HARVEST, "stages[2]", "scripts the outcome ('says he will go')"),
    ("a test persona played in dev", iris_in_dev, IRIS, "id", "test persona 'iris' is also played in dev"),
    ("a demo case with other levels than its dev case",
     replace(DEMO, "P1: 2, P2: 2, P3: 2", "P1: 2, P2: 1, P3: 2"),
     DEMO, "cases[0].iedr", "differs from dev4-01's levels: the demo replays a dev case as it is"),
    ("the training config on the test split", train_config, "configs/train.yaml", "split",
     "trains on the held-out test split"),
    ("a test relative's name in a dev persona",
     replace(SEFA, "    - {name: Abel,", "    - {name: Tobin, relation: son, status: alive}\n    - {name: Abel,"),
     IRIS, "facts.relatives[1].name", "the name 'Tobin' also appears outside test, in"),
    ("a test town as a dev persona's home", replace(SEFA, "home: Penmor", "home: Port Brindle"),
     IRIS, "facts.home", "the name 'Brindle' also appears outside test"),
    ("test text copied into dev",
     replace(HARVEST, "A neighbour on the plots left a bag of twine on the gate.",
             "His neighbour once stood outside in the rain for an hour."),
     LOCKED, "memories[2].text", "shares 8 words in a row ('stood outside in the rain for an hour')"),
    ("a test story retold in dev", story_retold, LOCKED, "stages", "content words with 'first-harvest'"),
    ("docs/train.md trains on a test case", train_doc, "docs/train.md", "line 3", "uses test case 'test4-01'"),
    ("sibling needs that differ only in wording",
     case_need(1, text="To grasp why little losses keep piling up, so the mess has a pattern he can follow."),
     TEST, "cases[1].hidden_need.text", "of its concepts with test4-01's need"),
    ("a need restating the persona's why", case_need(1, text="He wants someone in the feeling with him tonight."),
     TEST, "cases[1].hidden_need.text", "restates persona 'otto''s needs.A.why (50% of its content words)"),
    ("a need sharing a phrase with the why",
     case_need(0, text="She trusts what she can follow step by step, and tonight nothing is."),
     TEST, "cases[0].hidden_need.text", "restates persona 'iris''s needs.C.why (4 words in a row"),
    ("a need said in the opening",
     replace(TEST, "opening: locked out AGAIN lol. how do u even find a locksmith at this hour",
             "opening: locked out AGAIN lol. this run of bad luck has made me so lonely"),
     TEST, "cases[1].hidden_need.text", "with the case's opening (limit 50%)"),
]


def test_the_fixture_library_follows_every_rule(lib: Path) -> None:
    result = runner.invoke(app, ["validate", str(lib)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: edition 4, 3 personas, 3 scenarios, 1 counterfactual sets")


@pytest.mark.parametrize(("name", "plant", "file", "field", "problem"), FAULTS, ids=[f[0] for f in FAULTS])
def test_each_planted_fault_is_one_line_naming_file_and_field(
    lib: Path, name: str, plant: Callable[[Path], None], file: str, field: str, problem: str
) -> None:
    plant(lib)
    assert problem in one_validate_error(lib, file, field)


def test_a_demo_replaying_a_test_case_is_refused_three_ways(lib: Path) -> None:
    replace(DEMO, "scenario: first-harvest\n  persona: sefa", "scenario: locked-out\n  persona: iris")(lib)
    result = runner.invoke(app, ["validate", str(lib)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()  # and the copied dev case's levels and need misfit Iris
    assert set(lines) >= {
        f"error: {display_path(lib / DEMO)}: cases[0]: demo4-01 plays scenario 'locked-out' with persona "
        "'iris', which no dev case does: the demo replays dev",
        f"error: {display_path(lib / IRIS)}: id: test persona 'iris' is also played in demo: the test "
        "split's people appear nowhere else",
        f"error: {display_path(lib / LOCKED)}: id: test scenario 'locked-out' is also played in demo: the "
        "test split's stories appear nowhere else",
    }


def test_a_dev_case_replaying_any_test_pair_is_refused(lib: Path) -> None:
    """Not only the first test case of a scenario: test4-02 is locked-out's second (otto)."""
    edit_yaml(lib / DEV, lambda d: d.append({**yaml.safe_load((lib / TEST).read_text())[1], "id": "dev4-02"}))
    result = runner.invoke(app, ["validate", str(lib)])
    assert (f"error: {display_path(lib / DEV)}: cases[1]: dev case reuses test scenario 'locked-out' with the "
            "same persona 'otto' (test4-02)") in result.stderr.splitlines()


def test_common_words_of_place_names_are_not_shared_names(lib: Path) -> None:
    replace(SEFA, "home: Penmor", "home: New Penmor")(lib)
    replace(IRIS, "home: Brindle", "home: New Brindle")(lib)
    result = runner.invoke(app, ["validate", str(lib)])
    assert result.exit_code == 0, result.output


def test_stats_reports_asking_shares_and_the_overlap(lib: Path) -> None:
    result = runner.invoke(app, ["stats", "--split", "dev", "--root", str(lib)], env={"COLUMNS": "200"})
    # dev's one opening and one scenario: the opening does not ask, nor do its stages
    assert "shape: case openings" in result.stdout
    assert "0/1" in result.stdout
    assert "held out: personas" in result.stdout
    story_retold(lib)
    result = runner.invoke(app, ["stats", "--split", "test", "--root", str(lib)], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    row = next(line for line in result.stdout.splitlines() if "held out: story" in line)
    assert "locked-out ~ first-harvest" in row and "✗" in row


def test_stats_misses_the_target_when_last_stages_ask(lib: Path) -> None:
    replace(HARVEST, "He goes quiet about the empty shed at the back of the plot.",
            "He asks what to plant in the empty bed at the back of the plot.")(lib)
    result = runner.invoke(app, ["stats", "--split", "dev", "--root", str(lib)], env={"COLUMNS": "200"})
    row = next(line for line in result.stdout.splitlines() if "shape: last stages" in line)
    assert "1/1" in row and "✗" in row
    assert result.exit_code == 1


QUIET = st.lists(st.sampled_from(["the", "plot", "tomatoes", "came", "in", "small", "shed", "quiet",
                                  "his", "father", "grew", "them", "rain", "green", "today"]),
                 min_size=1, max_size=20).map(" ".join)
REQUESTS = st.sampled_from(["can you", "any tips", "wants to know", "she asks", "what should I",
                            "please", "?", "he wonders whether"])
SCRIPTS = st.sampled_from(["she decides to", "he agrees to", "they have decided", "she makes up her mind",
                           ". He will speak", "and she'll call", "he has made his decision"])


@given(before=QUIET, after=QUIET, phrase=REQUESTS)
def test_a_request_phrase_anywhere_makes_a_text_ask(before: str, after: str, phrase: str) -> None:
    assert asks(f"{before} {after}") is None
    assert asks(f"{before} {phrase} {after}") is not None


@given(before=QUIET, after=QUIET, phrase=SCRIPTS)
def test_a_decision_anywhere_scripts_the_outcome(before: str, after: str, phrase: str) -> None:
    assert scripted_outcome(f"{before} {after}") is None
    assert scripted_outcome(f"{before} {phrase} {after}") is not None


@given(a=st.text(max_size=200), b=st.text(max_size=200), n=st.integers(1, 8))
def test_a_shared_run_is_in_both_texts(a: str, b: str, n: int) -> None:
    run = shared_run(a, b, n)
    assert bool(run) == bool(shared_run(b, a, n))
    if run:
        assert len(run.split()) == n
        assert f" {run} " in f" {normalised(a)} " and f" {run} " in f" {normalised(b)} "


@given(a=st.text(max_size=200))
def test_synonyms_only_merge_words(a: str) -> None:
    assert len(concept_words(a)) <= len(concept_words(a, synonyms=False))
