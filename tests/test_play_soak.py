"""A soak of `emobench play`: simulated players, random kills of the server, deletes, double sends
and malformed bodies, a greedy client and a slowloris client, against the fake OpenAI server;
then the run directory is checked.

Each player is a thread, on a loopback address of its own (127.1.N.1: a machine each), that
starts, plays, leaves and deletes episodes, every message a unique string. A double send is the
same request (one Idempotency-Key) from two threads at once; after a dropped connection a player
sends the same request again, with the same key, as the page's retry would. A killer thread
SIGKILLs the server at random and starts it again on the same run directory. The server runs
under an open-file limit of 1024 (a common default), and must never run out of descriptors.

Beside them a greedy client (127.0.0.2) sends as fast as it can: its own link, unknown episodes,
unknown links, joins (tests/play_support.greedy). A slowloris client holds sockets that send
nothing, half a request line, headers or a body a byte at a time: 300 from one address
(127.0.0.3) and 60 from each of 16 others (127.0.3.N), 1,260 in all, more than the server may
hold; each one the server closes is opened again two seconds later. Attackers with more addresses
(tests/play_attackers.py): a client spread over 50 addresses that joins all the handles it may and
floods their links, unknown links and pages; a squatter on 30 addresses that starts all the
episodes it may and never plays them; and 500 slow readers that pipeline static GETs into a 4 KiB
receive buffer and never read.

Afterwards: every record and judgement validates, every finished episode is judged exactly once,
no acknowledged turn or finish is lost (in the record or the journal), no word of a deleted
episode is in any file of the run directory, and a graceful restart (SIGTERM) finds nothing to
repair; no player was refused for someone else's requests (429) or answered 5xx, nor was any
attacker, and the server printed no traceback. The short version runs here; bench/bench_play_soak.py runs the long one and prints
the figures.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import socket
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.client import HTTPException
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from emobench.play.journal import read_journal
from emobench.records import Episode, EpisodeJudgement
from emobench.rundir import RunDir, read_records
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState
from tests.play_attackers import slow_readers, spread_client, squatter
from tests.play_support import Api, PlayServer, closed, greedy, hostile

# The players (bots that send as soon as they are answered) stay under their own limit. The server's
# budget (starts, turns and leaves, shared fairly among players) holds all 20 at that limit, whatever the
# machine's speed; the squatter's starts draw on it too, and only up to a fair share once it is used up.
PLAYER_PER_MINUTE, ANONYMOUS_PER_MINUTE = 1200, 30
SERVER_PER_MINUTE = 21 * PLAYER_PER_MINUTE + 2 * ANONYMOUS_PER_MINUTE + 4000
# A slow reader is closed after a response waits this long to be read, or (answered in full, but reading none)
# after two header deadlines: well inside a server life (8 to 14 s). The header deadline is a config setting.
DEADLINE_S = 3
PLAY = {"header_timeout_s": DEADLINE_S}
# The squatter (30 addresses, each in a network of its own, 10 unfinished episodes each) could hold all 60: a
# player's start on a full server ends the longest-idle episode of the network holding the most (idle 2 s).
LIMITS = ("--open-per-player", "3", "--player-per-minute", str(PLAYER_PER_MINUTE), "--server-per-minute",
          str(SERVER_PER_MINUTE), "--open-total", "60", "--evict-idle-s", "2", "--write-timeout", str(DEADLINE_S))
# A common default: the server's connections, journals and run files must fit in it under every flood at once.
OPEN_FILES = 1024
SLOWLORIS = [("127.0.0.3", 300)] + [(f"127.0.3.{n}", 60) for n in range(1, 17)]
SLOW_KINDS = ("idle", "request line", "headers", "body")
MALFORMED: list[tuple[bytes, dict[str, str]]] = [
    (b'{"message": "\\ud800", "meter": 50}', {}),
    (b"[" * 20_000 + b"]" * 20_000, {}),
    (b'{"message": {"a": [1]}, "meter": 50}', {}),
    (b'"just a string"', {}),
    (b"{not json", {}),
    (b'{"message": "x", "meter": 50}', {"Content-Type": "text/plain"}),
    (b'{"message": "x", "meter": 50}', {"Origin": "http://evil.example"}),
    (b'{"message": "x", "meter": "fifty"}', {}),
]


@dataclass
class Ep:
    id: str
    acked: list[str] = field(default_factory=list)  # texts the server answered 200 to
    sent: list[str] = field(default_factory=list)  # every text sent, answered or not
    finished: bool = False
    deleted: bool = False
    retry: bool = False  # the opening has no reply yet


@dataclass
class Figures:
    requests: int = 0
    kills: int = 0
    started: int = 0
    finished: int = 0
    deleted: int = 0
    double_sends: int = 0
    expired: int = 0  # players' episodes the server ended to make room (found at their next turn)
    malformed: int = 0
    retried: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    latencies: dict[str, list[float]] = field(default_factory=dict)  # per kind of request: seconds to each answer
    greedy: dict[str, Counter[int]] = field(default_factory=dict)  # per kind of request: statuses
    greedy_own: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # Greedy.own
    sockets_opened: int = 0
    sockets_closed_at_once: int = 0  # within a second: refused at the door
    sockets_closed_later: int = 0  # timed out, made room for others, or the server was killed
    sockets_held_most: int = 0
    lifetimes: list[float] = field(default_factory=list)
    spread: dict[str, Counter[int]] = field(default_factory=dict)  # per kind of request: statuses
    squatter: dict[str, Counter[int]] = field(default_factory=dict)
    slow_readers: dict[str, int] = field(default_factory=dict)  # opened, closed, most held, refused
    slow_lifetimes: list[float] = field(default_factory=list)
    descriptors_most: int = 0  # the server's open descriptors, sampled every 20 ms

    def summary(self) -> str:
        def spread(seconds: list[float]) -> str:
            lat = sorted(seconds)
            p95 = lat[int(0.95 * (len(lat) - 1))]
            return f"{len(lat)}: p50 {statistics.median(lat):.2f} s, p95 {p95:.2f} s, max {lat[-1]:.2f} s"

        def refused(statuses: dict[str, Counter[int]]) -> str:  # status 0: the connection failed
            return "; ".join(f"{k} {dict(sorted(c.items()))}" for k, c in sorted(statuses.items()))

        greedy = {kind: (sum(c.values()), c[429]) for kind, c in self.greedy.items()}
        served = sum(n for status, n in self.statuses.items() if status != 429 and (status < 500 or status == 502))
        return "\n".join([
            f"players: {self.requests} requests, statuses {dict(sorted(self.statuses.items()))}; {self.kills} kills, "
            f"{self.started} started, {self.finished} finished, {self.deleted} deleted, {self.double_sends} double sends, "
            f"{self.malformed} malformed, {self.expired} ended by the server to make room; served "
            f"{served}/{sum(self.statuses.values())}",
            "players' answered requests: " + "; ".join(f"{kind} {spread(lat)}" for kind, lat in sorted(self.latencies.items())),
            "greedy client, refused/sent: " + ", ".join(f"{k} {r}/{n}" for k, (n, r) in greedy.items()),
            f"slowloris: {self.sockets_opened} sockets opened, {self.sockets_closed_at_once} closed within 1 s, "
            f"{self.sockets_closed_later} later (median {statistics.median(self.lifetimes or [0]):.1f} s), "
            f"at most {self.sockets_held_most} held at once",
            f"client on 50 addresses, statuses: {refused(self.spread)}",
            f"squatter, statuses: {refused(self.squatter)}",
            f"slow readers: {self.slow_readers.get('opened', 0)} opened, {self.slow_readers.get('closed', 0)} closed by the "
            f"server (median after {statistics.median(self.slow_lifetimes or [0]):.1f} s, max "
            f"{max(self.slow_lifetimes or [0]):.1f} s), {self.slow_readers.get('killed', 0)} by its kills, at most "
            f"{self.slow_readers.get('most', 0)} held at once",
            f"server: at most {self.descriptors_most} of {OPEN_FILES} descriptors open (sampled every 20 ms)",
        ])


class Soak:
    def __init__(self, config: Path, run: Path, mode: str = "user") -> None:
        self.config, self.run, self.mode = config, run, mode
        self.servers: list[PlayServer] = []
        self.url_file = run.parent / "url"
        self.server = self.start()
        self.up = threading.Event()
        self.up.set()
        self.lock = threading.Lock()
        self.figures = Figures()
        self.episodes: list[Ep] = []
        self.stop = threading.Event()
        self.lost: list[str] = []
        self.back: list[str] = []  # what came back of deleted episodes
        self.history: list[tuple[str, str, int, str]] = []  # every answered request, for a failure's story

    def start(self) -> PlayServer:
        server = PlayServer(self.config, self.mode, self.run, *LIMITS, open_files=OPEN_FILES)
        self.servers.append(server)
        self.url_file.write_text(server.url)  # where the hostile clients find it
        return server

    # --- requests that survive kills -----------------------------------------------------
    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
             headers: dict[str, str] | None = None, source: str | None = None) -> tuple[int, Any]:
        """One request; on a dropped connection the same request again (same key) once the server is back."""
        for attempt in range(40):
            self.up.wait(120)
            server = self.server
            with self.lock:
                self.figures.requests += 1
                self.figures.retried += attempt > 0
            began = time.monotonic()
            try:
                status, data = server.call(method, path, body, raw, headers, source)
            except (OSError, HTTPException, json.JSONDecodeError):
                time.sleep(0.3)
                continue
            kind = "GET" if method == "GET" else "DELETE" if method == "DELETE" else path.rsplit("/", 1)[1]
            with self.lock:
                self.figures.statuses[status] += 1
                self.figures.latencies.setdefault(kind, []).append(time.monotonic() - began)
                self.history.append((method, path, status, str(data.get("error", ""))[:80] if isinstance(data, dict) else ""))
            if (status >= 500 and status != 502) or status == 429:  # a player is never refused for others' requests
                self.problem(f"{method} {path}: {status} {data}")
            return status, data
        self.problem(f"{method} {path}: no answer after 40 tries")
        return 0, {}

    def problem(self, text: str) -> None:
        with self.lock:
            self.figures.problems.append(text)

    # --- the killer ----------------------------------------------------------------------
    def killer(self, every: tuple[float, float], rng: random.Random) -> None:
        while not self.stop.wait(rng.uniform(*every)):
            self.up.clear()
            self.url_file.write_text("")  # the attackers tell a kill's closes from the server's own
            self.server.kill()
            self.figures.kills += 1
            self.server = self.start()
            self.up.set()

    def count_descriptors(self) -> None:
        while not self.stop.wait(0.02):
            try:
                held = len(os.listdir(f"/proc/{self.server.process.pid}/fd"))
            except OSError:  # killed, or between lives
                continue
            self.figures.descriptors_most = max(self.figures.descriptors_most, held)

    # --- a player ------------------------------------------------------------------------
    def player(self, number: int, rng: random.Random) -> None:
        handle, joins, me = f"p{number}", 0, f"127.1.{number + 1}.1"  # a machine of its own, in a network of its own

        def call(method: str, path: str, body: Any = None, raw: bytes | None = None,
                 headers: dict[str, str] | None = None) -> tuple[int, Any]:
            return self.call(method, path, body, raw, headers, me)

        status, data = call("POST", "/api/join", {"handle": handle, "consent": True})
        token = data.get("token")
        mine: list[Ep] = []
        sent = 0
        while not self.stop.is_set():
            if token is None:  # their last delete took the handle too: a new one
                joins += 1
                status, data = call("POST", "/api/join", {"handle": f"{handle}x{joins}", "consent": True})
                token = data.get("token")
                continue
            base = f"/api/p/{token}"
            open_ = [e for e in mine if not e.finished and not e.deleted]
            roll = rng.random()
            if roll < 0.05:
                raw, extra = rng.choice(MALFORMED if open_ else MALFORMED[:-1])  # a start reads no meter
                target = f"{base}/episodes/{open_[0].id}/turn" if open_ else f"{base}/episodes"
                status, _ = call("POST", target, raw=raw, headers=extra)
                with self.lock:
                    self.figures.malformed += 1
                if not 400 <= status < 500:
                    self.problem(f"malformed body {raw[:40]!r} {extra} answered {status}")
            elif roll < 0.12 and mine:
                ep = rng.choice([e for e in mine if not e.deleted] or mine)
                if ep.deleted:
                    continue
                status, data = call("DELETE", f"{base}/episodes/{ep.id}")
                if status in (200, 404, 410):  # 404/410: a retry after a kill found it already gone
                    ep.deleted = True
                    with self.lock:
                        self.figures.deleted += 1
                    if (status == 200 and data.get("player_forgotten")) or (status == 404 and self.forgotten(token, me)):
                        token = None
            elif not open_ or roll < 0.18:
                if len(open_) >= 3:
                    continue
                key = {"Idempotency-Key": f"start-{number}-{sent}"}
                sent += 1
                status, view = call("POST", f"{base}/episodes", {}, headers=key)
                if status == 200:
                    ep = Ep(view["id"], retry=bool(view.get("retry_opening")))
                    mine.append(ep)
                    self.episodes.append(ep)
                    with self.lock:
                        self.figures.started += 1
                elif status == 404:
                    token = None
            elif (pending := [e for e in open_ if e.retry]):
                ep = pending[0]  # as the page does: Send with no message asks the model again
                sent += 1
                status, view = call("POST", f"{base}/episodes/{ep.id}/turn", {"message": "", "meter": 50},
                                         headers={"Idempotency-Key": f"act-{number}-{sent}"})
                ep.retry = status != 200 and status != 410
            else:
                ep = rng.choice(open_)
                text = f"soak {number}-{sent}-{rng.getrandbits(40):010x} says"
                sent += 1
                key = {"Idempotency-Key": f"act-{number}-{sent}"}
                leave = rng.random() < 0.15
                body: dict[str, Any] = {"message": text, "meter": rng.randint(0, 100)}
                if self.mode == "subject":  # a supporter ends with nothing unsent, and sets no meter
                    body = {"message": "" if leave else text}
                path = f"{base}/episodes/{ep.id}/{'leave' if leave else 'turn'}"
                ep.sent.append(text)
                if rng.random() < 0.1:  # a double send: the same request twice at once
                    with self.lock:
                        self.figures.double_sends += 1
                    other = threading.Thread(target=call, args=("POST", path, body, None, key), daemon=True)
                    other.start()
                    status, view = call("POST", path, body, headers=key)
                    other.join(120)
                else:
                    status, view = call("POST", path, body, headers=key)
                if status == 200:
                    ep.retry = bool(view.get("retry_opening"))
                    if body["message"]:
                        ep.acked.append(text)
                    if view.get("done"):
                        ep.finished = True
                        with self.lock:
                            self.figures.finished += 1
                elif status == 409 and "not answered" in str(view):
                    ep.retry = True
                elif status == 409 or (status == 400 and "ended" in str(view)):
                    ep.finished = True
                    with self.lock:  # ended by the server: idle while it was full (play.evict_idle_s)
                        self.figures.expired += "without a turn" in str(view)
                elif status in (404, 410):
                    ep.deleted = ep.deleted or status == 410
                    if status == 404 and self.forgotten(token, me):
                        token = None
            time.sleep(rng.uniform(0.0, 0.05))

    def forgotten(self, token: str, source: str) -> bool:
        return self.call("GET", f"/api/p/{token}", source=source)[0] == 404

    # --- the whole soak ------------------------------------------------------------------
    def play(self, players: int, seconds: float, kill_every: tuple[float, float], seed: int = 0,
             hostile: bool = True) -> Figures:
        rng = random.Random(seed)
        threads = [threading.Thread(target=self.player, args=(n, random.Random(rng.random())), daemon=True)
                   for n in range(players)]
        killer = threading.Thread(target=self.killer, args=(kill_every, random.Random(rng.random())), daemon=True)
        counter = threading.Thread(target=self.count_descriptors, daemon=True)
        spawn = multiprocessing.get_context("spawn")
        stop, out = spawn.Event(), spawn.Queue()
        attackers = [spawn.Process(target=greedy_client, args=(self.url_file, stop, out, rng.getrandbits(32))),
                     spawn.Process(target=slowloris_client, args=(self.url_file, stop, out)),
                     spawn.Process(target=spread_client, args=(self.url_file, stop, out, rng.getrandbits(32))),
                     spawn.Process(target=squatter, args=(self.url_file, stop, out, rng.getrandbits(32))),
                     spawn.Process(target=slow_readers, args=(self.url_file, stop, out))] if hostile else []
        for process in attackers:
            process.start()
        for thread in [*threads, killer, counter]:
            thread.start()
        time.sleep(seconds)
        self.stop.set()
        stop.set()
        results = dict(out.get(timeout=120) for _ in attackers)
        killer.join(120)
        counter.join(5)
        for thread in threads:
            thread.join(180)
        for process in attackers:
            process.join(60)
        if hostile:
            self.figures.greedy, self.figures.greedy_own = results["greedy"]
            found, self.figures.lifetimes = results["slowloris"]
            figures = self.figures
            figures.sockets_opened, figures.sockets_closed_at_once = found["opened"], found["at_once"]
            figures.sockets_closed_later, figures.sockets_held_most = found["later"], found["most"]
            figures.spread, figures.squatter = results["spread"], results["squatter"]
            figures.slow_readers, figures.slow_lifetimes = results["slow readers"]
        return self.figures

    def settle(self, timeout: float = 300) -> list[str]:
        """Kill once more, start again and wait until the background catch-up has judged every
        finished episode; then stop gracefully and start once more. Returns the last start's notes."""
        self.server.kill()
        self.figures.kills += 1
        self.server = self.start()
        rd = RunDir(self.run)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if rd.done_keys() <= rd.judged_keys() and self.run.joinpath("scores.parquet").exists():
                break
            time.sleep(0.5)
        assert self.server.stop(signal.SIGTERM) == 0  # a container's stop: as graceful as Ctrl-C
        last = self.start()
        last.stop()
        return [line for line in last.startup if "repaired" in line]

    def said(self) -> list[str]:
        """What every server printed while it served (tracebacks would be here)."""
        return [line for server in self.servers for line in server.later]

    def tracebacks(self) -> str:
        """The last tracebacks the servers logged, for a failure's message (a 500 says it is logged)."""
        said = "".join(self.said())
        return said[max(0, said.find("Traceback") - 300):][-4000:] if "Traceback" in said else ""

    def check(self) -> dict[str, int]:
        """The run directory after the soak; the counts of what was lost and what came back."""
        rd = RunDir(self.run)
        episodes = read_records(rd.episodes, Episode)
        judgements = read_records(rd.judgements, EpisodeJudgement)
        keys = Counter(e.key for e in episodes)
        judged = Counter(j.key for j in judgements)
        assert all(n == 1 for n in keys.values()), "an episode recorded twice"
        assert judged == keys, "every finished episode judged exactly once"
        journals = {p.stem: read_journal(p) for p in (self.run / "play" / "journal").glob("*.jsonl")}
        recorded: dict[str, str] = {}
        for episode in episodes:
            text = json.dumps([[t.user.message, t.reply] for t in episode.turns] +
                              [episode.last_user.message if episode.last_user else ""])
            recorded[episode.key] = text
        files = {p: p.read_bytes() for p in self.run.rglob("*") if p.is_file()}
        for ep in self.episodes:
            if ep.deleted:
                self.back += [f"{ep.id}: journal"] if ep.id in journals else []
                self.back += [f"{ep.id}: {text!r} in {p.relative_to(self.run)}" for text in ep.sent
                              for p, data in files.items() if text.encode() in data]
                continue
            read = journals.get(ep.id)
            if read is None:
                self.lost.append(f"{ep.id}: no journal")
                continue
            held = recorded.get(read.head.key, "") + json.dumps(read.texts())
            self.lost += [f"{ep.id}: {text!r} not kept" for text in ep.acked if text not in held]
            if ep.finished and read.head.key not in keys:
                self.lost.append(f"{ep.id}: finished, not recorded")
        lost, resurrected = len(self.lost), len(self.back)
        scores = pd.read_parquet(self.run / "scores.parquet") if keys else pd.DataFrame()
        assert len(scores) == len(keys)
        return {"episodes": len(keys), "journals": len(journals), "lost": lost, "resurrected": resurrected}


