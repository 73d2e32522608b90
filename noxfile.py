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
    start = time.monotonic()
    session.run("bash", "scripts/setup-env.sh", VENV, external=True)
    session.log(f"setup-env: {time.monotonic() - start:.0f} s")
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
    start = time.monotonic()
    session.run(
        "bash",
        "-c",
        "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk >/dev/null",
        external=True,
    )
    session.log(f"chromium: {time.monotonic() - start:.0f} s")


# The slow tiers (tests/tiers.py): `quick` runs everything else.
SLOW_TIERS = ("vllm", "install", "verl", "train", "browser", "ray", "soak", "inspect")
# pytest-xdist: one worker per core, at most 4 (measured on 2 cores: docs/testing.md). A module's
# tests run on one worker: they share its fixtures, and the real-vLLM tests (one module) one server.
# --no-loadscope-reorder keeps tests/tiers.py's order (slow tiers first) instead of the most tests first.
WORKERS = ("-n", str(min(os.cpu_count() or 1, 4)), "--dist", "loadfile", "--no-loadscope-reorder")


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    """The whole suite: hermetic tests, property tests and every slow tier; what CI runs. The 40
    slowest tests and each tier's time are printed, and kept for bench/bench_suite_budget.py."""
    _env(session)
    _chromium(session)
    session.run(f"{BIN}/pytest", "-q", *WORKERS, "--durations=40", "--budget-label=tests", *session.posargs, external=True)


@nox.session(venv_backend="none")
def quick(session: nox.Session) -> None:
    """Every test outside the slow tiers, for the loop of a change (a few minutes)."""
    _env(session)
    markexpr = "not (" + " or ".join(SLOW_TIERS) + ")"
    session.run(f"{BIN}/pytest", "-q", *WORKERS, "-m", markexpr, "--durations=15", "--budget-label=quick",
                *session.posargs, external=True)


@nox.session(venv_backend="none")
def coverage(session: nox.Session) -> None:
    """The whole suite with line coverage of emobench (in the pytest processes, not their children)."""
    _env(session)
    _chromium(session)
    session.run(f"{BIN}/pytest", "-q", *WORKERS, "--cov=emobench", "--cov-report=term:skip-covered", *session.posargs,
                external=True)


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
