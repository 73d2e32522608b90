"""The user's paths through the real command line that issue 30 found broken: the README's
own-model recipe as its cheap first run, then validate, show and leaderboard show at 80
columns and through a pipe; the published EMPA bundle; the one-line messages and exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from emobench.cli import app
from emobench.cli_support import EXIT_CODES, SPLITS
from emobench.errors import EmobenchError
from emobench.registry.models import CATEGORIES
from emobench.run.runner import ROOT
from tests.conftest import write_config
from tests.empa_fixture import BAD, GOOD, write_empa_results
from tests.fake_openai import FakeOpenAIServer, FakeState

RUNNER = CliRunner()
EMPA_BUNDLE = ROOT / "leaderboard" / "external" / "empa-d59757a"


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """README.md's own-model recipe with its cheap first run, every model role on the fake server:
    `run --config configs/standard.yaml --subject ... --user ... --judge ... --split dev --limit 2
    --seeds 0 --max-turns 3`. Returns the run directory and the command's stderr."""
    out = tmp_path_factory.mktemp("runs")
    with FakeOpenAIServer(FakeState()) as server:
        model = f"openai:my-model@{server.base_url}"
        result = RUNNER.invoke(app, [
            "run", "--config", "configs/standard.yaml", "--subject", model, "--user", f"openai:sim@{server.base_url}",
            "--judge", f"openai:judge@{server.base_url}", "--split", "dev", "--limit", "2", "--seeds", "0",
            "--max-turns", "3", "--out", str(out), "--run-id", "r", "--no-cache", "--no-progress",
        ])
    assert result.exit_code == 0, result.output
    return out / "r", result.stderr


def test_the_cheap_first_run_lowers_min_turns_and_keeps_the_reference_subject(recipe: tuple[Path, str]) -> None:
    run, stderr = recipe
    assert ("note: --max-turns 3 is below min_turns 12 of configs/standard.yaml: min_turns lowered to 3 "
            "(set it with --min-turns)") in stderr
    assert "warning" not in stderr  # every model role was given on the command line
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["min_turns"] == 3 and manifest["config"]["max_turns"] == 3
    assert [s["binding"] for s in manifest["config"]["subjects"]][1:] == ["scripted:platitude"]


def test_validate_on_the_recipe_s_run_gives_a_known_groups_result(recipe: tuple[Path, str], tmp_path: Path) -> None:
    run, _ = recipe
    result = RUNNER.invoke(app, ["validate", str(run), "-o", str(tmp_path / "validity.json"), "--no-cache",
                                 "--n-boot", "200"])
    assert result.exit_code == 0, result.output
    assert "NOT RUN" not in result.stdout
    known = json.loads((tmp_path / "validity.json").read_text())["known_groups"]
    assert known["verdict"] in ("pass", "fail")
    assert {(c["reference"], c["metric"]) for c in known["comparisons"]} == {
        ("scripted:platitude", "EPM-Q"), ("scripted:platitude", "success")}
    assert all(c["n_cases"] == 2 for c in known["comparisons"])


def _not_shown(text: str) -> list[str]:
    lines = [line for line in text.splitlines() if line.startswith("not shown at 80 columns: ")]
    assert len(lines) == 1, text
    return lines[0].removeprefix("not shown at 80 columns: ").split(" (COLUMNS=200")[0].split(", ")


def _header(text: str, first: str) -> str:
    return next(line for line in text.splitlines() if line.split()[:1] == [first] or f" {first} " in line[:12])


