"""Edition 4: the prose agrees with the facts. Each planted contradiction between a card's
prose and the persona's facts or the cast is one line naming file and field (exit 2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from emobench.registry.checks.lang.en.prose_words import mentions, parse_number, prose_words
from emobench.registry.cli import app
from tests.test_registry_fixture_faults import one_validate_error, replace
from tests.test_registry_heldout_faults import HARVEST, IRIS, SEFA, TEST, WORKSHOP
from tests.test_registry_heldout_faults import lib as lib  # the fixture

runner = CliRunner()
OTTO_OPENING = "opening: locked out AGAIN lol. how do u even find a locksmith at this hour"
IRIS_OPENING = "opening: What does a workshop lead actually sign for on day one?"


def otto_says(words: str) -> Callable[[Path], None]:
    return replace(TEST, OTTO_OPENING, f"opening: {words}")


def iris_says(words: str) -> Callable[[Path], None]:
    """test4-03's opening (the file's second such line is the scenario's, left alone)."""
    def change(root: Path) -> None:
        text = (root / TEST).read_text(encoding="utf-8")
        write_at = text.rindex(IRIS_OPENING)
        (root / TEST).write_text(text[:write_at] + f"opening: {words}" + text[write_at + len(IRIS_OPENING):])
    return change


def both(*changes: Callable[[Path], None]) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        for one in changes:
            one(root)
    return change


SEFA_WIFE = replace(SEFA, "    - {name: Abel,", "    - {name: Maud, relation: wife, status: dead, died: 2016}\n"
                    "    - {name: Abel,")

# (name, plant the fault, file named, field named, words of the problem)
FAULTS: list[tuple[str, Callable[[Path], None], str, str, str]] = [
    ("a relative the facts do not know", otto_says("locked out again, my cousin has the spare"),
     TEST, "cases[1].opening", "refers to 'my cousin', who is neither the cast nor persona 'otto''s facts.relatives"),
    ("a colleague in no cast", replace(WORKSHOP, "Mentions that Tobin sent", "Mentions that a colleague and Tobin sent"),
     WORKSHOP, "stages[1]", "refers to 'a colleague', who is neither the cast nor persona 'iris''s"),
    ("burial words for the living", otto_says("locked out again. since we buried Wren nothing goes right"),
     TEST, "cases[1].opening", "'buried Wren' speaks of Wren's death, but Wren is alive"),
    ("a funeral of someone alive in the cast",
     replace(WORKSHOP, "Mentions that Tobin sent a photo", "Mentions that at Tobin's funeral someone sent a photo"),
     WORKSHOP, "stages[1]", "\"Tobin's funeral\" speaks of Tobin's death, but Tobin is alive"),
    ("a dead mother who rang last night", iris_says("Mum rang me last night about the workshop. What do I sign?"),
     TEST, "cases[2].opening", "'Mum rang me last night': Rowan is dead"),
    ("an age in digits", iris_says("I'm 52 and I've never signed for a workshop. What do I sign?"),
     TEST, "cases[2].opening", "makes Iris Vale 52, but facts.born 1986"),
    ("an age in words", iris_says("I am fifty-two years old and new to this. What do I sign?"),
     TEST, "cases[2].opening", "makes Iris Vale 52"),
    ("years since a death", iris_says("Mum died two years ago and now I have her workshop. What do I sign?"),
     TEST, "cases[2].opening", "puts Rowan's death in 2024, but persona 'iris' facts.relatives[0] says 2020"),
    ("a widowhood against its date", both(SEFA_WIFE, replace(SEFA, "background: A retired bus driver",
                                                             "background: Widowed three years ago, a retired bus driver")),
     SEFA, "background", "'Widowed three years ago' puts Maud's death in 2023"),
    ("a child born before its parent",
     replace(IRIS, "    - {name: Tobin,", "    - {name: Pell, relation: daughter, status: alive, born: 1980}\n"
             "    - {name: Tobin,"),
     IRIS, "facts.relatives[1].born", "Pell (daughter) born 1980, 6 years before Iris Vale (1986)"),
    ("a changed job", iris_says("I'm a nurse on nights, but they gave me a workshop. What do I sign?"),
     TEST, "cases[2].opening", "\"I'm a nurse\", but facts.job is 'ferry mechanic'"),
    ("a retired man who works", replace(SEFA, "says little about himself.",
                                        "says little about himself. He still works as a driver on Sundays."),
     SEFA, "background", "'works as a driver', but facts.job is 'retired bus driver'"),
    ("a changed home", both(replace(WORKSHOP, "other_names: [Harbour Line]", "other_names: [Harbour Line, Lisbon]"),
                            replace(WORKSHOP, "Mentions that Tobin sent", "Mentions she lives in Lisbon now and Tobin sent")),
     WORKSHOP, "stages[1]", "'she lives in Lisbon', but facts.home is 'Brindle'"),
    ("a switched pronoun", replace(WORKSHOP, "She asks what a workshop lead", "He asks what a workshop lead"),
     WORKSHOP, "stages[0]", "starts with 'He', but the persona is 'she' in its own card"),
    ("a graveside for someone alive", otto_says("locked out again, spent the day at Wren's graveside"),
     TEST, "cases[1].opening", "\"Wren's graveside\" speaks of Wren's death"),
    ("widowed with no dead spouse", otto_says("locked out again. since I was widowed nothing works"),
     TEST, "cases[1].opening", "'since I was widowed', but no wife, husband or partner is dead"),
    ("an age by decade", iris_says("I'm in my late fifties and new to this. What do I sign?"),
     TEST, "cases[2].opening", "\"I'm in my late fifties\", but facts.born 1986 makes Iris Vale 40"),
    ("an age in the identity", replace(IRIS, "identity: Fixture persona", "identity: A 55-year-old fixture persona"),
     IRIS, "identity", "'A 55-year-old' makes Iris Vale 55"),
    ("turning an age", iris_says("I'm turning 45 next month and they gave me a workshop. What do I sign?"),
     TEST, "cases[2].opening", "makes Iris Vale 45"),
    ("a death 'last spring' against its year", iris_says("Mum died last spring and left me her tools. What do I sign?"),
     TEST, "cases[2].opening", "'Mum died last spring' puts Rowan's death in 2026, but"),
    ("a death 'a year ago' against its year", iris_says("Lost Mum a year ago. Now this workshop. What do I sign?"),
     TEST, "cases[2].opening", "'Lost Mum a year ago' puts Rowan's death in 2025"),
    ("a sparky who is only an apprentice",
     both(replace(SEFA, "job: retired bus driver", "job: apprentice electrician"),
          replace(SEFA, "says little about himself.", "says little about himself. A fully qualified sparky at last.")),
     SEFA, "background", "'qualified sparky', but facts.job is 'apprentice electrician'"),
    ("a cast child born before the persona",
     both(replace(IRIS, "    - {name: Tobin,", "    - {name: Fen, relation: son, status: alive}\n    - {name: Tobin,"),
          replace(WORKSHOP, "{name: Tobin, relation: brother, status: alive}",
                  "{name: Tobin, relation: brother, status: alive}\n  - {name: Fen, relation: son, status: alive, born: 1970}")),
     WORKSHOP, "cast[2].born", "Fen (son) born 1970, 16 years before Iris Vale (1986): a parent is at least 12"),
    ("a need written for a man", replace(TEST, "text: To make sense of a success", "text: He needs to make sense of a success"),
     TEST, "cases[2].hidden_need.text", "starts with 'He', but the persona is 'she' in its own card"),
    ("a relative's age against their birth year", iris_says("Tobin is 45 and still calls me kid. What do I sign?"),
     TEST, "cases[2].opening", "'Tobin is 45', but Tobin was born in 1983 (persona 'iris' facts.relatives[1]): 43"),
    ("a daughter older than a mother can have",
     both(replace(IRIS, "    - {name: Tobin,", "    - {name: Pell, relation: daughter, status: alive}\n    - {name: Tobin,"),
          iris_says("My 38-year-old daughter laughed at me. What do I sign?")),
     TEST, "cases[2].opening", "'My 38-year-old daughter': a child of 38 for Iris Vale, who is 40"),
    ("a home in another town",
     both(replace(WORKSHOP, "other_names: [Harbour Line]", "other_names: [Harbour Line, Dunmere]"),
          iris_says("Our flat in Dunmere is too small for tools. What do I sign?")),
     TEST, "cases[2].opening", "'Our flat in Dunmere', but facts.home is 'Brindle'"),
    ("his mam, in prose, for a dead father's son", replace(HARVEST, "He says Abel grew", "He says his mam grew"),
     HARVEST, "stages[1]", "refers to 'his mam'"),
]


