"""Issue 13: every bad input is one line, each role keeps its own key and limits, faults survive
an interrupted run, and a resume never mixes or invents."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from emobench.cli import app
from emobench.cli_support import Terminated
from emobench.config import RoleConfig, load_config_data, validate_config
from emobench.endpoints.binding import parse_binding
from emobench.endpoints.cache import ResponseCache
from emobench.endpoints.pool import EndpointPool
from emobench.errors import EndpointError, InputError
from emobench.records import Sampling
from emobench.registry import load_registry
from emobench.run.finalize import finalize_run
from emobench.run.runner import run_benchmark
from emobench.rundir import RunDir
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder

cli = CliRunner()
MSG = [{"role": "user", "content": "hi"}]


def invoke(*args: str | Path) -> Any:
    return cli.invoke(app, [*map(str, args), "--no-progress"], env={"COLUMNS": "200"})


def refused(result: Any, code: int = 2) -> str:
    """The contract for a refusal: the exit code, one line on stderr, no traceback."""
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == code and len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return str(lines[0])


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}


# 1 and 7: bad URLs, huge seeds, a non-UTF-8 config, sampling bounds, flag errors.


@pytest.mark.parametrize(
    "url, problem",
    [
        ("http://127.0.0.1:99999/v1", "out of range"),
        ("http:///v1", "no host"),
        ("http://[::1/v1", "IPv6"),
        ("http://my host:8000/v1", "space"),
        ("http://127.0.0.1:0/v1", "out of range"),
    ],
)
def test_a_bad_base_url_is_one_line_on_every_command(url: str, problem: str, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=problem):
        parse_binding(f"openai:m@{url}")
    line = refused(invoke("run", "--subject", f"openai:m@{url}", "--out", tmp_path))
    assert line.startswith("error: --subject: subjects[0].binding: bad base URL") and problem in line
    assert problem in refused(cli.invoke(app, ["calibrate", "--judge", f"openai:m@{url}"]))


@pytest.mark.parametrize(
    "flag, value, problem",
    [
        ("--seeds", "99999999999999999999999", "less than 9223372036854775808"),
        ("--seeds", "-1", "greater than or equal to 0"),
        ("--seeds", ",", "holds no seed"),
        ("--seeds", "", "holds no seed"),
        ("--seeds", "1,x", "not a comma-separated list"),
        ("--max-turns", "0", "greater than or equal to 1"),
        ("--limit", "0", "greater than or equal to 1"),
        ("--split", "nope", "'nope' is not one of 'demo', 'dev', 'test'"),
    ],
)
def test_a_bad_flag_is_reported_against_the_flag(flag: str, value: str, problem: str, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "run.yaml", "http://127.0.0.1:9/v1")
    line = refused(invoke("run", "--config", cfg, "--out", tmp_path / "runs", flag, value))
    assert line.startswith(f"error: {flag}: ") and problem in line and "run.yaml" not in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "sampling, field",
    [
        ({"temperature": -1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
    ],
)
def test_sampling_out_of_bounds_is_refused(sampling: dict[str, float], field: str, tmp_path: Path) -> None:
    data = load_config_data(write_config(tmp_path / "run.yaml", "http://127.0.0.1:9/v1"))
    data["user"]["sampling"] = sampling
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(data))
    line = refused(invoke("run", "--config", tmp_path / "run.yaml", "--out", tmp_path))
    assert f"run.yaml: user.sampling.{field}: " in line


def test_seeds_in_a_config_are_bounded(tmp_path: Path) -> None:
    for seeds, problem in (([-1], "greater than or equal to 0"), ([2**70], "less than")):
        with pytest.raises(InputError, match=problem):
            validate_config(load_config_data(write_config(tmp_path / "run.yaml", "http://127.0.0.1:9/v1", seeds=seeds)), "c")


def test_a_config_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_bytes(b"split: d\xe9mo\n")
    assert "not UTF-8" in refused(invoke("run", "--config", tmp_path / "run.yaml"))


# 3 and 4: each role's own key and limits; a missing key variable.


def test_each_role_sends_its_own_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    keys = {"user": "USER_KEY_13", "subjects": "SUBJECT_KEY_13", "judges": "JUDGE_KEY_13"}
    for name in keys.values():
        monkeypatch.setenv(name, f"secret-{name}")
    with FakeOpenAIServer(FakeState()) as server:
        data = load_config_data(write_config(tmp_path / "run.yaml", server.base_url))
        data["user"]["api_key_env"] = keys["user"]
        data["subjects"][0]["api_key_env"] = keys["subjects"]
        data["judges"][0]["api_key_env"] = keys["judges"]
        (tmp_path / "run.yaml").write_text(yaml.safe_dump(data))
        result = invoke("run", "--config", tmp_path / "run.yaml", "--out", tmp_path, "--run-id", "r", "--no-cache")
        assert result.exit_code == 0, result.output
        sent = {(_kind(r["body"]), r["headers"].get("Authorization")) for r in server.state.requests}
    assert ("user_move", f"Bearer secret-{keys['user']}") in sent
    assert ("mdep_verdict", f"Bearer secret-{keys['judges']}") in sent
    assert ("subject", f"Bearer secret-{keys['subjects']}") in sent
    for kind, header in sent:  # never another role's key
        role = {"user_move": "user", "subject": "subjects", "persona_probe": "subjects"}.get(kind, "judges")
        assert header == f"Bearer secret-{keys[role]}", (kind, header)


def _kind(body: dict[str, Any]) -> str:
    return str((body.get("response_format") or {}).get("json_schema", {}).get("name", "subject"))


def test_roles_on_one_endpoint_keep_their_own_timeout_retries_and_concurrency(tmp_path: Path) -> None:
    flight = {"now": 0, "max": 0}
    lock = threading.Lock()

    def responder(body: dict[str, Any]) -> str:
        with lock:
            flight["now"] += 1
            flight["max"] = max(flight["max"], flight["now"])
        threading.Event().wait(0.3)
        with lock:
            flight["now"] -= 1
        return default_responder(body)

    with FakeOpenAIServer(FakeState(responder=responder)) as server:
        binding = f"openai:m@{server.base_url}"
        patient = RoleConfig(binding=binding, label="patient", timeout_s=5, max_concurrency=1, retries=0)
        hasty = RoleConfig(binding=binding, label="hasty", timeout_s=0.1, retries=2)

        async def go() -> tuple[list[Any], int, BaseException | None]:
            from contextlib import AsyncExitStack

            async with AsyncExitStack() as stack:
                pool = EndpointPool(stack, tmp_path)
                slow, _ = await pool.resolve(patient)
                fast, _ = await pool.resolve(hasty)
                done = await asyncio.gather(*(slow.complete(MSG, Sampling(), seed=i) for i in range(3)))
                most = flight["max"]  # before the hasty role's abandoned requests pile up on the server
                try:
                    await fast.complete(MSG, Sampling(), seed=9)
                except EndpointError as exc:
                    return done, most, exc
                return done, most, None

        done, most, error = asyncio.run(go())
    assert len(done) == 3 and most == 1  # the patient role's cap of 1, its 5 s timeout
    assert error is not None and "gave up after 3 attempts: timeout" in str(error)  # the hasty role's 0.1 s, 2 retries


def test_a_missing_key_variable_is_refused_before_the_first_call(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    data = load_config_data(write_config(tmp_path / "run.yaml", fake.base_url))
    data["judges"][0]["api_key_env"] = "EMOBENCH_TEST_UNSET_KEY"
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(data))
    line = refused(invoke("run", "--config", tmp_path / "run.yaml", "--out", tmp_path / "runs"))
    assert "panel.judges[0].api_key_env" in line and "judge-0" in line and "EMOBENCH_TEST_UNSET_KEY" in line
    assert fake.state.requests == [] and not (tmp_path / "runs").exists()


# 5: faults survive an interrupted run.


def test_faults_of_an_interrupted_invocation_count_after_the_resume(tmp_path: Path) -> None:
    state = FakeState(fault_rate=0.15, fault_kinds=("500",), fault_seed=5)
    count = {"n": 0}

    def responder(body: dict[str, Any]) -> str:
        count["n"] += 1
        if count["n"] >= 30:
            state.dead = True  # the process that met this never reaches finalize_run
        return default_responder(body)

    state.responder = responder
    with FakeOpenAIServer(state) as server:
        data = load_config_data(write_config(tmp_path / "run.yaml", server.base_url, seeds=[0, 1, 2], concurrency=1))
        for role in (*data["subjects"], data["user"], *data["judges"]):
            role.update(timeout_s=2, retries=3)
        with pytest.raises(EndpointError):
            asyncio.run(run_benchmark(validate_config(data, "run.yaml"), tmp_path / "r", show_progress=False))
    first = dict(state.injected)
    assert first.get("500", 0) > 0
    clean = FakeState(fault_rate=0.15, fault_kinds=("500",), fault_seed=6)
    with FakeOpenAIServer(clean) as server:
        data = load_config_data(write_config(tmp_path / "run.yaml", server.base_url, seeds=[0, 1, 2], concurrency=1))
        config = validate_config(data, "run.yaml")
        asyncio.run(run_benchmark(config, tmp_path / "r", resume=True, force=True, show_progress=False))
    rd = RunDir(tmp_path / "r")
    finalize_run(rd, load_registry(Path(__file__).resolve().parents[1]))
    faults = rd.read_report()["faults"]
    assert faults["http_500"] == first["500"] + clean.injected["500"]
    assert faults["connection"] >= 1  # the dead server's dropped connections


# 6: a resume never mixes or invents.


def test_resume_of_a_missing_directory_is_refused(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "run.yaml", fake.base_url)
    line = refused(invoke("run", "--resume", tmp_path / "nope", "--config", cfg))
    assert "nope" in line and "not a run directory" in line
    assert not (tmp_path / "nope").exists() and fake.state.requests == []


def test_resume_with_force_and_another_split_writes_nothing(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "run.yaml", fake.base_url)
    assert invoke("run", "--config", cfg, "--out", tmp_path, "--run-id", "r", "--no-cache").exit_code == 0
    before, calls = snapshot(tmp_path / "r"), len(fake.state.requests)
    line = refused(invoke("run", "--resume", tmp_path / "r", "--config", cfg, "--split", "dev", "--force"))
    assert "split" in line and "'demo'" in line
    assert snapshot(tmp_path / "r") == before and len(fake.state.requests) == calls


# 8: messages that say the right thing.


def test_a_run_that_finishes_nothing_says_so(tmp_path: Path) -> None:
    with FakeOpenAIServer(FakeState(dead=True)) as server:  # reached at preflight, then drops every call
        data = load_config_data(write_config(tmp_path / "run.yaml", server.base_url))
        for role in (*data["subjects"], data["user"], *data["judges"]):
            role.update(retries=0)
        with pytest.raises(EndpointError) as info:
            asyncio.run(run_benchmark(validate_config(data, "run.yaml"), tmp_path / "r", show_progress=False))
    assert "no episode finished" in str(info.value) and "0 finished" not in str(info.value)


def test_sigterm_names_the_run_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    async def terminated(*args: object, **kwargs: object) -> None:
        raise Terminated

    monkeypatch.setattr("emobench.run.runner.run_benchmark", terminated)
    cfg = write_config(tmp_path / "run.yaml", "http://127.0.0.1:9/v1")
    result = invoke("run", "--config", cfg, "--out", tmp_path, "--run-id", "r")
    assert result.exit_code == 143
    assert result.stderr.strip() == f"terminated: finished work is kept; rerun with --resume {tmp_path / 'r'} to continue"


def test_a_cached_rerun_shows_cached_and_live_calls_apart(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "run.yaml", fake.base_url)
    cache = ("--cache-dir", tmp_path / "cache")
    first = invoke("run", "--config", cfg, "--out", tmp_path, "--run-id", "a", *cache)
    live = len(fake.state.requests)
    assert f"{live} live model calls, 0 answered from the response cache" in first.stderr
    second = invoke("run", "--config", cfg, "--out", tmp_path, "--run-id", "b", *cache)
    assert len(fake.state.requests) == live
    assert f"0 live model calls, {live} answered from the response cache" in second.stderr
    assert len(ResponseCache(tmp_path / "cache" / "responses.sqlite")) == live
