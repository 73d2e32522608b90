"""The command line's shape: lazy sub-commands, --version, the listing, choices, flags, warnings."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import typer
from typer.testing import CliRunner

import emobench
from emobench import cli
from emobench.cli_support import SPLITS
from emobench.gate.compare import GATE_METRICS, slice_mask
from emobench.publish.columns import FAMILIES
from emobench.registry import load_registry
from emobench.registry.models import AXES
from emobench.run.runner import ROOT
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer

RUNNER = CliRunner()
WIDE = {"COLUMNS": "250"}


def root() -> cli.Commands:
    command = typer.main.get_command(cli.app)
    assert isinstance(command, cli.Commands)
    return command


def test_help_imports_no_sub_command_module() -> None:
    """`emobench --help` loads typer, rich and the three commands defined in emobench.cli only."""
    probe = (
        "import sys, emobench.cli as c\n"
        "sys.argv = ['emobench', '--help']\n"
        "try:\n    c.main()\nexcept SystemExit:\n    pass\n"
        "print('MODULES', sorted(m for m in sys.modules if m.split('.')[0] in "
        "('emobench', 'numpy', 'pyarrow', 'pandas', 'pydantic', 'litellm', 'typer', 'rich')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "100"}).stdout
    modules = json.loads(out.split("MODULES ", 1)[1].replace("'", '"'))
    assert [m for m in modules if m.startswith("emobench")] == ["emobench", "emobench.cli", "emobench.cli_support",
                                                                "emobench.errors"]
    assert not [m for m in modules if m.split(".")[0] in ("numpy", "pyarrow", "pandas", "pydantic", "litellm")]
    assert "typer.rich_utils" not in modules  # the top-level help is drawn without it
    assert "run " in out and "scenarios " in out


def test_run_is_listed_first_and_every_command_is_listed() -> None:
    result = RUNNER.invoke(cli.app, ["--help"], env=WIDE)
    listed = [line.split()[1] for line in result.output.splitlines() if line.startswith("│ ") and "  " in line[2:]]
    commands = [name for name in listed if not name.startswith("-")]
    assert commands[0] == "run"
    assert set(commands) == {"run", "merge", "judge", *cli.COMMANDS}


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_the_static_help_line_is_the_command_s_own(name: str) -> None:
    loaded = root().load(name)
    assert loaded.name == name
    assert " ".join((loaded.help or "").split("\n\n")[0].split()) == cli.COMMANDS[name].help


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_lazy_command_answers_help(name: str) -> None:
    result = RUNNER.invoke(cli.app, [name, "--help"], env=WIDE)
    assert result.exit_code == 0 and "Usage: root " + name in result.output.replace("emobench", "root")


def test_version_is_the_installed_distribution_s() -> None:
    result = RUNNER.invoke(cli.app, ["--version"])
    try:
        expected = importlib.metadata.version("emobench")
    except importlib.metadata.PackageNotFoundError:
        expected = emobench.__version__
    assert result.exit_code == 0 and result.output == f"emobench {expected}\n"


def test_the_static_split_list_is_the_registry_s() -> None:
    assert sorted(SPLITS) == load_registry(ROOT).splits


@pytest.mark.parametrize(
    ("args", "choices"),
    [
        (["run"], SPLITS),
        (["calibrate"], SPLITS),
        (["leaderboard", "show"], FAMILIES),
        (["gate"], GATE_METRICS),
    ],
)
def test_choices_are_listed_in_help(args: list[str], choices: tuple[str, ...]) -> None:
    text = RUNNER.invoke(cli.app, [*args, "--help"], env=WIDE).output
    assert all(choice in text for choice in choices)
    assert "valence" in text or args[0] != "leaderboard"


def test_every_slice_the_gate_help_lists_is_one_the_gate_reads() -> None:
    from emobench.gate.cli import SLICE_FORMS

    cases = pa.table({"category": ["life"], "dominant_axis": ["C"], "difficulty": ["hard"], "threshold": ["high"],
                      "valence": ["mixed"], "language": ["en"]})
    specs = []
    for form in SLICE_FORMS.split("; "):
        family, _, levels = form.partition("=")
        prefix = ""
        if levels.startswith("["):  # [C|A|P/]mode: with and without the axis
            axes, _, levels = levels[1:].partition("/]")
            assert axes.split("|") == list(AXES)
            prefix = f"{AXES[0]}/"
        for level in levels.split("|") if levels else [""]:
            specs += [f"{family}={level}" if level else family] + ([f"{family}={prefix}{level}"] if prefix else [])
    assert len(specs) > 20
    for spec in specs:
        slice_mask(spec, cases)  # raises InputError on a slice it cannot read


@pytest.mark.parametrize("args", [["run", "--help"], ["show", "--help"], ["leaderboard", "build", "--help"],
                                  ["scenarios", "list", "--help"], ["--help"]])
def test_flags_show_no_type(args: list[str]) -> None:
    text = RUNNER.invoke(cli.app, args, env=WIDE).output
    assert "--help" in text and "<bool>" not in text


def test_a_bad_choice_is_one_line_against_its_flag() -> None:
    for args, flag in ((["run", "--split", "nope"], "--split"), (["calibrate", "--judge", "x:y", "--split", "nope"], "--split"),
                       (["leaderboard", "show", "--family", "nope"], "--family")):
        result = RUNNER.invoke(cli.app, args)
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {flag}: 'nope' is not one of")


def test_a_role_kept_from_the_config_while_others_are_given_is_warned_about(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    subject = f"openai:m@{fake.base_url}"
    alone = RUNNER.invoke(cli.app, ["run", "--subject", subject, "--dry-run"])
    assert alone.exit_code == 0, alone.output
    warning = [line for line in alone.stderr.splitlines() if line.startswith("warning:")]
    assert warning == ["warning: --subject given, but configs/demo.yaml keeps its user simulator: vllm:embedded; "
                       "judges: vllm:embedded; pass --user and --judge to replace them (vllm:embedded is a local vLLM "
                       "server emobench starts), or --config configs/standard.yaml"]
    both = RUNNER.invoke(cli.app, ["run", "--subject", subject, "--user", subject, "--judge", subject, "--dry-run"])
    assert both.exit_code == 0 and "warning" not in both.stderr
    config = write_config(tmp_path / "c.yaml", fake.base_url)
    own = RUNNER.invoke(cli.app, ["run", "--config", str(config), "--subject", subject, "--dry-run"])
    kept = f"openai:fake-model@{fake.base_url}"
    assert own.exit_code == 0, own.output
    assert f"warning: --subject given, but {config} keeps its user simulator: {kept}; judges: {kept}; pass --user " \
           "and --judge to replace them" in own.stderr
    judge_only = RUNNER.invoke(cli.app, ["run", "--config", str(config), "--judge", subject, "--dry-run"])
    assert f"warning: --judge given, but {config} keeps its subjects: {kept}; user simulator: {kept}; pass " \
           "--subject and --user to replace them" in judge_only.stderr
    nothing = RUNNER.invoke(cli.app, ["run", "--config", str(config), "--dry-run"])
    assert nothing.exit_code == 0 and "warning" not in nothing.stderr
    assert fake.state.requests == []


def test_scenarios_list_shows_the_current_edition_unless_asked() -> None:
    registry = load_registry(ROOT)
    def title(*args: str) -> str:
        # The title wraps to the table's width: it is every line above the first blank one.
        lines = [line.strip() for line in RUNNER.invoke(cli.app, ["scenarios", "list", *args]).output.strip().splitlines()]
        return " ".join(lines[: lines.index("")])

    edition = registry.info.edition
    assert title() == f"{len(registry.edition_cases())} cases, edition {edition}"
    assert title("--archived") == (f"{len(registry.all_cases())} cases, edition {edition} and archived "
                                   f"{', '.join(registry.archived_splits)}")
    assert title("--split", registry.archived_splits[0]) == f"{len(registry.cases(registry.archived_splits[0]))} cases"
    current = RUNNER.invoke(cli.app, ["scenarios", "list"]).output
    assert not any(split in current for split in registry.archived_splits)
