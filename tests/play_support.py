"""Start `emobench play` as a real process (or in this process, in a thread) against the fake
OpenAI server, and talk to its API."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import random
import re
import resource
import secrets
import signal
import socket
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]


def cli_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


T = TypeVar("T")


class Api:
    """Requests to a play server at `url`; `source` picks the client's address (any of 127.0.0.0/8)."""

    url: str

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
             headers: dict[str, str] | None = None, source: str | None = None) -> tuple[int, Any]:
        status, _, data = self.exchange(method, path, body, raw, headers, source)
        return status, json.loads(data or b"{}")

    def exchange(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
                 headers: dict[str, str] | None = None, source: str | None = None) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body of one request (JSON unless raw is given), on a connection of its own."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        where = urllib.parse.urlsplit(self.url)
        connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=60,
                                                source_address=(source, 0) if source else None)
        try:
            connection.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
            response = connection.getresponse()
            return response.status, dict(response.headers), response.read()
        finally:
            connection.close()

    def text(self, path: str) -> str:
        status, _, data = self.exchange("GET", path)
        assert status == 200, (path, status)
        return data.decode()

    def join(self, handle: str, source: str | None = None) -> str:
        status, data = self.call("POST", "/api/join", {"handle": handle, "consent": True}, source=source)
        assert status == 200, data
        return str(data["token"])


class PlayServer(Api):
    """`emobench play` in a child process; `url` once it listens."""

    def __init__(self, config: Path, mode: str, out: Path, *extra: str, open_files: int | None = None) -> None:
        """open_files: the server's open-file limit (`ulimit -n`), as a small machine or container sets it."""

        def limit() -> None:
            if open_files is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

        self.process = subprocess.Popen(
            [sys.executable, "-m", "emobench", "play", "--config", str(config), "--mode", mode, "--port", "0",
             "-o", str(out), *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=cli_env(), cwd=REPO, preexec_fn=limit,
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

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs, as when the machine loses power."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self, sig: signal.Signals = signal.SIGINT) -> int | None:
        """Ctrl-C (or SIGTERM, as a container's stop); the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def emobench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emobench", *args], capture_output=True, text=True, env=cli_env(),
                          cwd=REPO, timeout=600)


class LocalPlay(Api):
    """The play server in this process, on a thread with its own event loop: quick to start, and its
    hub can be looked into. `play` sets the config's `play:` settings."""

    def __init__(self, config: Path, mode: str, out: Path, **play: Any) -> None:
        from emobench.config import load_config_data, validate_config

        data = load_config_data(config)
        data["play"] = {**data.get("play", {}), **play}
        self.config = validate_config(data, config)
        self.said: list[str] = []
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._main("user" if mode == "user" else "subject", out),),
                                        daemon=True)
        self._thread.start()
        self._ready.wait(120)
        if self.error is not None:
            raise self.error

    async def _main(self, seat: Any, out: Path) -> None:
        from emobench.play.cli import listening, open_hub

        self.loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        try:
            async with open_hub(self.config, seat, out, say=self.said.append) as (hub, app), \
                    listening(app, self.config.play, "127.0.0.1", 0) as url:
                self.hub, self.url = hub, url.rstrip("/")
                self._ready.set()
                await self._stop.wait()
                await hub.store.settle()
        except BaseException as exc:  # handed to the test's thread
            self.error = exc
            self._ready.set()

    def run(self, make: Callable[[], Awaitable[T]], timeout: float = 120) -> T:
        """A coroutine on the server's loop (the background catch-up, a look at the store)."""

        async def wrapped() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(120)


# --- hostile clients, for the tests of the guards (a generator of variants per guard) --------

def greedy(rng: random.Random, token: str, n: int) -> Iterator[tuple[str, str, str, Any]]:
    """Variants of one client's flood, n rounds: its own link, its own unknown episodes, unknown links
    (GET and POST), joins under fresh handles."""
    for _ in range(n):
        yield "own link", "GET", f"/api/p/{token}", None
        yield "own unknown episode", "GET", f"/api/p/{token}/episodes/{secrets.token_hex(8)}", None
        yield "unknown link", "GET", f"/api/p/{secrets.token_urlsafe(18)}", None
        yield ("unknown link turn", "POST", f"/api/p/{secrets.token_urlsafe(18)}/episodes/{secrets.token_hex(8)}/turn",
               {"message": "x", "meter": 50})
        yield "join", "POST", "/api/join", {"handle": f"g{rng.getrandbits(32):x}", "consent": True}


def hostile(kind: str, address: str, port: int) -> socket.socket:
    """One hostile connection of a kind: idle, half a request line, headers a byte at a time, a body
    a byte at a time; the flood opens idle ones past the address's cap."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(address, 0))
    start = {
        "idle": b"", "flood": b"",
        "request line": b"GET /api/p/abc HTT",
        "headers": b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: ",
        "body": b"POST /api/join HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000\r\n\r\n{",
    }[kind]
    sock.sendall(start)
    sock.setblocking(False)
    return sock


def closed(sock: socket.socket) -> bool:
    """Whether the server has closed its end (what it answered first is read and dropped)."""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True
