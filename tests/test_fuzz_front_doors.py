"""Fuzzing the front doors (issue 13): generated bindings, config files, command lines and run
directories. The contract: exit 0, or exit 2/3 with one error line and no traceback; a refusal
(exit 2) prints nothing else and changes no file of an existing run.

No test here reaches a model: the endpoint pool refuses to bind (exit 3), so everything up to
the first call runs and nothing after it.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from emobench.cli import app
from emobench.endpoints.binding import Binding, parse_binding
from emobench.endpoints.pool import EndpointPool
from emobench.errors import EndpointError, InputError
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState

cli = CliRunner()
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
DEAD = "http://127.0.0.1:9/v1"

huge = st.integers(min_value=-(2**80), max_value=2**80)
scalar = st.one_of(
    st.none(), st.booleans(), huge, st.integers(-3, 40), st.floats(), st.text(max_size=12), st.sampled_from(["", "0", "-1"])
)
binding = st.one_of(
    st.sampled_from(
        [
            f"openai:fake-model@{DEAD}",
            f"openai:m@{DEAD},{DEAD}",
            "openai:m@http://127.0.0.1:99999/v1",
            "openai:m@http:///v1",
            "openai:m@http://[::1/v1",
            "openai:m@http://a b/v1",
            "openai:@http://h/v1",
            "litellm:nope",
            "x",
            "",
        ]
    ),
    st.text(max_size=30),
)


GOOD_ROLE = {"binding": f"openai:fake-model@{DEAD}", "retries": 0}
role_fields = {
    "binding": binding,
    "label": scalar,
    "sampling": st.fixed_dictionaries({}, optional={"temperature": scalar, "top_p": scalar, "max_tokens": scalar}) | scalar,
    "max_concurrency": scalar,
    "timeout_s": scalar,
    "retries": scalar,
    "api_key_env": st.sampled_from(["HOME", "EMOBENCH_FUZZ_UNSET", "bad name", ""]) | scalar,
}
# A working role with up to two fields changed, so that most examples get past the first check.
role = st.builds(
    lambda changes: {**GOOD_ROLE, **changes},
    st.dictionaries(st.sampled_from(sorted(role_fields)), st.none(), max_size=2).flatmap(
        lambda keys: st.fixed_dictionaries({k: role_fields[k] for k in keys})
    ),
)
config_fields: dict[str, st.SearchStrategy[Any]] = {
    "subjects": st.lists(role, max_size=2) | scalar,
    "user": role | scalar,
    "judges": st.lists(role, max_size=2) | scalar,
    "split": st.sampled_from(["demo", "dev", "test", "nope"]) | scalar,
    "seeds": st.lists(scalar, max_size=3) | scalar,
    "cases": st.lists(st.sampled_from(["demo4-01", "nope"]) | scalar, max_size=2) | scalar,
    "max_turns": scalar,
    "min_turns": scalar,
    "limit_cases": scalar,
    "concurrency": scalar,
    "probe": scalar,
    "reveal_every": scalar,
    "subject_system_prompt": st.sampled_from(["companion", "../etc", "a\x00b"]) | scalar,
    "panel": st.sampled_from(["judges/panels/nope.yaml", "judges", "a\x00b"]) | scalar,
    "director": role | scalar,
    "colour": scalar,
}
GOOD_CONFIG = {"subjects": [GOOD_ROLE], "user": GOOD_ROLE, "judges": [GOOD_ROLE], "split": "demo", "max_turns": 2, "min_turns": 2}
config = st.builds(
    lambda changes, dropped: {k: v for k, v in {**GOOD_CONFIG, **changes}.items() if k != dropped},
    st.dictionaries(st.sampled_from(sorted(config_fields)), st.none(), max_size=3).flatmap(
        lambda keys: st.fixed_dictionaries({k: config_fields[k] for k in keys})
    ),
    st.sampled_from([None, "subjects", "user", "judges"]),
)


@pytest.fixture
def no_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    async def refuse(self: EndpointPool, role: Any) -> Any:
        raise EndpointError("fuzz", "no endpoint is bound in fuzz tests")

    monkeypatch.setattr(EndpointPool, "resolve", refuse)


def contract(result: Any) -> int:
    """Exit 0, or 2/3 with exactly one error line (and, for 2, nothing else) and no traceback."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    code = int(result.exit_code)
    assert code in (0, 2, 3), (code, result.output)
    if code:
        lines = result.stderr.strip().splitlines()
        errors = [line for line in lines if line.startswith("error: ")]
        assert len(errors) == 1 and lines[-1] == errors[0], result.stderr
        if code == 2:  # the refusal alone, after at most the warning naming the roles a config kept (issue 40)
            assert len(lines) == 1 or (len(lines) == 2 and lines[0].startswith("warning: --")
                                       and " given, but " in lines[0]), result.stderr
    return code


