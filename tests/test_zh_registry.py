"""Language as an attribute of the library: Chinese cards in personas/zh and scenarios/zh,
Chinese splits named like test-zh, one language per case and per split, and English hashes
unchanged by the new field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from emobench.registry.card_files import load_persona, split_language
from emobench.registry.cli import app
from emobench.registry.hashing import card_hash
from emobench.registry.loader import load_registry
from emobench.registry.models import PersonaCard
from tests.test_registry_fixture_faults import one_validate_error, replace

ZH = Path(__file__).parent / "data" / "zh_library"
ROOT = Path(__file__).parents[1]
WANG = "personas/zh/wang-jianguo.yaml"
QINGMING = "scenarios/zh/qingming-first-year.yaml"
DEV, TEST = "scenarios/splits/dev-zh.yaml", "scenarios/splits/test-zh.yaml"
runner = CliRunner()


@pytest.fixture
def zh(tmp_path: Path) -> Path:
    root = tmp_path / "lib"
    shutil.copytree(ZH, root)
    return root


def test_chinese_cards_load_with_their_language() -> None:
    reg = load_registry(ZH)
    assert reg.languages == ["zh"]
    assert reg.splits == ["demo-zh", "dev-zh", "test-zh"]
    assert {case.language for case in reg.all_cases()} == {"zh"}
    assert reg.language("test-zh") == "zh"
    assert reg.personas["wang-jianguo"].name == "王建国"


def test_the_default_language_leaves_english_hashes_alone() -> None:
    path = ROOT / "personas" / "mei-lin-chen.yaml"
    persona = load_persona(path)
    assert persona.language == "en"
    explicit = PersonaCard.model_validate({**persona.model_dump(exclude={"content_hash"}), "language": "en"})
    assert card_hash(explicit) == persona.content_hash
    chinese = PersonaCard.model_validate({**persona.model_dump(exclude={"content_hash"}), "language": "zh"})
    assert card_hash(chinese) != persona.content_hash


def test_english_library_is_one_language() -> None:
    reg = load_registry(ROOT)
    english = [s for s in reg.splits if split_language(s) == "en"]
    assert english and all(reg.language(s) == "en" for s in english)


@pytest.mark.parametrize(("name", "language"), [("test", "en"), ("test-v1", "en"), ("test-zh", "zh"),
                                                 ("dev-zh", "zh"), ("zh", "en")])
def test_split_language_from_its_name(name: str, language: str) -> None:
    assert split_language(name) == language


def test_a_case_mixing_languages_is_refused(zh: Path) -> None:
    shutil.copy(ROOT / "personas" / "mei-lin-chen.yaml", zh / "personas" / "mei-lin-chen.yaml")
    replace(DEV, "persona: lin-xiaoyu", "persona: mei-lin-chen")(zh)
    line = one_validate_error(zh, DEV, "cases[1].persona")
    assert "persona 'mei-lin-chen' is en but scenario 'kaoyan-second-try' is zh" in line


def test_a_chinese_case_in_an_english_split_is_refused(zh: Path) -> None:
    (zh / TEST).rename(zh / "scenarios/splits/test.yaml")
    line = one_validate_error(zh, "scenarios/splits/test.yaml", "cases[0].scenario")
    assert "split 'test' is en" in line and "test-zh" in line


def test_a_card_in_the_wrong_folder_is_refused(zh: Path) -> None:
    replace(WANG, "language: zh\n", "")(zh)
    line = one_validate_error(zh, WANG, "language")
    assert "'en', but the card is in the 'zh' folder" in line


def test_list_and_validate_show_the_chinese_splits() -> None:
    listed = runner.invoke(app, ["list", "--root", str(ZH), "--split", "test-zh"])
    assert listed.exit_code == 0, listed.output
    assert "testzh-01" in listed.output and "devzh-01" not in listed.output
    checked = runner.invoke(app, ["validate", str(ZH)])
    assert checked.exit_code == 0, checked.output
    assert "test-zh: 1 cases" in checked.output
    for card, kind in ((WANG, "persona wang-jianguo"), (QINGMING, "scenario qingming-first-year")):
        one = runner.invoke(app, ["validate", str(ZH / card)])
        assert one.exit_code == 0 and one.output.startswith(f"ok: {kind} ("), one.output


def test_a_chinese_field_over_the_limit_is_refused(zh: Path) -> None:
    # 4,001 characters are 12,003 bytes in UTF-8: the limit counts characters, as in English
    replace(WANG, "background: >-", "background: " + "很" * 4001 + "\nold_background: >-")(zh)
    line = one_validate_error(zh, WANG, "background")
    assert "4001 characters" in line or "4,001 characters" in line, line


def test_a_chinese_card_with_an_alias_is_refused(zh: Path) -> None:
    replace(QINGMING, "topic: 老伴李秀英", "topic: &t 老伴李秀英")(zh)
    replace(QINGMING, "opening: 今天清明。去过了。", "opening: *t")(zh)
    result = runner.invoke(app, ["validate", str(zh)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "anchor &t is not allowed" in result.stderr and "qingming-first-year.yaml" in result.stderr


def test_list_filters_by_language() -> None:
    chinese = runner.invoke(app, ["list", "--root", str(ZH), "--language", "zh"])
    assert chinese.exit_code == 0 and "4 cases" in chinese.output and "testzh-01" in chinese.output
    english = runner.invoke(app, ["list", "--root", str(ZH), "--language", "en"])
    assert english.exit_code == 0 and "0 cases" in english.output
