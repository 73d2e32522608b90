"""Shared by the inspect task's tests: inspect eval as a subprocess against the fake server.

Every role is the fake server's model through inspect's openai-api provider (service "fake":
FAKE_BASE_URL, FAKE_API_KEY). A fault plan decides per request, from its body, whether it is
answered or refused, so one sample can fail while another finishes.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fake_openai import FakeState

if os.environ.get("EMOBENCH_REQUIRE_INSPECT") == "1":  # CI (.ci/run): the tests must run, never skip
    import inspect_ai  # noqa: F401
else:
    pytest.importorskip("inspect_ai", reason="inspect-ai is not installed: pip install -e '.[inspect]' (setup-env.sh does)")

MODEL = "openai-api/fake/fake-model"
KEY = "sk-emobench-test-key-never-written"  # inspect's provider sends it; no file may hold it
# The keys of a chat-completions body that say what was asked (endpoints/client.py chat_params).
ASKED = ("messages", "temperature", "top_p", "max_tokens", "seed", "frequency_penalty", "presence_penalty")

FaultPlan = Callable[[dict[str, Any]], str | None]


class _Noted(list[dict[str, Any]]):
    """The server's request list; each handler thread also keeps the body it appended, for the plan."""

    def __init__(self, local: threading.local) -> None:
        super().__init__()
        self.local = local

    def append(self, item: dict[str, Any]) -> None:
        self.local.body = item["body"]
        super().append(item)


@dataclass
class PlannedState(FakeState):
    """FakeState whose faults follow a plan over the request body instead of a random share."""

    plan: FaultPlan | None = None
    local: threading.local = field(default_factory=threading.local)

    def __post_init__(self) -> None:
        self.requests = _Noted(self.local)

    def pick_fault(self) -> str | None:
        if self.plan is None:
            return None
        with self.lock:
            fault = self.plan(self.local.body)
            if fault:
                self.injected[fault] += 1
            return fault


def asked(body: dict[str, Any]) -> dict[str, Any]:
    """What a request asked for; the schema as name, schema and strictness."""
    out = {k: body[k] for k in ASKED if body.get(k) is not None}
    spec = (body.get("response_format") or {}).get("json_schema")
    if spec:
        out["schema"] = (spec["name"], spec["schema"], spec.get("strict"))
    return out


def inspect_eval(
    base_url: str, log_dir: Path, cwd: Path, *args: str, judges: int = 1, subject_model: str = MODEL
) -> tuple[subprocess.CompletedProcess[str], float]:
    """`inspect eval emobench/emobench` with every role on the fake server (the subject on
    subject_model: "none" where -T subject=… plays it); returns it and its seconds."""
    roles = ["--model-role", f"user={MODEL}", "--model-role", f"judge={MODEL}"]
    roles += [a for i in range(2, judges + 1) for a in ("--model-role", f"judge_{i}={MODEL}")]
    return _inspect(base_url, cwd, "eval", "emobench/emobench", "--model", subject_model, *roles, "--log-dir", str(log_dir),
                    *args)


def inspect_retry(base_url: str, log: Path, cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    return _inspect(base_url, cwd, "eval-retry", str(log), "--log-dir", str(log.parent), *args)


def _inspect(base_url: str, cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    return inspect_cli(base_url, cwd, *args, "--display", "plain")


def inspect_cli(base_url: str, cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """The inspect command line (python -m inspect_ai), run in cwd with the fake server as service "fake"."""
    env = {**os.environ, "FAKE_BASE_URL": base_url, "FAKE_API_KEY": KEY, "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "inspect_ai", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=300)
    return done, time.perf_counter() - started


@contextlib.contextmanager
def static_server(root: Path) -> Iterator[str]:
    """A folder served on 127.0.0.1 (inspect's view bundle fetches its logs, which file:// forbids)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args: Any) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def only_log(log_dir: Path) -> Path:
    logs = sorted(log_dir.glob("*.eval"))
    assert len(logs) == 1, logs
    return logs[0]
