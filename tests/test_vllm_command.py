"""The vLLM server command line emobench launches (no server is started here)."""

from __future__ import annotations

import pytest

from emobench.endpoints import vllm_server


def _flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def test_cpu_build_never_splits_a_prefill(monkeypatch: pytest.MonkeyPatch) -> None:
    # Seeded requests with a split prefill kill the CPU engine (generator rewind); see server_command.
    monkeypatch.setattr(vllm_server, "is_cpu_build", lambda: True)
    cmd = vllm_server.server_command("/models/m", "m", 8000)
    assert "--no-enable-chunked-prefill" in cmd
    assert int(_flag(cmd, "--max-num-batched-tokens")) >= int(_flag(cmd, "--max-model-len"))
    assert "--enable-prefix-caching" in cmd and _flag(cmd, "--port") == "8000"


def test_gpu_build_keeps_vllm_defaults_and_takes_extra_args(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_server, "is_cpu_build", lambda: False)
    cmd = vllm_server.server_command("/models/m", "m", 8000, ["--tensor-parallel-size", "2"])
    assert "--no-enable-chunked-prefill" not in cmd and "--enforce-eager" not in cmd
    assert cmd[-2:] == ["--tensor-parallel-size", "2"]


def test_small_cpu_gives_every_core_to_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_server, "is_cpu_build", lambda: True)
    env = vllm_server.server_env({"PATH": "/bin"}, cores=2)
    assert env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0" and env["HF_HUB_OFFLINE"] == "1" and env["PATH"] == "/bin"
    assert "VLLM_CPU_NUM_OF_RESERVED_CPU" not in vllm_server.server_env({}, cores=16)  # vLLM's own layout
    # A value the user set is kept, on any machine.
    assert vllm_server.server_env({"VLLM_CPU_NUM_OF_RESERVED_CPU": "1"}, cores=2)["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "1"
    monkeypatch.setattr(vllm_server, "is_cpu_build", lambda: False)
    assert "VLLM_CPU_NUM_OF_RESERVED_CPU" not in vllm_server.server_env({}, cores=2)