def _piped(*args: str) -> str:
    """The command's stdout through a real pipe, with no COLUMNS: what `| less` or a CI log gets."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run([sys.executable, "-m", "emobench", *args], capture_output=True, text=True, env=env,
                          check=True, timeout=120)
    return done.stdout


@pytest.mark.parametrize("how", ["COLUMNS=80", "piped"])
def test_leaderboard_show_keeps_the_key_columns_and_names_what_it_drops(recipe: tuple[Path, str], how: str) -> None:
    run, _ = recipe
    if how == "piped":
        text = _piped("leaderboard", "show", str(run))
    else:
        result = RUNNER.invoke(app, ["leaderboard", "show", str(run)], env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        text = result.stdout
    header = _header(text, "Subject")
    assert "EPM-Q" in header and "Success %" in header
    platitude = next(line for line in text.splitlines() if "scripted:platitude" in line)
    assert platitude.count("[") == 2  # EPM-Q's and success's 95% CIs
    assert "95% CI in brackets" in text
    dropped = _not_shown(text)
    assert {"Emp.", "Human.", "Persona", "Coher."} <= set(dropped)
    assert not [name for name in dropped if f" {name} " in f"{header} "]  # what is named is what is missing
    assert max(len(line) for line in text.splitlines() if not line.startswith("not shown")) <= 80
    wide = RUNNER.invoke(app, ["leaderboard", "show", str(run)], env={"COLUMNS": "250"}).stdout
    assert "not shown" not in wide and all(f" {name} " in wide for name in dropped if not name.endswith(" CI"))


@pytest.mark.parametrize("how", ["COLUMNS=80", "piped"])
def test_show_keeps_epmq_and_success_at_80_columns(recipe: tuple[Path, str], how: str) -> None:
    run, _ = recipe
    if how == "piped":
        text = _piped("show", str(run))
    else:
        result = RUNNER.invoke(app, ["show", str(run)], env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        text = result.stdout
    header = _header(text, "#")
    for column in ("Case", "Subject", "EPM-Q", "Success", "Meter"):
        assert column in header, header
    assert _not_shown(text) == ["Audit"] and "Audit" not in header
    assert sum("scripted:platitude" in line for line in text.splitlines()) == 2


@pytest.mark.parametrize("columns", ["80", "250"])
def test_the_published_empa_bundle_shows(columns: str) -> None:
    result = RUNNER.invoke(app, ["leaderboard", "show", str(EMPA_BUNDLE)], env={"COLUMNS": columns})
    assert result.exit_code == 0, result.output
    text = result.stdout
    header = _header(text, "#")
    assert "claude-4.6-opus" in text and "EPM-Q" in header and "Success %" in header and " BT " not in header
    assert "95% CI in brackets." in text and "?" not in text  # no bootstrap metadata: no "? resamples"
    if columns == "80":
        assert "EPM-Q (EMPA)" in _not_shown(text)
    else:
        assert "EPM-Q (EMPA)" in header and "not shown" not in text


def _one_line(args: list[str]) -> str:
    result = RUNNER.invoke(app, args)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    return lines[0]


def test_a_min_turns_above_max_turns_names_the_flag(tmp_path: Path) -> None:
    line = _one_line(["run", "--config", "configs/standard.yaml", "--max-turns", "3", "--min-turns", "5", "--dry-run"])
    assert line.startswith("error: --min-turns: min_turns: 5 exceeds max_turns 3; lower it with --min-turns")
    config = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9/v1", max_turns=3, min_turns=5)
    assert "--min-turns" in _one_line(["run", "--config", str(config), "--dry-run"])


def test_an_unknown_split_in_a_config_names_the_config_and_the_known_splits(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9/v1", split="tets")
    assert _one_line(["run", "--config", str(config), "--dry-run"]) == (
        f"error: {config}: split: unknown split 'tets' (known: {', '.join(SPLITS)})")


def test_a_misspelt_key_is_named_with_the_likely_one(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9/v1")
    data = yaml.safe_load(config.read_text())
    data["subject"] = data.pop("subjects")
    config.write_text(yaml.safe_dump(data))
    assert _one_line(["run", "--config", str(config), "--dry-run"]) == (
        f"error: {config}: subject: unknown key; did you mean subjects?")
    data["subjects"] = data.pop("subject")
    data["references"] = [{"binding": data["user"]["binding"]}]
    config.write_text(yaml.safe_dump(data))
    assert _one_line(["run", "--config", str(config), "--dry-run"]).startswith(
        f"error: {config}: references[0].binding: 'openai:fake-model@http://127.0.0.1:9/v1' is not a scripted:NAME")


def test_validate_names_a_missing_folder_and_a_folder_that_is_no_run(tmp_path: Path) -> None:
    assert _one_line(["validate", str(tmp_path / "nope")]) == (
        f"error: {tmp_path / 'nope'}: no such folder: give a run directory (runs/<id>)")
    assert _one_line(["validate", str(tmp_path)]) == f"error: {tmp_path}: not a run directory (no manifest.json)"


def test_gate_names_an_unknown_category(tmp_path: Path) -> None:
    line = _one_line(["gate", "--baseline", str(tmp_path / "b"), "--candidate", str(tmp_path / "c"),
                      "--slice", "category=lif"])
    assert line == f"error: --slice: category=lif: unknown category 'lif' (known: {', '.join(CATEGORIES)})"


def test_an_endpoint_failure_exits_3_as_documented(tmp_path: Path) -> None:
    with FakeOpenAIServer(FakeState(fault_rate=1.0, fault_kinds=("500",))) as server:
        config = write_config(tmp_path / "c.yaml", server.base_url)
        data = yaml.safe_load(config.read_text())
        for role in (*data["subjects"], data["user"], *data["judges"]):
            role["retries"] = 0
        config.write_text(yaml.safe_dump(data))
        result = RUNNER.invoke(app, ["run", "--config", str(config), "--out", str(tmp_path), "--no-cache",
                                     "--no-progress"])
    assert result.exit_code == 3 and result.stderr.splitlines()[-1].startswith("error: endpoint "), result.output
    reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    codes = {cls.exit_code for cls in (EmobenchError, *EmobenchError.__subclasses__())} | {0, 1, 130, 143}
    assert set(EXIT_CODES) == codes
    for code in codes:
        assert f"\n| {code} | " in reference.split("## Exit codes", 1)[1]


def _plain(terminal: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal)


def _bar_ends(stderr: str) -> list[str]:
    """The last state of the progress bar in a terminal's stderr, 'what done/total' (the states
    between are drawn ten times a second, so which of them show depends on the machine)."""
    frames = [f for f in _plain(stderr).replace("\r", "\n").splitlines() if f.strip()]
    return [f"{f.split()[0]} {f.split()[-2]}" for f in frames if re.search(r" \d+/\d+ \d+:\d\d:\d\d$", f)][-1:]


def test_long_commands_draw_run_s_progress_bar_on_a_terminal(recipe: tuple[Path, str], tmp_path: Path) -> None:
    run, _ = recipe
    terminal = {"FORCE_COLOR": "1", "COLUMNS": "120"}  # rich draws as on a terminal
    validate = RUNNER.invoke(app, ["validate", str(run), "-o", str(tmp_path / "v.json"), "--n-boot", "50"], env=terminal)
    assert validate.exit_code == 0 and _bar_ends(validate.stderr) == ["done 2/2"], validate.stderr
    merged = RUNNER.invoke(app, ["merge", str(run), "-o", str(tmp_path / "merged")], env=terminal)
    assert merged.exit_code == 0 and _bar_ends(merged.stderr) == ["scoring 4/4"], merged.stderr
    panel = tmp_path / "panel.yaml"
    with FakeOpenAIServer(FakeState()) as server:
        panel.write_text(yaml.safe_dump({"name": "p", "judges": [{"binding": f"openai:j@{server.base_url}"}]}))
        judged = RUNNER.invoke(app, ["judge", str(tmp_path / "merged"), "--panel", str(panel), "--no-cache"], env=terminal)
    assert judged.exit_code == 0 and _bar_ends(judged.stderr) == ["scoring 4/4"], judged.output
    results = write_empa_results(tmp_path / "empa", {"model-a": {"script_001": GOOD, "script_002": BAD}},
                                 {"script_001": ("A", "Leisure"), "script_002": ("P", "Life")})
    imported = RUNNER.invoke(app, ["import", "empa", str(results), "-o", str(tmp_path / "imported"), "--commit", "c"],
                             env=terminal)
    assert imported.exit_code == 0 and _bar_ends(imported.stderr) == ["scoring 2/2"], imported.output
    bundle = RUNNER.invoke(app, ["external", "empa", str(results), "-o", str(tmp_path / "bundle"), "--commit", "c",
                                 "--n-boot", "20"], env=terminal)
    assert bundle.exit_code == 0 and _bar_ends(bundle.stderr) == ["done 4/4"], bundle.output
    assert "1 models x 2 cases" in _plain(bundle.stderr)
    assert "0 of 0 pairs separated after Holm, median MDD –" in _plain(bundle.stderr)
    # Not on a terminal (a log, a pipe): no bar, only the command's own lines.
    plain = RUNNER.invoke(app, ["validate", str(run), "-o", str(tmp_path / "v.json"), "--n-boot", "50"])
    assert plain.exit_code == 0 and plain.stderr == f"wrote {tmp_path / 'v.json'}\n"


def test_no_references_leaves_the_config_s_reference_out(fake: FakeOpenAIServer) -> None:
    model = f"openai:m@{fake.base_url}"
    args = ["run", "--config", "configs/standard.yaml", "--subject", model, "--user", model, "--judge", model,
            "--split", "dev", "--limit", "2", "--seeds", "0", "--max-turns", "3", "--dry-run"]
    both = RUNNER.invoke(app, args, env={"COLUMNS": "200"})
    alone = RUNNER.invoke(app, [*args, "--no-references"], env={"COLUMNS": "200"})
    assert both.exit_code == 0 and alone.exit_code == 0, both.output + alone.output
    assert "× 2 subject(s) = 4 episode(s)" in both.stdout and "scripted:platitude" in both.stdout
    assert "× 1 subject(s) = 2 episode(s)" in alone.stdout and "scripted:platitude" not in alone.stdout
    assert fake.state.requests == []
