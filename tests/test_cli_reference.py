"""docs/reference.md is generated from the code: regenerating it must give the committed page."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from emobench.config import RoleConfig
from emobench.run.runner import ROOT


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "scripts" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_reference_is_what_the_code_generates() -> None:
    committed = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    assert generator().render() == committed, "docs/reference.md is out of date: run python scripts/gen_reference.py"


@pytest.mark.parametrize(
    "needle",
    ["`--split`", "`--seeds`", "`--max-turns`", "`--min-turns`", "`--detect`", "`--candidate-subject`", "`--dry-run`",
     "`--version`", "`--archived`", "| `price` |", "| `input_per_mtok` |", "category, language, valence"],
)
def test_the_reference_documents_what_issue_23_found_missing(needle: str) -> None:
    assert needle in (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")


def test_a_config_field_without_a_meaning_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = generator()
    monkeypatch.setitem(gen.MEANINGS, RoleConfig, {k: v for k, v in gen.MEANINGS[RoleConfig].items() if k != "price"})
    with pytest.raises(SystemExit, match=r"RoleConfig: no meaning for \['price'\]"):
        gen.render()


def test_no_path_of_this_machine_in_the_reference() -> None:
    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    assert str(ROOT) not in text and str(Path.home()) not in text
