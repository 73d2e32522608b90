"""Bad cards give one line naming file, field and problem (exit 2); hashes track content only."""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from emobench.errors import InputError
from emobench.registry import load_registry
from emobench.registry.cli import app
from emobench.registry.hashing import card_hash, sha256_hex
from emobench.registry.loader import display_path
from emobench.registry.models import PersonaCard

TINY = Path(__file__).parent / "data" / "registry" / "tiny"
runner = CliRunner()


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    root = tmp_path / "lib"
    shutil.copytree(TINY, root)
    return root


def edit_yaml(path: Path, change: Callable[[Any], object]) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def set_key(path: Path, key: str, value: Any) -> None:
    edit_yaml(path, lambda d: d.__setitem__(key, value))


def del_key(path: Path, key: str) -> None:
    edit_yaml(path, lambda d: d.pop(key))


def set_case(path: Path, index: int, key: str, value: Any) -> None:
    edit_yaml(path, lambda d: d[index].__setitem__(key, value))


def set_iedr(path: Path, index: int, item: str, value: Any) -> None:
    edit_yaml(path, lambda d: d[index]["iedr"].__setitem__(item, value))


def write(path: Path, text: str) -> None:
    path.write_text(text)


PERSONA = "personas/ada.yaml"
SCENARIO = "scenarios/new-job.yaml"
SPLIT = "scenarios/splits/mini.yaml"

