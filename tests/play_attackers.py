"""The play soak's attackers with many resources, each run in a process of its own (in the players'
process their loops would take the GIL from the players): a client spread over many addresses, a
squatter of open episodes and slow readers. Each finds the server's URL in a file (the server moves
to a new port when the soak kills it) and puts what became of its requests on a queue.

Address ranges (the players are on 127.1.N.1, the greedy client 127.0.0.2, the slowloris 127.0.0.3
and 127.0.3.N): the spread client 127.0.4.N (one network), the squatter 127.5.N.1 and the slow readers
127.6.N.1 (a network each).
"""

from __future__ import annotations

import json
import random
import secrets
import select
import socket
import threading
import time
from collections import Counter
from http.client import HTTPException
from pathlib import Path
from typing import Any

from tests.play_support import Api

POLLRDHUP = getattr(select, "POLLRDHUP", 0x2000)


def url_of(path: Path) -> str | None:
    try:
        return path.read_text() or None
    except OSError:
        return None


class Tally:
    """Statuses per kind of request, from several threads."""

    def __init__(self) -> None:
        self.statuses: dict[str, Counter[int]] = {}
        self.lock = threading.Lock()

    def count(self, kind: str, status: int) -> None:
        with self.lock:
            self.statuses.setdefault(kind, Counter())[status] += 1


def _call(client: Api, url_file: Path, tally: Tally, kind: str, method: str, path: str, body: Any,
          source: str) -> tuple[int, Any]:
    """One request; (0, {}) when the connection failed (the server is down, or refused the connection)."""
    client.url = url_of(url_file) or ""
    try:
        status, headers, raw = client.exchange(method, path, body, source=source)
        data = json.loads(raw) if headers.get("Content-Type", "").startswith("application/json") else {}
    except (OSError, HTTPException, json.JSONDecodeError, ValueError):
        tally.count(kind, 0)
        time.sleep(0.1)  # a killed server's next life comes up soon
        return 0, {}
    tally.count(kind, status)
    return status, data


