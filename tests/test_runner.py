"""The batch layer and CLI against the fake server: run directory, resume, crashes, bad input."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
from typer.testing import CliRunner

from emobench.cli import app
from emobench.config import load_config_data, validate_config
from emobench.errors import EndpointError
from emobench.library_paths import checkout_sha
from emobench.run.runner import ROOT, run_benchmark
from emobench.rundir import LATEST, RunDir
from emobench.scoring.schema import SCORES_SCHEMA
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder

cli = CliRunner()


def _invoke(*args: str) -> Any:
    return cli.invoke(app, [*args, "--no-progress"], catch_exceptions=False, env={"COLUMNS": "200"})


def test_cli_run_writes_the_run_directory(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "run.yaml", fake.base_url, seeds=[0, 1])
    result = _invoke("run", "--config", str(cfg), "--out", str(tmp_path / "runs"), "--run-id", "r1")
    assert result.exit_code == 0, result.output
    rd = RunDir(tmp_path / "runs" / "r1")
    manifest = json.loads(rd.manifest.read_text())
    assert manifest["config_hash"] and manifest["registry_version"] and manifest["prompt_versions"]["judge"]
    assert manifest["roles"]["subjects"][0]["label"] == "subject-a"
    assert manifest["roles"]["judges"][0]["sampling"]["max_tokens"] > 0
    lines = rd.episodes.read_text().splitlines()
    assert len(lines) == 2 * 2  # 2 demo cases x 2 seeds
    scores = pd.read_parquet(rd.scores)
    assert len(scores) == 4 and set(scores["seed"]) == {0, 1}
    assert scores["epmq"].between(0, 100).all()
    # The same file through duckdb, with the declared schema.
    con = duckdb.connect()
    n, mean = con.execute(f"select count(*), avg(epmq) from read_parquet('{rd.scores}')").fetchone()
    assert n == 4 and mean == pytest.approx(scores["epmq"].mean())
    assert pd.read_parquet(rd.scores).columns.tolist() == SCORES_SCHEMA.names
    lb = pd.read_parquet(rd.leaderboard)
    assert "subject-a" in set(lb["subject"])
    assert "subject-a" in result.output  # the rich table is printed
    assert (tmp_path / "runs" / LATEST).readlink() == Path("r1")  # the docs' `runs/latest`
    assert manifest["git_sha"] == checkout_sha(ROOT)


def test_resume_skips_finished_keys_and_refuses_a_different_config(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "run.yaml", fake.base_url)
    assert _invoke("run", "--config", str(cfg), "--out", str(tmp_path), "--run-id", "r").exit_code == 0
    before = len(fake.state.requests)
    again = _invoke("run", "--resume", str(tmp_path / "r"))
    assert again.exit_code == 0, again.output
    assert len(fake.state.requests) == before  # nothing left to do: no model calls
    assert len((tmp_path / "r" / "episodes.jsonl").read_text().splitlines()) == 2
    other = write_config(tmp_path / "other.yaml", fake.base_url, max_turns=4)
    refused = cli.invoke(app, ["run", "--config", str(other), "--resume", str(tmp_path / "r"), "--no-progress"])
    assert refused.exit_code == 2 and "config_hash" in refused.output and "--force" in refused.output
    exists = cli.invoke(app, ["run", "--config", str(cfg), "--out", str(tmp_path), "--run-id", "r", "--no-progress"])
    assert exists.exit_code == 2 and "--resume" in exists.output


def test_a_server_that_dies_mid_run_keeps_every_finished_episode(tmp_path: Path) -> None:
    state = FakeState()
    count = {"n": 0}

    def responder(body: dict[str, Any]) -> str:
        count["n"] += 1
        if count["n"] >= 40:
            state.dead = True  # from now on the server drops every connection
        return default_responder(body)

    state.responder = responder
    with FakeOpenAIServer(state) as server:
        data = load_config_data(write_config(tmp_path / "run.yaml", server.base_url, seeds=list(range(6)), concurrency=1))
        for role in (*data["subjects"], data["user"], *data["judges"]):
            role.update(timeout_s=2, retries=1)
        config = validate_config(data, "run.yaml")
        with pytest.raises(EndpointError) as info:
            asyncio.run(run_benchmark(config, tmp_path / "run", show_progress=False))
    rd = RunDir(tmp_path / "run")
    episodes = rd.read_episodes()
    # An episode is 9 calls (3 subject, 3 judge, 2 simulator, the probe), then its holistic
    # judgement runs beside the next episode: episodes 1-3 and their judgements take 30 calls,
    # episode 4 ends on call 39 and its judgement meets the dead server.
    assert len(episodes) == 4
    assert len({e.key for e in episodes}) == 4
    assert "4 finished episodes are kept" in str(info.value) and "--resume" in str(info.value)
    assert len(rd.judged_keys()) == 3

    with FakeOpenAIServer(FakeState()) as server:  # back up: the resume judges episode 4 and runs the rest
        data = load_config_data(write_config(tmp_path / "run.yaml", server.base_url, seeds=list(range(6)), concurrency=1))
        # The endpoint URL is part of the config hash and the new server has a new port: --force.
        config = validate_config(data, "run.yaml")
        asyncio.run(run_benchmark(config, rd.path, resume=True, force=True, show_progress=False))
    assert len(rd.read_episodes()) == 12 and rd.judged_keys() == rd.done_keys()  # 2 demo cases x 6 seeds


def test_torn_tail_line_is_ignored_and_repaired(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "run.yaml", fake.base_url)
    assert _invoke("run", "--config", str(cfg), "--out", str(tmp_path), "--run-id", "r").exit_code == 0
    rd = RunDir(tmp_path / "r")
    whole = rd.episodes.read_bytes()
    first = whole.split(b"\n")[0] + b"\n"
    rd.episodes.write_bytes(first + whole[len(first) : len(first) + 100])  # a crash mid-write
    assert len(rd.read_episodes()) == 1
    assert rd.repair() == 100 and rd.episodes.read_bytes() == first
    assert _invoke("run", "--resume", str(rd.path)).exit_code == 0
    assert len(rd.read_episodes()) == 2


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda d: d.update(subjects=[{"binding": "gpt-4"}]), "subjects[0].binding: bad role binding"),
        (lambda d: d.update(judges=[{"binding": "openai:m@localhost/v1"}]), "judges[0].binding: bad base URL"),
        (lambda d: d.update(max_turns="many"), "max_turns"),
        (lambda d: d.update(colour="blue"), "colour"),
        (lambda d: d.update(split="nope"), "nope"),
    ],
)
def test_bad_config_is_one_line_and_exit_2(tmp_path: Path, mutate: Any, expected: str) -> None:
    data = load_config_data(write_config(tmp_path / "run.yaml", "http://127.0.0.1:9/v1"))
    mutate(data)
    import yaml

    (tmp_path / "run.yaml").write_text(yaml.safe_dump(data))
    result = cli.invoke(app, ["run", "--config", str(tmp_path / "run.yaml"), "--out", str(tmp_path), "--no-progress"])
    assert result.exit_code == 2
    lines = [line for line in result.output.strip().splitlines() if line.startswith("error")]
    assert len(lines) == 1 and expected in lines[0], result.output
    assert "Traceback" not in result.output


def test_missing_and_corrupt_config_files(tmp_path: Path) -> None:
    missing = cli.invoke(app, ["run", "--config", str(tmp_path / "nope.yaml"), "--no-progress"])
    assert missing.exit_code == 2 and "nope.yaml" in missing.output
    (tmp_path / "bad.yaml").write_text("subjects: [\n  - binding: x\n")
    corrupt = cli.invoke(app, ["run", "--config", str(tmp_path / "bad.yaml"), "--no-progress"])
    assert corrupt.exit_code == 2 and "bad.yaml: line" in corrupt.output and "YAML syntax error" in corrupt.output


def test_bad_role_on_the_command_line(tmp_path: Path) -> None:
    result = cli.invoke(app, ["run", "--subject", "notaprovider", "--out", str(tmp_path), "--no-progress"])
    assert result.exit_code == 2
    assert "subjects[0].binding: bad role binding 'notaprovider'" in result.output
