"""The guards of issue 39 in isolation: card text folded before the checks (NFKC, invisible
characters, Unicode's confusables), injections without trigger words, control characters named
with their field, and training refused on the held-out test split at every entry point."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emobench.env import EmoEnv, split_training_config
from emobench.errors import InputError
from emobench.registry.checks.card_fit import check_card_fit
from emobench.registry.checks.injection import addressed_to_models, disguised
from emobench.registry.checks.normalise import fold
from emobench.registry.checks.training_pages import check_training
from emobench.registry.loader import display_path, load_registry
from emobench.yaml_io import read_yaml
from tests.library_attack_text import INVISIBLE, LOOKALIKE, PLAIN, TAGS, UNLISTED

ED4 = Path(__file__).parent / "data" / "registry" / "ed4"
ROLES = {"subjects": [{"binding": "openai:m@http://127.0.0.1:9/v1", "label": "p"}],
         "user": {"binding": "openai:m@http://127.0.0.1:9/v1"},
         "judges": [{"binding": "openai:m@http://127.0.0.1:9/v1"}]}


@given(st.text(alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz ."), min_size=1, max_size=40),
       st.lists(st.tuples(st.integers(0, 40), st.sampled_from(INVISIBLE)), max_size=6))
def test_invisible_characters_fold_away(text: str, inserts: list[tuple[int, str]]) -> None:
    hidden = text
    for at, char in inserts:
        hidden = hidden[:at] + char + hidden[at:]
    assert fold(hidden) == text


@given(st.text(alphabet=st.sampled_from(sorted(LOOKALIKE)), min_size=1, max_size=30), st.data())
def test_letters_of_other_scripts_fold_to_the_ascii_they_imitate(word: str, data: st.DataObject) -> None:
    swapped = "".join(data.draw(st.sampled_from(LOOKALIKE[c])) for c in word)
    assert fold(swapped).lower() == word.lower()  # Greek Ν imitates N; fold keeps the case it finds


def test_chinese_and_accented_text_is_left_as_written() -> None:
    assert fold("他说二〇二一年去了一趟，心里空落落的") == "他说二〇二一年去了一趟,心里空落落的"  # NFKC: ，→,
    for text in ("Zoë's café was naïve", "他说：“没事。”", "I love you ❤️", "São Paulo, Ærø", "Nguyễn Phước",
                 "Đặng", "Işık", "２０２１年"):
        assert disguised(text) is None, text


@pytest.mark.parametrize("text", ["Tоbin rang", "ignore аll", "Ιris said", "my ʟate husband", "ᴡidow", "ｌａｔｅ"])
def test_a_word_with_a_letter_of_another_script_is_disguised(text: str) -> None:
    assert "imitates" in (disguised(text) or "") or "small capital" in (disguised(text) or "")


@pytest.mark.parametrize("text", [*PLAIN["en"], *PLAIN["zh"], *UNLISTED["en"], *UNLISTED["zh"], *TAGS])
def test_each_instruction_is_addressed_to_the_models(text: str) -> None:
    assert addressed_to_models(text), text


def test_control_characters_are_refused_with_their_field(tmp_path: Path) -> None:
    card = tmp_path / "card.yaml"
    card.write_text("id: x\nstages:\n  - fine\n  - hides\x00 a NUL\n", encoding="utf-8")
    with pytest.raises(InputError) as raw:
        read_yaml(card)
    assert (raw.value.field, raw.value.problem) == (
        "stages[1]", "control character U+0000: a library file holds plain text (at line 4, column 10)")
    card.write_text('id: x\nbackground: "an \\e escape"\n', encoding="utf-8")
    with pytest.raises(InputError) as escaped:
        read_yaml(card)
    assert escaped.value.field == "background" and "U+001B" in escaped.value.problem


@pytest.mark.parametrize(("data", "words"), [
    ({}, "missing: a run config's default split is test"),
    ({"split": "test"}, "'test' is a held-out test split"),
    ({"split": "test-zh"}, "'test-zh' is a held-out test split"),
])
def test_a_training_config_names_a_split_that_is_not_test(data: dict[str, str], words: str) -> None:
    with pytest.raises(InputError) as exc:
        split_training_config({**ROLES, **data}, "train.yaml")
    assert (exc.value.source, exc.value.field) == ("train.yaml", "split") and words in exc.value.problem
    config, _ = split_training_config({**ROLES, "split": "dev"}, "train.yaml")
    assert config.split == "dev"


def test_an_environment_never_resets_on_a_test_case() -> None:
    case = load_registry(ED4).case("test4-01")
    env = EmoEnv(setup=None)  # type: ignore[arg-type]  # the refusal comes before the setup is read
    with pytest.raises(InputError, match="held-out split 'test'"):
        asyncio.run(env.reset(case, 0))


def test_training_configs_and_pages_are_checked(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    shutil.copytree(ED4, root)
    (root / "configs" / "verl").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "configs/verl/emobench_env.yaml").write_text("reward: {dense: 1.0}\nseeds: [0]\n")
    (root / "configs/verl/agent_loops.yaml").write_text("- name: e\n  overrides: {split: test}\n")
    (root / "docs/scale.md").write_text("With verl:\n\n    python -m emobench.env.verl_data --split test\n"
                                        "    emobench run --split test   # evaluating is fine\n")
    found = [(Path(e.source).name, e.field, e.problem.split(":")[0]) for e in check_training(load_registry(root))]
    assert found == [("agent_loops.yaml", "[0].overrides.split", "trains on the held-out test split 'test'"),
                     ("emobench_env.yaml", "split", "missing"),
                     ("scale.md", "line 3", "passes the held-out split 'test'")]
    assert display_path(root / "docs/scale.md").endswith("docs/scale.md")


def test_the_shipped_configs_and_pages_train_on_no_test_case() -> None:
    assert list(check_training(load_registry(Path(__file__).parents[1]))) == []


def test_what_a_shared_card_says_of_siblings_is_checked_against_each_player(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    shutil.copytree(ED4, root)
    card = root / "scenarios/locked-out.yaml"
    text = card.read_text(encoding="utf-8")
    card.write_text(text.replace("  - Wants to know how", "  - Says her brothers and sisters laugh at her. Wants to know how")
                    .replace("  - Mentions it is", "  - As the eldest child, mentions it is"), encoding="utf-8")
    iris = root / "personas/iris.yaml"
    iris.write_text(iris.read_text(encoding="utf-8").replace("relation: brother", "relation: older brother"))
    found = [(e.field, e.problem.split(" in facts")[0]) for e in check_card_fit(load_registry(root))]
    many = "'brothers and sisters' needs two or more brothers and sisters, but persona"
    assert found == [("stages[0]", f"{many} 'iris' (case test4-01) has Tobin"),
                     ("stages[1]", "'the eldest child' needs no older brother or sister, but persona 'iris' "
                                   "(case test4-01) has Tobin"),
                     ("stages[0]", f"{many} 'otto' (case test4-02) has Wren")]