@pytest.mark.parametrize(("name", "plant", "file", "field", "problem"), FAULTS, ids=[f[0] for f in FAULTS])
def test_each_prose_contradiction_is_one_line_naming_file_and_field(
    lib: Path, name: str, plant: Callable[[Path], None], file: str, field: str, problem: str
) -> None:
    plant(lib)
    assert problem in one_validate_error(lib, file, field)


@pytest.mark.parametrize("words", ["Her late mother Rowan left her the workshop. What do I sign?",
                                   "I'm 40, and Mum died six years ago. What do I sign?",
                                   "I'm turning 41 next year. I'm in my forties! What do I sign?",
                                   "As a mechanic, I sign for parts. I'm a ferry mechanic. What do I sign?",
                                   "Tobin texts me every morning. What do I sign?"])
def test_prose_that_agrees_with_the_facts_passes(lib: Path, words: str) -> None:
    iris_says(words)(lib)
    result = runner.invoke(app, ["validate", str(lib)])
    assert result.exit_code == 0, result.output


@given(st.integers(0, 99))
def test_numbers_in_words_read_back(value: int) -> None:
    units, tens = prose_words().units, prose_words().tens
    words = units[value] if value < 20 else tens[value // 10 - 2] + (f"-{units[value % 10]}" if value % 10 else "")
    assert parse_number(words) == value
    assert parse_number(words.replace("-", " ")) == value
    assert parse_number(str(value)) == value


RELATIONS = st.sampled_from(sorted(prose_words().relations))
FILLER = st.lists(st.sampled_from(["the", "shed", "was", "green", "today", "rain", "quiet"]), max_size=8).map(" ".join)


@given(before=FILLER, after=FILLER, det=st.sampled_from(["my", "her", "his", "their", "our"]),
       adjective=st.sampled_from(["", "older ", "late ", "best "]), relation=RELATIONS)
def test_a_relation_after_a_possessive_is_a_mention_anywhere(
    before: str, after: str, det: str, adjective: str, relation: str
) -> None:
    assert not list(mentions(f"{before} {after}"))
    found = list(mentions(f"{before} {det} {adjective}{relation} {after}"))
    assert [m.relation for m in found] == [relation]
