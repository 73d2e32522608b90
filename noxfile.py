"""Developer sessions. All share one virtualenv (.venv), built by scripts/setup-env.sh,
because vLLM's CPU build is large and slow to install twice."""

from __future__ import annotations

import os
import shutil

import nox

nox.options.sessions = ["tests"]
VENV = ".venv"
BIN = f"{VENV}/bin"


def _env(session: nox.Session) -> None:
    session.run("bash", "scripts/setup-env.sh", VENV, external=True)
    session.env.update(
        {"HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": f"{os.path.abspath(BIN)}:{os.environ['PATH']}"}
    )


def _chromium(session: nox.Session) -> None:
    """The HTML page is checked in real headless Chromium (Debian's package)."""
    if shutil.which("chromium") or not shutil.which("apt-get") or os.geteuid() != 0:
        return
    session.run(
        "bash",
        "-c",
        "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null",
        external=True,
    )


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    """The whole suite: hermetic tests, property tests and the real-vLLM integration tests."""
    _env(session)
    _chromium(session)
    session.run(f"{BIN}/pytest", "-q", *session.posargs, external=True)


@nox.session(venv_backend="none")
def demo(session: nox.Session) -> None:
    """A small benchmark on the embedded model, served by a real vLLM server (offline, CPU)."""
    _env(session)
    session.run(f"{BIN}/emobench", "run", *session.posargs, external=True)


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