# (name, break the library, file named, field named, words of the problem)
BAD_CARDS: list[tuple[str, Callable[[Path], object], str, str, str]] = [
    ("wrong type", lambda r: set_key(r / PERSONA, "age", "forty"),
     PERSONA, "age", "valid integer"),
    ("wrong nested type", lambda r: edit_yaml(r / PERSONA, lambda d: d["style"].__setitem__("habits", "typos")),
     PERSONA, "style.habits", "valid list"),
    ("quoted number", lambda r: set_key(r / SCENARIO, "version", "1"),
     SCENARIO, "version", "valid integer"),
    ("unknown enum", lambda r: set_key(r / PERSONA, "threshold", "extreme"),
     PERSONA, "threshold", "'high', 'medium' or 'low'"),
    ("unknown nested enum", lambda r: edit_yaml(r / PERSONA, lambda d: d["needs"]["C"].__setitem__("level", "huge")),
     PERSONA, "needs.C.level", "'high', 'medium' or 'low'"),
    ("unknown category", lambda r: set_key(r / SCENARIO, "category", "sports"),
     SCENARIO, "category", "'life', 'health'"),
    ("unknown memory period", lambda r: edit_yaml(r / SCENARIO, lambda d: d["memories"][1].__setitem__("period", "teens")),
     SCENARIO, "memories[1].period", "'childhood'"),
    ("missing field", lambda r: del_key(r / SCENARIO, "opening"),
     SCENARIO, "opening", "missing required field"),
    ("missing need", lambda r: edit_yaml(r / PERSONA, lambda d: d["needs"].pop("P")),
     PERSONA, "needs.P", "missing required field"),
    ("extra field", lambda r: set_key(r / PERSONA, "mood", "sad"),
     PERSONA, "mood", "unknown field"),
    ("two high needs", lambda r: edit_yaml(r / PERSONA, lambda d: d["needs"]["A"].__setitem__("level", "high")),
     PERSONA, "needs", "exactly one need must be 'high', found 2"),
    ("no high need", lambda r: edit_yaml(r / PERSONA, lambda d: d["needs"]["C"].__setitem__("level", "low")),
     PERSONA, "needs", "found 0"),
    ("too few stages", lambda r: edit_yaml(r / SCENARIO, lambda d: d.__setitem__("stages", d["stages"][:1])),
     SCENARIO, "stages", "at least 2"),
    ("too many stages", lambda r: edit_yaml(r / SCENARIO, lambda d: d.__setitem__("stages", d["stages"] * 3)),
     SCENARIO, "stages", "at most 6"),
    ("yaml 1.1 boolean", lambda r: write(r / SCENARIO, (r / SCENARIO).read_text().replace("help: false", "help: yes")),
     SCENARIO, "professional_help", "valid boolean, got 'yes'"),
    ("bad valence", lambda r: set_key(r / SCENARIO, "valence", "happy"),
     SCENARIO, "valence", "'negative', 'mixed' or 'positive'"),
    ("bad relative status",
     lambda r: edit_yaml(r / "personas/ben.yaml", lambda d: d["facts"]["relatives"][0].__setitem__("status", "gone")),
     "personas/ben.yaml", "facts.relatives[0].status", "'alive' or 'dead'"),
    ("library.yaml missing", lambda r: (r / "library.yaml").unlink(),
     "library.yaml", "", "file not found"),
    ("duplicate persona id", lambda r: shutil.copy(r / PERSONA, r / "personas/ada-copy.yaml"),
     PERSONA, "id", "duplicate persona id 'ada' (also in"),
    ("duplicate case id", lambda r: write(r / "scenarios/splits/extra.yaml", (r / SPLIT).read_text()),
     SPLIT, "cases[0].id", "duplicate case id 'mini-01' (also in"),
    ("missing persona", lambda r: set_case(r / SPLIT, 1, "persona", "zed"),
     SPLIT, "cases[1].persona", "unknown persona 'zed'"),
    ("missing scenario", lambda r: set_case(r / SPLIT, 2, "scenario", "nowhere"),
     SPLIT, "cases[2].scenario", "unknown scenario 'nowhere'"),
    ("iedr out of range", lambda r: set_iedr(r / SPLIT, 1, "A2", 4),
     SPLIT, "cases[1].iedr.A2", "less than or equal to 3"),
    ("iedr negative", lambda r: set_iedr(r / SPLIT, 0, "C1", -1),
     SPLIT, "cases[0].iedr.C1", "greater than or equal to 0"),
    ("iedr missing item", lambda r: edit_yaml(r / SPLIT, lambda d: d[2]["iedr"].pop("P3")),
     SPLIT, "cases[2].iedr.P3", "missing required field"),
    ("zero P0", lambda r: edit_yaml(r / SPLIT, lambda d: d[0].__setitem__("iedr", dict.fromkeys(d[0]["iedr"], 0))),
     SPLIT, "cases[0].iedr", "zero vector"),
    ("yaml syntax error", lambda r: write(r / SCENARIO, "id: new-job\nstages: [a, b\nversion: 1\n"),
     SCENARIO, "line 3", "YAML syntax error"),
    ("yaml tab indent", lambda r: write(r / PERSONA, "id: ada\nstyle:\n\tlength: short\n"),
     PERSONA, "line 3", "YAML syntax error"),
    ("duplicate yaml key", lambda r: write(r / PERSONA, (r / PERSONA).read_text() + "threshold: low\n"),
     PERSONA, "line", "duplicate key 'threshold'"),
    ("card is a list", lambda r: write(r / SCENARIO, "- id: new-job\n"),
     SCENARIO, "", "expected a mapping"),
    ("empty split", lambda r: write(r / SPLIT, ""),
     SPLIT, "", "expected a list of cases, got an empty file"),
]


@pytest.mark.parametrize(("name", "breaker", "file", "field", "problem"), BAD_CARDS,
                         ids=[case[0] for case in BAD_CARDS])
def test_bad_card_is_one_line_with_file_field_problem(
    lib: Path, name: str, breaker: Callable[[Path], object], file: str, field: str, problem: str
) -> None:
    breaker(lib)
    result = runner.invoke(app, ["validate", str(lib)])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""  # no summary: nothing was loaded half-way
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith(f"error: {display_path(lib / file)}: ")
    if field:
        assert f": {field}" in line
    assert problem in line
    assert "Traceback" not in result.output

    with pytest.raises(InputError) as info:
        load_registry(lib)
    assert f"error: {info.value}" == line


def test_error_fields_are_structured(lib: Path) -> None:
    set_iedr(lib / SPLIT, 1, "A2", 7)
    with pytest.raises(InputError) as info:
        load_registry(lib)
    assert (info.value.source, info.value.field) == (display_path(lib / SPLIT), "cases[1].iedr.A2")


def test_every_command_reports_one_line(lib: Path) -> None:
    set_key(lib / PERSONA, "age", "x")
    for args in (["list"], ["show", "mini-01"], ["stats", "--split", "mini"]):
        result = runner.invoke(app, [*args, "--root", str(lib)])
        assert result.exit_code == 2
        assert len(result.stderr.strip().splitlines()) == 1