def _in_threads(loop: Any, url_file: Path, stop: Any, sources: list[str], seed: int,
                threads: int) -> dict[str, Counter[int]]:
    """Run `loop` on `threads` threads, each over its share of `sources`, until stopped; their statuses."""
    tally = Tally()
    workers = [threading.Thread(target=loop, args=(url_file, stop, tally, sources[n::threads], seed + n))
               for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return tally.statuses


# --- a client spread over many addresses -----------------------------------------------------

def spread_client(url_file: Path, stop: Any, out: Any, seed: int, addresses: int = 50, threads: int = 6) -> None:
    """From `addresses` addresses at once: every address joins as many handles as it may and floods
    their links, unknown links, joins and pages, as fast as `threads` connections allow."""
    sources = [f"127.0.4.{n}" for n in range(1, addresses + 1)]
    out.put(("spread", _in_threads(_spread, url_file, stop, sources, seed, threads)))


def _spread(url_file: Path, stop: Any, tally: Tally, sources: list[str], seed: int) -> None:
    rng, client = random.Random(seed), Api()
    tokens: dict[str, list[str]] = {source: [] for source in sources}
    while not stop.is_set():
        source = rng.choice(sources)
        mine = tokens[source]
        roll = rng.random()
        if roll < 0.15 or not mine:
            status, data = _call(client, url_file, tally, "join", "POST", "/api/join",
                                 {"handle": f"s{rng.getrandbits(40):x}", "consent": True}, source)
            if status == 200:
                mine.append(data["token"])
        elif roll < 0.55:
            token = rng.choice(mine)
            status, _ = _call(client, url_file, tally, "own link", "GET", f"/api/p/{token}", None, source)
            if status == 404:
                mine.remove(token)
        elif roll < 0.70:
            _call(client, url_file, tally, "unknown link", "GET", f"/api/p/{secrets.token_urlsafe(18)}", None, source)
        elif roll < 0.85:
            _call(client, url_file, tally, "page /", "GET", "/", None, source)
        else:
            _call(client, url_file, tally, "page /p/unknown", "GET", f"/p/{secrets.token_urlsafe(18)}", None, source)


# --- a squatter of open episodes -------------------------------------------------------------

def squatter(url_file: Path, stop: Any, out: Any, seed: int, addresses: int = 30, threads: int = 8) -> None:
    """Joins from `addresses` addresses and starts as many episodes as it is let, then never plays
    them: open episodes held to keep others from starting (30 addresses at 10 each would hold 300), from
    a network each, so that no network of it holds many."""
    sources = [f"127.5.{n}.1" for n in range(1, addresses + 1)]
    out.put(("squatter", _in_threads(_squat, url_file, stop, sources, seed, threads)))


def _squat(url_file: Path, stop: Any, tally: Tally, sources: list[str], seed: int) -> None:
    rng, client = random.Random(seed), Api()
    tokens: list[tuple[str, str]] = []
    while not stop.is_set():
        source = rng.choice(sources)
        if rng.random() < 0.3 or not tokens:
            status, data = _call(client, url_file, tally, "join", "POST", "/api/join",
                                 {"handle": f"q{rng.getrandbits(40):x}", "consent": True}, source)
            if status == 200:
                tokens.append((source, data["token"]))
        else:
            source, token = rng.choice(tokens)
            status, _ = _call(client, url_file, tally, "start", "POST", f"/api/p/{token}/episodes", {}, source)
            if status == 404:
                tokens.remove((source, token))


# --- slow readers ----------------------------------------------------------------------------

def slow_reader(address: str, port: int, pipelined: int = 32) -> socket.socket:
    """A connection with a 4 KiB receive buffer that pipelines static GETs and never reads: 32 answers of
    play.js (8.6 KB) fill more than the kernel and the server buffer for it (the server reads 32 ahead)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(5)
    sock.bind((address, 0))
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET /static/play.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * pipelined)
    sock.setblocking(False)
    return sock


def slow_readers(url_file: Path, stop: Any, out: Any, count: int = 500, addresses: int = 10) -> None:
    """Hold `count` slow readers over `addresses` addresses; each one closed (seen as a hang-up or a reset,
    without reading) is opened again two seconds later. A close is the server's own unless the server was
    killed meanwhile (its URL changed). Puts what became of them on `out`: counts, and the lifetimes of
    those the server closed."""
    found = {"opened": 0, "closed": 0, "killed": 0, "most": 0, "refused": 0}
    lifetimes: list[float] = []
    due = [(f"127.6.{1 + n % addresses}.1", 0.0) for n in range(count)]
    held: dict[int, tuple[socket.socket, str, float, str]] = {}
    poll = select.poll()
    while not stop.is_set():
        now, url = time.monotonic(), url_of(url_file)
        later = []
        for address, at in due:
            if at > now or url is None:
                later.append((address, at))
                continue
            try:
                sock = slow_reader(address, int(url.rsplit(":", 1)[1]))
            except OSError:
                found["refused"] += 1
                later.append((address, now + 2))
                continue
            found["opened"] += 1
            held[sock.fileno()] = (sock, address, time.monotonic(), url)
            poll.register(sock, POLLRDHUP | select.POLLHUP | select.POLLERR)
        due = later
        for fd, _ in poll.poll(250):
            sock, address, opened, served_by = held.pop(fd)
            poll.unregister(fd)
            sock.close()
            if served_by == url_of(url_file):
                found["closed"] += 1
                lifetimes.append(time.monotonic() - opened)
            else:
                found["killed"] += 1
            due.append((address, time.monotonic() + 2))
        found["most"] = max(found["most"], len(held))
    for sock, *_ in held.values():
        sock.close()
    out.put(("slow readers", (found, lifetimes)))
