"""The embedded model's dtype follows the CPU, reaches the server, the manifest and the cache key."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from emobench.config import RoleConfig
from emobench.endpoints import embedded, pool
from emobench.endpoints.cache import CachedEndpoint, ResponseCache
from emobench.errors import EndpointError, InputError
from tests.fake_openai import FakeOpenAIServer, FakeState

AVX2_ONLY = frozenset({"fpu", "sse4_2", "avx", "avx2", "fma"})
AVX512_NO_BF16 = AVX2_ONLY | {"avx512f", "avx512bw", "avx512vl"}


def test_cpu_flags_read_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\nflags\t: fpu\n")
    assert embedded.cpu_flags(info) == {"fpu", "avx2", "avx512_bf16"}
    assert embedded.cpu_flags(tmp_path / "missing") == frozenset()


@pytest.mark.parametrize(
    ("flags", "cpu_build", "want"),
    [
        (AVX2_ONLY, True, "float32"),  # emulated bf16: prefill 5x slower than float32
        (AVX512_NO_BF16, True, "float32"),
        (AVX2_ONLY | {"avx512_bf16"}, True, "bfloat16"),
        (AVX2_ONLY | {"amx_bf16"}, True, "bfloat16"),
        (AVX2_ONLY, False, "bfloat16"),  # the GPU build
    ],
)
def test_served_dtype_follows_the_cpu(flags: frozenset[str], cpu_build: bool, want: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(embedded.DTYPE_ENV, raising=False)
    assert embedded.served_dtype(flags, cpu_build) == want


def test_served_dtype_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(embedded.DTYPE_ENV, "bfloat16")
    assert embedded.served_dtype(AVX2_ONLY, True) == "bfloat16"
    monkeypatch.setenv(embedded.DTYPE_ENV, "fp8")
    with pytest.raises(InputError, match=r"EMOBENCH_EMBEDDED_DTYPE.*'fp8' is not one of float32, bfloat16"):
        embedded.served_dtype(AVX2_ONLY, True)


def test_embedded_model_refuses_a_dtype_it_is_not_converted_to() -> None:
    with pytest.raises(InputError, match=r"server_args.*--dtype 'float16'"):
        embedded.prepare_embedded_model("float16")


class _Launches:
    """Stands in for the vLLM server and the GGUF conversion; records what they were asked."""

    def __init__(self) -> None:
        self.servers: list[tuple[str, tuple[str, ...]]] = []
        self.converted: list[str] = []

    def prepare(self, dtype: str) -> Path:
        self.converted.append(dtype)
        return Path(f"/cache/smollm2-{dtype}")

    @contextlib.asynccontextmanager
    async def server(self, model: str, served: str, log: Path, *, extra_args: Sequence[str] = ()) -> AsyncIterator[str]:
        self.servers.append((model, tuple(extra_args)))
        # A real loopback server listing the served name: the pool reaches every server it starts.
        with FakeOpenAIServer(FakeState(models=(served,))) as fake:
            yield fake.base_url


def _resolve(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, roles: list[RoleConfig], dtype: str) -> tuple[_Launches, list]:
    launches = _Launches()
    monkeypatch.setattr(pool, "vllm_server", launches.server)
    monkeypatch.setattr(pool, "prepare_embedded_model", launches.prepare)
    monkeypatch.setattr(pool, "served_dtype", lambda: dtype)

    async def go() -> list:
        async with contextlib.AsyncExitStack() as stack:
            endpoints = pool.EndpointPool(stack, tmp_path, cache=ResponseCache(tmp_path / "r.sqlite"))
            return [await endpoints.resolve(role) for role in roles]

    return launches, asyncio.run(go())


def _identity(client: object) -> str:
    while not isinstance(client, CachedEndpoint):
        client = client._inner  # type: ignore[attr-defined]  # the BoundedEndpoint wraps the cache
    return client.identity


def test_embedded_role_served_in_the_cpus_dtype(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    roles = [RoleConfig(binding="vllm:embedded"), RoleConfig(binding="vllm:embedded", label="judge")]
    launches, resolved = _resolve(monkeypatch, tmp_path, roles, "float32")
    assert launches.converted == ["float32"]
    [(model, args)] = launches.servers  # both roles share one server
    assert model == "/cache/smollm2-float32" and args[args.index("--dtype") + 1] == "float32"
    assert [info.served_dtype for _, info in resolved] == ["float32", "float32"]
    _, other = _resolve(monkeypatch, tmp_path, roles[:1], "bfloat16")
    # Answers of the two dtypes never share response-cache entries.
    assert _identity(resolved[0][0]) != _identity(other[0][0])
    assert "float32" in _identity(resolved[0][0]) and "bfloat16" in _identity(other[0][0])


def test_server_args_reach_the_server_and_name_the_dtype(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    roles = [
        RoleConfig(binding="vllm:embedded", server_args=["--dtype=bfloat16"]),
        RoleConfig(binding="vllm:Qwen/Qwen2.5-7B-Instruct", server_args=["--tensor-parallel-size", "2"]),
    ]
    launches, resolved = _resolve(monkeypatch, tmp_path, roles, "float32")
    assert launches.converted == ["bfloat16"]
    (emb_model, emb_args), (qwen_model, qwen_args) = launches.servers
    assert emb_model == "/cache/smollm2-bfloat16"
    assert emb_args.count("--dtype") == 0 and emb_args[-1] == "--dtype=bfloat16"
    assert qwen_model == "Qwen/Qwen2.5-7B-Instruct" and qwen_args[-2:] == ("--tensor-parallel-size", "2")
    assert "--dtype" not in qwen_args  # vLLM chooses; the manifest says so with None
    assert [info.served_dtype for _, info in resolved] == ["bfloat16", None]


def test_a_running_embedded_server_is_used_only_when_it_serves_the_embedded_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    launches = _Launches()
    monkeypatch.setattr(pool, "vllm_server", launches.server)
    monkeypatch.setattr(embedded, "prepare_embedded_model", lambda dtype: Path(f"/cache/smollm2-{dtype}"))
    monkeypatch.setattr(embedded, "served_dtype", lambda: "float32")
    monkeypatch.setattr(pool, "prepare_embedded_model", launches.prepare)

    async def resolve(*roles: RoleConfig) -> list:
        async with contextlib.AsyncExitStack() as stack:
            endpoints = pool.EndpointPool(stack, tmp_path)
            return [info for _, info in [await endpoints.resolve(role) for role in roles]]

    name = embedded.SERVED_NAME
    with FakeOpenAIServer(FakeState(models=(name,), roots={name: "/cache/smollm2-float32"})) as running:
        monkeypatch.setenv(embedded.URL_ENV, running.base_url)
        infos = asyncio.run(resolve(RoleConfig(binding="vllm:embedded"), RoleConfig(binding="vllm:embedded", label="judge")))
        assert launches.servers == [] and running.state.gets  # no server started; the running one was asked
        assert {(i.endpoint, i.served_dtype, i.structured_output) for i in infos} == {
            (f"vllm:embedded ({running.base_url})", "float32", "bounded")}
        # A role with server options of its own gets a server of its own.
        asyncio.run(resolve(RoleConfig(binding="vllm:embedded", server_args=["--max-num-seqs", "4"])))
        assert len(launches.servers) == 1
        running.state.roots[name] = "/cache/smollm2-bfloat16"  # the other dtype's folder: not what this machine serves
        with pytest.raises(EndpointError, match=r"EMOBENCH_EMBEDDED_URL: serves /cache/smollm2-bfloat16, not the embedded "
                                                r"model in float32 \(/cache/smollm2-float32\)") as refused:
            asyncio.run(resolve(RoleConfig(binding="vllm:embedded")))
        assert running.base_url in str(refused.value) and "\n" not in str(refused.value)
    monkeypatch.setenv(embedded.URL_ENV, "http://127.0.0.1:9/v1")
    with pytest.raises(EndpointError, match=r"EMOBENCH_EMBEDDED_URL: GET http://127.0.0.1:9/v1/models failed"):
        asyncio.run(resolve(RoleConfig(binding="vllm:embedded")))
