"""The command line's last rough edges (issue 40, section 2): a missing argument named in one line,
any slice family a leaderboard has, every kept role and unreachable endpoint named before a call,
the README's commands found as its readers run them, and the items noticed before and left."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import AsyncExitStack
from enum import Enum
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import typer
import yaml
from typer.core import TyperArgument
from typer.testing import CliRunner

from emobench import cli
from emobench.cli_support import progress_bar
from emobench.config import PanelConfig, RoleConfig
from emobench.endpoints.pool import EndpointPool
from emobench.run.accounting import summary_line
from emobench.run.preflight import preflight
from emobench.run.runner import ROOT
from tests.conftest import Serve, write_config
from tests.fake_openai import default_responder
from tests.test_docs_commands import doc_blocks

RUNNER = CliRunner()
EMPA_BUNDLE = next((ROOT / "leaderboard" / "external").glob("empa-*"))


def _commands(group: typer.core.TyperGroup, path: list[str]) -> Iterator[tuple[list[str], typer._click.Command]]:
    for name in group.list_commands(typer.Context(group)):
        command = group.load(name) if isinstance(group, cli.Commands) else group.commands[name]
        if isinstance(command, typer.core.TyperGroup):
            yield from _commands(command, [*path, name])
        else:
            yield [*path, name], command


def _value(param: typer.core.TyperOption | TyperArgument) -> str:
    """A value the parser accepts for a parameter, so that only the omitted one is wrong."""
    annotation = param.type_descriptor.annotation
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return str(next(iter(annotation)).value)
    return "1" if annotation in (int, float) else "x"


def _without(params: list, omitted: object) -> list[str]:
    """Arguments for every required parameter but ``omitted`` (and, for a positional one, those
    after it, which would otherwise shift into its place)."""
    args: list[str] = []
    positional = [p for p in params if isinstance(p, TyperArgument)]
    cut = positional.index(omitted) if omitted in positional else len(positional)
    for param in params:
        if param is omitted or not param.required:
            continue
        if isinstance(param, TyperArgument):
            args += [_value(param)] if positional.index(param) < cut else []
        else:
            args += [next(o for o in param.opts if o.startswith("--")), _value(param)]
    return args


def test_every_missing_required_parameter_of_every_command_is_named_in_one_line() -> None:
    root = typer.main.get_command(cli.app)
    assert isinstance(root, cli.Commands)
    caught, wrong = [], []
    for path, command in _commands(root, []):
        for param in (p for p in command.params if p.required):
            args = [*path, *_without(command.params, param)]
            name = (param.metavar or param.name).upper() if isinstance(param, TyperArgument) else param.opts[-1]
            result = RUNNER.invoke(cli.app, args, prog_name="emobench")
            lines = result.stderr.strip().splitlines()
            caught.append(" ".join(args))
            if not (result.exit_code == 2 and len(lines) == 1 and name in lines[0] and "missing" in lines[0]):
                wrong.append(f"{' '.join(args)} -> {result.exit_code} {result.stderr!r}")
    assert len(caught) >= 16  # every command with a required parameter, each one omitted in turn
    assert wrong == []


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["show"], "error: emobench show: missing argument RUN_DIR"),
        (["judge", "runs/x"], "error: emobench judge: missing option --panel"),
        (["gate", "--slice", "overall"], "error: emobench gate: missing option --baseline"),
        (["leaderboard", "build"], "error: emobench leaderboard build: missing argument RUN_DIRS"),
    ],
)
def test_the_issue_s_missing_arguments(args: list[str], line: str) -> None:
    result = RUNNER.invoke(cli.app, args, prog_name="emobench")
    assert result.exit_code == 2 and result.stderr.strip() == line


def _families(path: Path) -> list[str]:
    return list(dict.fromkeys(pq.read_table(path / "leaderboard.parquet").column("slice_family").to_pylist()))


@pytest.mark.parametrize("bundle", [ROOT / "leaderboard", EMPA_BUNDLE], ids=["shipped", "empa"])
def test_leaderboard_show_takes_every_family_the_leaderboard_has(bundle: Path) -> None:
    families = _families(bundle)
    assert len(families) >= 4
    for family in families:
        result = RUNNER.invoke(cli.app, ["leaderboard", "show", str(bundle), "--family", family],
                               env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert "emobench leaderboard:" in result.stdout and "Subject" in result.stdout


@pytest.mark.parametrize(("bundle", "family"), [(ROOT / "leaderboard", "nope"), (ROOT / "leaderboard", "difficulty"),
                                                (EMPA_BUNDLE, "valence"), (EMPA_BUNDLE, "nope")])
def test_a_family_the_leaderboard_lacks_is_one_line_listing_those_it_has(bundle: Path, family: str) -> None:
    result = RUNNER.invoke(cli.app, ["leaderboard", "show", str(bundle), "--family", family])
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith(f"error: --family: {family!r} is not one of")
    assert all(f in lines[0] for f in _families(bundle))


def test_kept_roles_are_named_before_preflight_and_every_unreachable_endpoint_at_once(
    serve: Serve, tmp_path: Path
) -> None:
    fake = serve(default_responder)
    dead = [f"http://127.0.0.{i}:9/v1" for i in (1, 2, 3)]  # nothing listens on port 9: refused at once
    cfg = write_config(tmp_path / "run.yaml", fake.base_url)
    data = yaml.safe_load(cfg.read_text())
    data["user"]["binding"] = f"openai:sim@{dead[1]}"
    data["judges"][0]["binding"] = f"openai:judge@{dead[2]}"
    cfg.write_text(yaml.safe_dump(data))
    for extra in ([], ["--dry-run"]):
        result = RUNNER.invoke(cli.app, ["run", "--config", str(cfg), "--subject", f"openai:m@{dead[0]}",
                                         "--out", str(tmp_path / "runs"), "--no-progress", *extra])
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 2, result.output
        assert lines[0].startswith(f"warning: --subject given, but {cfg} keeps its user simulator: openai:sim@{dead[1]}; "
                                   f"judges: openai:judge@{dead[2]}; pass --user and --judge to replace them")
        assert lines[1].startswith("error: ") and all(f"GET {url}/models failed" in lines[1] for url in dead)
        assert all(field in lines[1] for field in ("subjects[0]", "user", "panel.judges[0]"))
    assert fake.state.requests == [] and not (tmp_path / "runs").exists()


def test_gemini_s_prefixed_model_ids_are_no_unlisted_model(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, role = serve(default_responder), RoleConfig(binding="x")

    def warnings(listed: tuple[str, ...], model: str) -> list[str]:
        said: list[str] = []
        monkeypatch.setattr(fake.state, "models", listed)  # the module's server: restored after
        preflight(roles=[("user", role.model_copy(update={"binding": f"openai:{model}@{fake.base_url}"}))],
                  panel=PanelConfig(judges=[role]), scoring_profile="emobench", out_dir=tmp_path, root=ROOT,
                  source="c.yaml", tracker=False, note=said.append)
        return [line for line in said if "does not list" in line]

    assert warnings(("models/gemini-2.0-flash", "models/other"), "gemini-2.0-flash") == []
    assert warnings(("models/gemini-2.0-flash",), "models/gemini-2.0-flash") == []
    assert len(warnings(("models/gemini-2.0-flash",), "gemini-1.5-pro")) == 1  # one it truly lacks still warns


def _readme_emobench_exits(text: str, folder: Path) -> list[tuple[str, int]]:
    """Each emobench command of the README's blocks that run, as a reader who installed emobench
    into an environment of their own runs it: in a folder with no demo venv, `emobench` on PATH
    (a stand-in that exits 0: what is checked is that the shell finds the program)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    (bin_dir / "emobench").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "emobench").chmod(0o755)
    commands = [c for block in doc_blocks(ROOT / "README.md", text) if not block.skip for c in block.commands()
                if "emobench" in c.split()[0]]
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(folder)}
    return [(c, subprocess.run(["bash", "-c", c], cwd=folder, env=env, capture_output=True).returncode)
            for c in commands]