def run(*args: str | Path) -> Any:
    return cli.invoke(app, ["run", *map(str, args), "--no-progress", "--no-cache"], env={"COLUMNS": "200"})



@contextmanager
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder)


def files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}


url = st.builds(
    "{}{}{}{}".format,
    st.sampled_from(["http://", "https://", "ftp://", ""]),
    st.sampled_from(["127.0.0.1", "[::1]", "[::1", "h", "", "a b", "xn--a"]) | st.text(max_size=8),
    st.sampled_from(["", ":0", ":80", ":99999", ":-1", ":x"]),
    st.sampled_from(["/v1", "/x/v1", "/v2", "", "/v1/", "/v1beta/openai/", "/v1?key=x", "/#v1"]),
)
bindings = binding | st.builds(
    "{}:{}@{}".format,
    st.sampled_from(["openai", "vllm", "litellm", "x", ""]),
    st.text(max_size=8),
    st.lists(url, min_size=1, max_size=3).map(",".join),
)


@settings(max_examples=300, deadline=None)
@given(bindings)
def test_fuzzed_bindings_parse_or_name_the_problem_on_one_line(spec: str) -> None:
    import yarl

    try:
        parsed = parse_binding(spec)
    except InputError as exc:
        assert "\n" not in str(exc) and "bad" in str(exc)
        return
    assert isinstance(parsed, Binding) and parse_binding(parsed.spec) == parsed
    for base in parsed.base_urls:  # what a client will open later must open, at <base>/chat/completions
        target = yarl.URL(base)
        assert target.host and 0 < (target.port or 80) < 65536 and " " not in base
        assert base.startswith(("http://", "https://")) and not base.endswith("/") and not {"?", "#"} & set(base)


def _dump(data: Any) -> bytes:
    return yaml.safe_dump(data, allow_unicode=True).encode()


def _damaged(doc: bytes, cut: int, junk: bytes) -> bytes:
    return doc[: cut % (len(doc) + 1)] + junk


config_files = st.one_of(
    config.map(_dump),
    st.binary(max_size=200),
    st.builds(_damaged, config.map(_dump), st.integers(0, 10**6), st.binary(max_size=8)),
    st.builds(lambda d: d.decode().encode("utf-16"), config.map(_dump)),
)


@FUZZ
@given(config_files)
def test_fuzzed_config_files_hold_the_contract(no_endpoints: None, doc: bytes) -> None:
    with scratch() as folder:
        (folder / "run.yaml").write_bytes(doc)
        result = run("--config", folder / "run.yaml", "--out", folder / "runs")
        if contract(result) == 2:
            assert not any(p.is_file() for p in (folder / "runs").rglob("*"))


