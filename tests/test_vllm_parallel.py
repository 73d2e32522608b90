"""A vllm: binding's parallel layout: validated, turned into vLLM's own flags, recorded.

No GPU here: the launch is a stand-in that records its command and yields a real loopback server;
the command line itself is parsed by the installed vLLM's own argument parser.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from emobench.cli import app
from emobench.config import RoleConfig, validate_config
from emobench.endpoints import pool, vllm_server
from emobench.errors import InputError
from emobench.records import ParallelLayout, RoleInfo
from tests.fake_openai import FakeOpenAIServer, FakeState

MODEL = "meta-llama/Llama-3.3-70B-Instruct"
LAYOUT = {"tensor": 4, "pipeline": 2, "data": 2, "executor": "ray"}


def _config(**subject: Any) -> dict[str, Any]:
    role = {"binding": "openai:m@http://127.0.0.1:9/v1"}
    return {"subjects": [{"binding": f"vllm:{MODEL}", **subject}], "user": role, "judges": [role], "split": "demo"}


def test_layout_becomes_vllms_flags_every_size_stated() -> None:
    args = vllm_server.parallel_args(ParallelLayout.model_validate(LAYOUT))
    assert args == ["--tensor-parallel-size", "4", "--pipeline-parallel-size", "2", "--data-parallel-size", "2",
                    "--distributed-executor-backend", "ray", "--data-parallel-backend", "ray"]
    one_node = vllm_server.parallel_args(ParallelLayout(tensor=8))
    assert one_node == ["--tensor-parallel-size", "8", "--pipeline-parallel-size", "1", "--data-parallel-size", "1"]
    assert vllm_server.parallel_args(None) == []


@pytest.mark.vllm  # imports vLLM itself (about 10 s)
def test_vllms_own_parser_reads_the_layout_from_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("vllm")
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    monkeypatch.setattr(vllm_server, "is_cpu_build", lambda: False)  # the command a GPU machine gets
    layout = ParallelLayout.model_validate(LAYOUT)
    cmd = vllm_server.server_command(MODEL, "big", 8000, vllm_server.parallel_args(layout))
    assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    parsed = make_arg_parser(FlexibleArgumentParser()).parse_args(cmd[3:])
    assert (parsed.tensor_parallel_size, parsed.pipeline_parallel_size, parsed.data_parallel_size) == (4, 2, 2)
    assert parsed.distributed_executor_backend == "ray" and parsed.data_parallel_backend == "ray"
    assert parsed.model == MODEL and parsed.served_model_name == ["big"]


class _Launches:
    """Stands in for the vLLM launch: records its arguments, serves a real loopback server."""

    def __init__(self) -> None:
        self.args: list[tuple[str, ...]] = []

    @contextlib.asynccontextmanager
    async def server(self, model: str, served: str, log: Path, *, extra_args: Sequence[str] = ()) -> AsyncIterator[str]:
        self.args.append(tuple(extra_args))
        with FakeOpenAIServer(FakeState(models=(served,))) as fake:
            yield fake.base_url


def _resolve(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, roles: list[RoleConfig]) -> tuple[_Launches, list[RoleInfo]]:
    launches = _Launches()
    monkeypatch.setattr(pool, "vllm_server", launches.server)

    async def go() -> list[RoleInfo]:
        async with contextlib.AsyncExitStack() as stack:
            endpoints = pool.EndpointPool(stack, tmp_path)
            return [(await endpoints.resolve(role))[1] for role in roles]

    return launches, asyncio.run(go())


def test_launcher_passes_the_layout_and_the_role_records_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("ray")  # the ray executor is refused where Ray is not installed
    config = validate_config(_config(parallel=LAYOUT, server_args=["--max-model-len", "8192"]), "run.yaml")
    plain = RoleConfig(binding=f"vllm:{MODEL}", label="one-gpu")
    launches, infos = _resolve(monkeypatch, tmp_path, [config.subjects[0], plain])
    layout_args, plain_args = launches.args  # two layouts, two servers
    i = layout_args.index("--tensor-parallel-size")
    assert layout_args[i:i + 6] == ("--tensor-parallel-size", "4", "--pipeline-parallel-size", "2", "--data-parallel-size", "2")
    assert layout_args[-2:] == ("--max-model-len", "8192")  # the user's own server_args come last
    assert "--tensor-parallel-size" not in plain_args
    assert infos[0].parallel == ParallelLayout.model_validate(LAYOUT) and infos[1].parallel is None
    # The record carries the layout, and reads back.
    assert RoleInfo.model_validate_json(infos[0].model_dump_json()).parallel == infos[0].parallel


def test_layout_is_provenance_not_identity_of_the_config() -> None:
    with_layout = validate_config(_config(parallel=LAYOUT), "run.yaml")
    without = validate_config(_config(), "run.yaml")
    # Resuming a run on a bigger cluster is the same run: the layout is kept out of the hash, like
    # max_concurrency, and recorded in the manifest's config and every record's role info.
    assert with_layout.config_hash() == without.config_hash()
    assert with_layout.model_dump(mode="json")["subjects"][0]["parallel"]["tensor"] == 4


@pytest.mark.parametrize(
    ("subject", "field", "says"),
    [
        ({"binding": "openai:m@http://127.0.0.1:9/v1", "parallel": {"tensor": 2}}, "subjects[0].parallel", "vllm: bindings"),
        ({"parallel": {"tensor": 2}, "server_args": ["--tensor-parallel-size=2"]}, "subjects[0].server_args",
         "--tensor-parallel-size=2 is set by parallel"),
        ({"parallel": {"data": 2}, "server_args": ["-dp", "2"]}, "subjects[0].server_args", "-dp is set by parallel"),
        ({"parallel": {"tensor": 0}}, "subjects.0.parallel.tensor", "greater than or equal to 1"),
        ({"parallel": {"executor": "slurm"}}, "subjects.0.parallel.executor", "'mp' or 'ray'"),
        ({"parallel": {"tensors": 2}}, "subjects.0.parallel.tensors", "unknown key"),
    ],
)
def test_a_bad_layout_is_refused_in_one_line_naming_file_and_field(
    subject: dict[str, Any], field: str, says: str, tmp_path: Path
) -> None:
    data = _config()
    data["subjects"] = [{"binding": f"vllm:{MODEL}", **subject}]
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError) as err:
        validate_config(data, path)
    assert err.value.field == field and says in err.value.problem
    result = CliRunner().invoke(app, ["run", "--config", str(path), "--dry-run"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and field in lines[0], result.output