def test_every_readme_emobench_command_finds_the_program(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    exits = _readme_emobench_exits(text, tmp_path)
    assert len(exits) >= 8 and [(c, rc) for c, rc in exits if rc] == []
    # The README opens with its two commands; the demo's reader gets `emobench` on PATH from the
    # venv the demo built, activated before the first emobench command of the demo's section.
    blocks = doc_blocks(ROOT / "README.md", text)
    first = blocks[0].commands()
    assert len(first) == 2 and "nox -s demo" in first[0] and "nox -s tests" in first[1]
    demo_line = text[:text.index("## The demo")].count("\n") + 1
    demo_commands = [c for b in blocks if b.line > demo_line and not b.skip for c in b.commands()]
    first_emobench = next(i for i, c in enumerate(demo_commands) if c.split()[0] == "emobench")
    assert any(c.startswith("source .venv/bin/activate") for c in demo_commands[:first_emobench])


# Noticed before and left (issue 40): each below failed on the code before it.

BAD_KEY = "sk-\u2026"  # a placeholder's ellipsis pasted as a key: it cannot go in an HTTP header


def test_a_non_ascii_key_is_one_line_before_preflight_reaches_anything(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = serve(default_responder)
    fake.state.gets.clear()
    monkeypatch.setenv("EMOBENCH_TEST_KEY", BAD_KEY)
    cfg = write_config(tmp_path / "run.yaml", fake.base_url)
    data = yaml.safe_load(cfg.read_text())
    data["judges"][0]["api_key_env"] = "EMOBENCH_TEST_KEY"
    cfg.write_text(yaml.safe_dump(data))
    result = RUNNER.invoke(cli.app, ["run", "--config", str(cfg), "--dry-run", "--no-progress"])
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "panel.judges[0].api_key_env" in lines[0] and "EMOBENCH_TEST_KEY" in lines[0] and "U+2026" in lines[0]
    assert BAD_KEY not in result.output and fake.state.gets == [] and fake.state.requests == []


def test_validate_human_checks_the_judges_keys_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMOBENCH_TEST_KEY", raising=False)
    run = tmp_path / "run"
    run.mkdir()
    config = yaml.safe_load(write_config(tmp_path / "c.yaml", "http://127.0.0.1:9/v1").read_text())
    config["judges"][0]["api_key_env"] = "EMOBENCH_TEST_KEY"
    (run / "manifest.json").write_text(json.dumps({"config": config}))
    human = tmp_path / "human.jsonl"
    human.write_text("")
    result = RUNNER.invoke(cli.app, ["validate", str(run), "--human", str(human)])
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "panel.judges[0].api_key_env" in lines[0] and "EMOBENCH_TEST_KEY is not set" in lines[0]


def test_runs_latest_moves_only_to_a_run_with_an_episode(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs"
    (runs / "old").mkdir(parents=True)
    (runs / "latest").symlink_to("old", target_is_directory=True)
    server = serve(default_responder)
    monkeypatch.setattr(server.state, "open_models", True)
    monkeypatch.setattr(server.state, "key", "the-right-key")  # every chat call: 401, after preflight passed
    cfg = write_config(tmp_path / "run.yaml", server.base_url)
    args = ["run", "--config", str(cfg), "--out", str(runs), "--no-progress", "--no-cache", "--limit", "1",
            "--seeds", "0", "--max-turns", "2", "--no-references"]
    failed = RUNNER.invoke(cli.app, [*args, "--run-id", "failed"])
    assert failed.exit_code == 2 and (runs / "failed").is_dir(), failed.output
    assert (runs / "latest").readlink() == Path("old")
    server.state.key = None
    played = RUNNER.invoke(cli.app, [*args, "--run-id", "played"])
    assert played.exit_code == 0, played.output
    assert (runs / "latest").readlink() == Path("played")


def test_a_run_summary_counts_no_scripted_call_as_a_model_call() -> None:
    report = {"accounting": {
        "subject:scripted:platitude": {"calls": 40, "cached_calls": 0, "prompt_tokens": 0, "completion_tokens": 0},
        "subject:fake-model": {"calls": 12, "cached_calls": 2, "prompt_tokens": 120, "completion_tokens": 30},
        "judge:fake-model": {"calls": 30, "cached_calls": 0, "prompt_tokens": 300, "completion_tokens": 90},
    }}
    line = summary_line(report)
    assert line.startswith("40 live model calls, 2 answered from the response cache, 40 scripted (no model)")


def test_the_endpoint_pool_counts_only_model_clients(tmp_path: Path) -> None:
    async def clients() -> list[str]:
        async with AsyncExitStack() as stack:
            pool = EndpointPool(stack, tmp_path, None)
            for binding in ("scripted:platitude", "openai:m@http://127.0.0.1:9/v1"):
                await pool.resolve(RoleConfig(binding=binding))
            return [c.model for c in pool.clients()]

    assert asyncio.run(clients()) == ["m"]  # the progress bar's "calls" are model calls


def test_every_command_keeps_litellm_from_fetching_its_price_map(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline, litellm's fetch at import printed 2-4 warning lines and slept seconds between tries."""
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    RUNNER.invoke(cli.app, ["show"])
    assert os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP") == "True"
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "False")  # a user's own choice stands
    RUNNER.invoke(cli.app, ["show"])
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "False"


def test_a_progress_bar_opens_with_its_first_label(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    out = io.StringIO()
    monkeypatch.setattr("rich.console.Console", lambda **kw: Console(file=out, force_terminal=True, width=100,
                                                                      **{k: v for k, v in kw.items() if k != "stderr"}))
    with progress_bar() as tick:
        tick("scoring", 0, 4)  # the bar is drawn once on opening, before this
        tick("scoring", 4, 4)
    assert "0/?" not in out.getvalue() and "scoring" in out.getvalue()
