"""Start `emobench play` as a real process against the fake OpenAI server, and talk to its API."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def cli_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


class PlayServer:
    """`emobench play` in a child process; `url` once it listens."""

    def __init__(self, config: Path, mode: str, out: Path, *extra: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "emobench", "play", "--config", str(config), "--mode", mode, "--port", "0",
             "-o", str(out), *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=cli_env(), cwd=REPO,
        )
        assert self.process.stderr is not None
        self.later: list[str] = []
        lines = []
        for line in self.process.stderr:
            lines.append(line)
            found = re.search(r"(http://\S+/)", line)
            if found:
                self.url = found.group(1).rstrip("/")
                self.startup = lines  # what it said before it listened (repairs)
                threading.Thread(target=self._drain, daemon=True).start()
                return
        raise RuntimeError("emobench play did not start: " + "".join(lines)[-3000:])

    def _drain(self) -> None:
        """Read what it says while it serves, so a full pipe never stalls it."""
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.later.append(line)

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any]:
        status, _, data = self.exchange(method, path, body, raw, headers)
        return status, json.loads(data or b"{}")

    def exchange(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
                 headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body of one request (JSON unless raw is given)."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(self.url + path, method=method, data=data,
                                         headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    def text(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=60) as response:
            return str(response.read().decode())

    def join(self, handle: str) -> str:
        status, data = self.call("POST", "/api/join", {"handle": handle, "consent": True})
        assert status == 200, data
        return str(data["token"])

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs, as when the machine loses power."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def emobench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emobench", *args], capture_output=True, text=True, env=cli_env(),
                          cwd=REPO, timeout=600)