def test_unknown_case_and_split_and_filter(lib: Path) -> None:
    for args, words in ((["show", "nope"], "unknown case 'nope'"),
                        (["stats", "--split", "nope"], "unknown split 'nope'"),
                        (["list", "--axis", "X"], "unknown value 'X'")):
        result = runner.invoke(app, [*args, "--root", str(lib)])
        assert result.exit_code == 2 and words in result.stderr


def test_validate_single_card_files(lib: Path) -> None:
    ok = runner.invoke(app, ["validate", str(lib / PERSONA)])
    assert ok.exit_code == 0 and "persona ada" in ok.stdout
    set_key(lib / SCENARIO, "category", "sports")
    bad = runner.invoke(app, ["validate", str(lib / SCENARIO)])
    assert bad.exit_code == 2 and ": category: " in bad.stderr


# --- hashes and versions ---------------------------------------------------------------


def hashes(root: Path) -> tuple[dict[str, str], str]:
    reg = load_registry(root)
    return {c.id: c.content_hash for c in reg.cases("mini")}, reg.version("mini")


def test_one_changed_word_changes_card_case_and_version(lib: Path) -> None:
    reg = load_registry(lib)
    before_card = reg.scenarios["new-job"].content_hash
    before_cases, before_version = hashes(lib)
    path = lib / SCENARIO
    path.write_text(path.read_text().replace("Starting a new job", "Starting a new role"))
    reg = load_registry(lib)
    after_cases, after_version = hashes(lib)
    assert reg.scenarios["new-job"].content_hash != before_card
    assert after_version != before_version
    # only the case that uses the edited card moves
    assert {k for k in before_cases if before_cases[k] != after_cases[k]} == {"mini-03"}


def test_persona_word_change_moves_every_case_using_it(lib: Path) -> None:
    before, version = hashes(lib)
    path = lib / "personas/ben.yaml"
    path.write_text(path.read_text().replace("some doubt", "a little doubt"))
    after, new_version = hashes(lib)
    assert new_version != version
    assert {k for k in before if before[k] != after[k]} == {"mini-02", "mini-03"}


def test_reordering_and_renaming_files_changes_nothing(lib: Path) -> None:
    before, version = hashes(lib)
    (lib / "personas/ada.yaml").rename(lib / "personas/zz-last.yaml")
    (lib / "scenarios/new-job.yaml").rename(lib / "scenarios/000-first.yml")
    edit_yaml(lib / SPLIT, lambda d: d.reverse())
    after, new_version = hashes(lib)
    assert (after, new_version) == (before, version)
    assert [c.id for c in load_registry(lib).cases("mini")] == ["mini-03", "mini-02", "mini-01"]


def test_reformatting_yaml_changes_nothing(lib: Path) -> None:
    before, version = hashes(lib)
    for path in [*lib.glob("personas/*.yaml"), *lib.glob("scenarios/*.yaml")]:
        data = yaml.safe_load(path.read_text())
        path.write_text("# reformatted\n" + yaml.safe_dump(data, default_flow_style=True, width=40))
    assert hashes(lib) == (before, version)


def test_explicit_default_equals_omitted(lib: Path) -> None:
    before, version = hashes(lib)
    set_key(lib / PERSONA, "meter_start", 40)  # ada omits it; 40 is the default
    assert hashes(lib) == (before, version)


def shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), flow=st.sampled_from([True, False, None]),
       indent=st.integers(2, 6), width=st.integers(30, 200))
def test_hash_ignores_key_order_and_layout(seed: int, flow: bool | None, indent: int, width: int) -> None:
    data = yaml.safe_load((TINY / PERSONA).read_text())
    text = yaml.safe_dump(shuffled(data, random.Random(seed)), sort_keys=False,
                          default_flow_style=flow, indent=indent, width=width)
    reloaded = yaml.safe_load(text)
    assert card_hash(PersonaCard.model_validate(reloaded)) == card_hash(PersonaCard.model_validate(data))


@settings(max_examples=50)
@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=8),
       st.randoms())
def test_canonical_hash_is_key_order_free(value: dict[str, Any], rng: random.Random) -> None:
    items = list(value.items())
    rng.shuffle(items)
    assert sha256_hex(dict(items)) == sha256_hex(value)
