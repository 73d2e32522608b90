"""Developer sessions. All share one virtualenv (.venv), built by scripts/setup-env.sh,
because vLLM's CPU build is large and slow to install twice."""

from __future__ import annotations

import os
import platform
import shutil
import time
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
VENV = ".venv"
BIN = f"{VENV}/bin"


def _env(session: nox.Session) -> None:
    session.run("bash", "scripts/setup-env.sh", VENV, external=True)
    session.env.update(
        {"HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": f"{os.path.abspath(BIN)}:{os.environ['PATH']}"}
    )


def _cpu() -> str:
    """The processor's name and its SIMD level, as the README states the demo's time."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8", errors="replace"):
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    except OSError:
        pass
    simd = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    bf16 = "native bf16" if flags & {"avx512_bf16", "amx_bf16"} else "no native bf16"
    return f"{name}, {os.cpu_count()} cores, {simd}, {bf16}"


def _chromium(session: nox.Session) -> None:
    """The HTML page is checked in real headless Chromium (Debian's package)."""
    # fonts-noto-cjk: Chinese cases' pages are checked for real glyphs, not boxes.
    cjk = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
    if (shutil.which("chromium") and cjk.exists()) or not shutil.which("apt-get") or os.geteuid() != 0:
        return
    session.run(
        "bash",
        "-c",
        "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk >/dev/null",
        external=True,
    )


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    """The whole suite: hermetic tests, property tests and the real-vLLM integration tests."""
    _env(session)
    _chromium(session)
    session.run(f"{BIN}/pytest", "-q", *session.posargs, external=True)


@nox.session(venv_backend="none")
def verl(session: nox.Session) -> None:
    """The verl agent-loop tests, in verl's own environment (.venv-verl: verl's transformers pin
    conflicts with vLLM's CPU build). The tests session runs them too, through tests/test_verl.py."""
    session.run("bash", "scripts/setup-verl-env.sh", ".venv-verl", external=True)
    session.env.update({"HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": os.getcwd()})
    session.run(".venv-verl/bin/python", "-m", "pytest", "-q", "tests/verl_env", *session.posargs, external=True)


@nox.session(venv_backend="none")
def demo(session: nox.Session) -> None:
    """A small benchmark on the embedded model, served by a real vLLM server (offline, CPU)."""
    _env(session)
    start = time.monotonic()
    session.run(f"{BIN}/emobench", "run", *session.posargs, external=True)
    minutes, seconds = divmod(round(time.monotonic() - start), 60)
    session.log(f"demo wall time: {minutes} min {seconds:02d} s on {_cpu()}")


@nox.session(venv_backend="none")
def lint(session: nox.Session) -> None:
    _env(session)
    session.run(f"{BIN}/ruff", "check", "emobench", "tests", "bench", "noxfile.py", external=True)


@nox.session(venv_backend="none")
def typecheck(session: nox.Session) -> None:
    _env(session)
    session.run(f"{BIN}/mypy", "emobench", external=True)


@nox.session(venv_backend="none")
def bench(session: nox.Session) -> None:
    """Performance benchmarks; each prints its ratio against the target."""
    _env(session)
    for script in sorted(os.listdir("bench")):
        if script.startswith("bench_") and script.endswith(".py"):
            session.run(f"{BIN}/python", f"bench/{script}", external=True)
