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