# --- the hostile clients, each in a process of its own (in the players' process their loops would
# take the GIL from the players, and the players' latencies would measure the test, not the server)

def _url(path: Path) -> str | None:
    try:
        return path.read_text() or None
    except OSError:
        return None


@dataclass
class Greedy:
    """What the greedy client sent and what passed: statuses per kind of request, and the requests on
    its own links that passed, per (player link, server life) with the life's first and last second."""

    statuses: dict[str, Counter[int]] = field(default_factory=dict)
    own: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (token, url) -> [passed, first, last]
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, kind: str, status: int, token: str, url: str) -> None:
        with self.lock:
            self.statuses.setdefault(kind, Counter())[status] += 1
            if kind.startswith("own") and status != 429:
                now = time.monotonic()
                seen = self.own.setdefault((token, url), [0, now, now])
                seen[0], seen[2] = seen[0] + 1, now


def greedy_client(url_file: Path, stop: Any, out: Any, seed: int) -> None:
    """As fast as it can, from one address, on four connections at once, each with a player link of
    its own (a new one when its link is forgotten): its own link and unknown ones, and joins. Puts its
    statuses per kind of request, and what passed per link and server life, on `out`."""
    found = Greedy()
    threads = [threading.Thread(target=_greedy, args=(url_file, stop, found, seed + n)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out.put(("greedy", (found.statuses, found.own)))


def _greedy(url_file: Path, stop: Any, found: Greedy, seed: int) -> None:
    rng, me, token, client = random.Random(seed), "127.0.0.2", None, Api()
    while not stop.is_set():
        client.url = _url(url_file) or ""
        try:
            if token is None:
                status, data = client.call("POST", "/api/join", {"handle": f"greedy{rng.getrandbits(24):x}",
                                                                 "consent": True}, source=me)
                token = data.get("token") if status == 200 else None
                if token is None:
                    time.sleep(0.5)
                continue
            for kind, method, path, body in greedy(rng, token, 20):
                status, _ = client.call(method, path, body, source=me)
                found.count(kind, status, token, client.url)
                if kind == "own link" and status == 404:
                    token = None
                    break
        except (OSError, HTTPException, json.JSONDecodeError, ValueError):
            time.sleep(0.2)


def slowloris_client(url_file: Path, stop: Any, out: Any) -> None:
    """Hold SLOWLORIS sockets of SLOW_KINDS; each the server closes is opened again two seconds
    later. Puts what became of them on `out`."""
    found = {"opened": 0, "at_once": 0, "later": 0, "most": 0}
    lifetimes: list[float] = []
    due = [(address, SLOW_KINDS[n % len(SLOW_KINDS)], 0.0) for address, count in SLOWLORIS for n in range(count)]
    held: list[tuple[socket.socket, str, str, float]] = []
    while not stop.is_set():
        now, url = time.monotonic(), _url(url_file)
        later = []
        for address, kind, at in due:
            if at > now or url is None:
                later.append((address, kind, at))
                continue
            try:
                held.append((hostile(kind, address, int(url.rsplit(":", 1)[1])), address, kind, time.monotonic()))
                found["opened"] += 1
            except OSError:
                later.append((address, kind, now + 2))
        due, alive = later, []
        for sock, address, kind, opened in held:
            if kind in ("headers", "body"):
                try:
                    sock.send(b"a")
                except OSError:
                    pass
            if closed(sock):
                sock.close()
                lived = time.monotonic() - opened
                found["at_once" if lived < 1 else "later"] += 1
                if lived >= 1:
                    lifetimes.append(lived)
                due.append((address, kind, time.monotonic() + 2))
            else:
                alive.append((sock, address, kind, opened))
        held = alive
        found["most"] = max(found["most"], len(held))
        time.sleep(0.25)
    for sock, *_ in held:
        sock.close()
    out.put(("slowloris", (found, lifetimes)))


@pytest.mark.soak
def test_a_short_soak(tmp_path: Path, record_property: Callable[[str, object], None]) -> None:
    with FakeOpenAIServer(FakeState(latency_s=0.02, fault_rate=0.02, fault_kinds=("429", "500"), fault_seed=1)) as fake:
        config = write_config(tmp_path / "play.yaml", fake.base_url, max_turns=5, min_turns=4, play=PLAY)
        soak = Soak(config, tmp_path / "run")
        figures = soak.play(players=20, seconds=45, kill_every=(8, 14))
        notes = soak.settle()
        found = soak.check()
    record_property("summary", figures.summary())  # printed at the end of the run (tests/tiers.py)
    print("\n" + figures.summary())
    assert figures.problems == [], (figures.problems[:5], figures.summary(), soak.tracebacks())
    assert figures.kills >= 3 and figures.started > 20 and figures.deleted > 0 and figures.double_sends > 0
    assert figures.malformed > 0 and figures.finished > 0
    assert found["lost"] == 0 and found["resurrected"] == 0 and found["episodes"] > 0, (found, soak.lost, soak.back)
    assert notes == []  # a graceful stop leaves nothing to repair
    # The hostile clients: refused beyond their limits (each server's windows start empty), and no traceback.
    lives = figures.kills + 2
    greedy = {kind: (sum(c.values()), sum(n for s, n in c.items() if s != 429)) for kind, c in figures.greedy.items()}
    anonymous = sum(greedy[k][1] for k in ("unknown link", "unknown link turn", "join"))
    assert all(passed < sent for kind, (sent, passed) in greedy.items() if kind not in ("own link", "own unknown episode"))
    assert anonymous <= ANONYMOUS_PER_MINUTE * lives, greedy
    # Each of its links is a player of its own, charged for every request on the link, a 404 too: within one
    # server life, at most the per-player limit in each minute the life lasted (a sliding minute's window).
    over = {f"{token[:6]}@{url}": (int(n), round(last - first, 1))
            for (token, url), (n, first, last) in figures.greedy_own.items()
            if n > PLAYER_PER_MINUTE * (1 + (last - first) // 60)}
    assert figures.greedy_own and not over, over
    # Every socket past the one address's cap (300 - 64) at least was closed by the server, some only after a while.
    assert figures.sockets_opened >= 1260 and figures.sockets_closed_at_once + figures.sockets_closed_later >= 236
    assert figures.sockets_closed_later > 0
    # The client on 50 addresses and the squatter get no 5xx either (502: the model endpoint's own fault), and the
    # server closes slow readers: none holds its descriptor for long.
    attackers = {**figures.spread, **{f"squatter's {kind}": c for kind, c in figures.squatter.items()}}
    assert not {kind: c for kind, c in attackers.items() if any(s >= 500 and s != 502 for s in c)}, attackers
    assert sum(figures.spread.get("own link", {}).values()) > 0 and figures.squatter.get("start", {}).get(200, 0) > 0
    said = soak.said()
    assert not any("Traceback" in line for line in said), [line for line in said if "Error" in line][:5]
    # The server never ran out of descriptors: what it accepts beyond its cap is closed at once (emobench.play.listener).
    assert not [line for line in said if "cannot accept connections" in line or "Too many open files" in line]
    # Slow readers are closed by the server: within two deadlines of their connect, and the time a connection
    # waits in the listen queue under the floods (a kill's closes are not counted: the server did not choose them).
    slow = figures.slow_readers
    assert slow["opened"] >= 500 and slow["closed"] >= 50, slow
    assert max(figures.slow_lifetimes) <= 2 * DEADLINE_S + 6, sorted(figures.slow_lifetimes)[-5:]