flag_value = st.one_of(
    scalar.map(str), huge.map(str), st.text(max_size=10), st.sampled_from(["", ",", "0/0", "1/2", "-", "--x", "a,b"])
)
flag = st.one_of(
    st.tuples(st.sampled_from(["--subject", "--user", "--judge"]), binding),
    st.tuples(
        st.sampled_from(["--split", "--seeds", "--max-turns", "--min-turns", "--limit", "--shard", "--run-id"]), flag_value
    ),
    st.tuples(st.sampled_from(["--resume"]), st.sampled_from(["", "missing", "run.yaml"])),
)
flags = st.lists(flag, max_size=4) | st.lists(
    flag | st.tuples(st.sampled_from(["--bogus", "--force", "--no-force", "-x", "extra"]), st.just("")), max_size=3
)


@FUZZ
@given(flags)
def test_fuzzed_command_lines_hold_the_contract(no_endpoints: None, flags: list[tuple[str, str]]) -> None:
    with scratch() as folder:
        cfg = write_config(folder / "run.yaml", DEAD)
        args: list[str] = []
        for name, value in flags:
            args += [name, str(folder / value) if name == "--resume" else value] if value or name.startswith("--") else [name]
        runs = folder / "runs"
        result = run("--config", cfg, "--out", runs, *args)
        code = contract(result)
        assert all(folder in p.parents for p in folder.rglob("*"))  # --run-id cannot leave --out
        if code == 2:
            assert not any(p.is_file() for p in runs.rglob("*"))


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A finished run on a fake server that stays up, so that a resume can finish the work."""
    folder = tmp_path_factory.mktemp("fuzz-run")
    with FakeOpenAIServer(FakeState()) as server:
        cfg = write_config(folder / "run.yaml", server.base_url, max_turns=2, min_turns=2)
        assert run("--config", cfg, "--out", folder, "--run-id", "r").exit_code == 0
        yield folder / "r"


RUN_FILES = ["episodes.jsonl", "judgements.jsonl", "manifest.json", "report.json", "faults.jsonl"]


def _mutate(data: bytes, how: str, at: int, junk: bytes, number: int) -> bytes:
    lines = data.splitlines(keepends=True) or [b""]
    line = at % len(lines)
    if how == "truncate":
        return data[: at % (len(data) + 1)]
    if how == "append":
        return data + junk
    if how == "torn tail":
        return data + b'{"key": "x|demo4-01|0", "case' + junk.replace(b"\n", b"")
    if how == "duplicate line":
        return b"".join(lines[: line + 1] + lines[line:])
    if how == "garbage line":
        return b"".join([*lines[:line], junk + b"\n", *lines[line + 1 :]])
    if how == "wrong type":
        return b"".join([*lines[:line], json.dumps([number, {"key": number}]).encode() + b"\n", *lines[line + 1 :]])
    if how == "huge number":
        text = data.decode(errors="replace")
        digits = [i for i, c in enumerate(text) if c.isdigit()]
        i = digits[at % len(digits)] if digits else 0
        return (text[:i] + str(number) + text[i + 1 :]).encode()
    return data.decode(errors="replace").encode("utf-16")  # odd encoding


mutation = st.tuples(
    st.sampled_from(RUN_FILES),
    st.sampled_from(["truncate", "append", "torn tail", "duplicate line", "garbage line", "wrong type", "huge number", "utf-16"]),
    st.integers(0, 10**6),
    st.binary(max_size=12),
    st.sampled_from([2**64, -(2**70), 10**30, -1, 0]),
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(mutation, min_size=1, max_size=2))
def test_fuzzed_run_directories_resume_or_are_refused_untouched(finished_run: Path, mutations: list[Any]) -> None:
    import shutil

    with scratch() as folder:
        target = folder / "r"
        shutil.copytree(finished_run, target)
        for name, how, at, junk, number in mutations:
            path = target / name
            path.write_bytes(_mutate(path.read_bytes() if path.exists() else b"", how, at, junk, number))
        before = files(target)
        result = run("--resume", target)
        if contract(result) == 2:
            assert files(target) == before  # a refusal changes nothing
