"""A soak of `emobench play`: simulated players, random kills of the server, deletes, double sends
and malformed bodies, against the fake OpenAI server; then the run directory is checked.

Each player is a thread that starts, plays, leaves and deletes episodes, every message a unique
string. A double send is the same request (one Idempotency-Key) from two threads at once; after a
dropped connection a player sends the same request again, with the same key, as the page's retry
would. A killer thread SIGKILLs the server at random and starts it again on the same run directory.

Afterwards: every record and judgement validates, every finished episode is judged exactly once,
no acknowledged turn or finish is lost (in the record or the journal), no word of a deleted
episode is in any file of the run directory, and a graceful restart finds nothing to repair.
The short version runs here; bench/bench_play_soak.py runs the long one and prints the figures.
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.error
from collections import Counter
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
from tests.play_support import PlayServer

LIMITS = ("--open-per-player", "3", "--player-per-minute", "100000", "--server-per-minute", "100000", "--open-total", "200")
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
    malformed: int = 0
    retried: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)


class Soak:
    def __init__(self, config: Path, run: Path, mode: str = "user") -> None:
        self.config, self.run, self.mode = config, run, mode
        self.server = PlayServer(config, mode, run, *LIMITS)
        self.up = threading.Event()
        self.up.set()
        self.lock = threading.Lock()
        self.figures = Figures()
        self.episodes: list[Ep] = []
        self.stop = threading.Event()
        self.lost: list[str] = []
        self.back: list[str] = []  # what came back of deleted episodes
        self.history: list[tuple[str, str, int, str]] = []  # every answered request, for a failure's story

    # --- requests that survive kills -----------------------------------------------------
    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any]:
        """One request; on a dropped connection the same request again (same key) once the server is back."""
        for attempt in range(40):
            self.up.wait(120)
            server = self.server
            with self.lock:
                self.figures.requests += 1
                self.figures.retried += attempt > 0
            try:
                status, data = server.call(method, path, body, raw, headers)
            except (urllib.error.URLError, HTTPException, ConnectionError, TimeoutError, json.JSONDecodeError):
                time.sleep(0.3)
                continue
            with self.lock:
                self.figures.statuses[status] += 1
                self.history.append((method, path, status, str(data.get("error", ""))[:80] if isinstance(data, dict) else ""))
            if status >= 500 and status != 502:
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
            self.server.kill()
            self.figures.kills += 1
            self.server = PlayServer(self.config, self.mode, self.run, *LIMITS)
            self.up.set()

    # --- a player ------------------------------------------------------------------------
    def player(self, number: int, rng: random.Random) -> None:
        handle, joins = f"p{number}", 0
        status, data = self.call("POST", "/api/join", {"handle": handle, "consent": True})
        token = data.get("token")
        mine: list[Ep] = []
        sent = 0
        while not self.stop.is_set():
            if token is None:  # their last delete took the handle too: a new one
                joins += 1
                status, data = self.call("POST", "/api/join", {"handle": f"{handle}x{joins}", "consent": True})
                token = data.get("token")
                continue
            base = f"/api/p/{token}"
            open_ = [e for e in mine if not e.finished and not e.deleted]
            roll = rng.random()
            if roll < 0.05:
                raw, extra = rng.choice(MALFORMED if open_ else MALFORMED[:-1])  # a start reads no meter
                target = f"{base}/episodes/{open_[0].id}/turn" if open_ else f"{base}/episodes"
                status, _ = self.call("POST", target, raw=raw, headers=extra)
                with self.lock:
                    self.figures.malformed += 1
                if not 400 <= status < 500:
                    self.problem(f"malformed body {raw[:40]!r} {extra} answered {status}")
            elif roll < 0.12 and mine:
                ep = rng.choice([e for e in mine if not e.deleted] or mine)
                if ep.deleted:
                    continue
                status, data = self.call("DELETE", f"{base}/episodes/{ep.id}")
                if status in (200, 404, 410):  # 404/410: a retry after a kill found it already gone
                    ep.deleted = True
                    with self.lock:
                        self.figures.deleted += 1
                    if (status == 200 and data.get("player_forgotten")) or (status == 404 and self.forgotten(token)):
                        token = None
            elif not open_ or roll < 0.18:
                if len(open_) >= 3:
                    continue
                key = {"Idempotency-Key": f"start-{number}-{sent}"}
                sent += 1
                status, view = self.call("POST", f"{base}/episodes", {}, headers=key)
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
                status, view = self.call("POST", f"{base}/episodes/{ep.id}/turn", {"message": "", "meter": 50},
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
                    other = threading.Thread(target=self.call, args=("POST", path, body, None, key), daemon=True)
                    other.start()
                    status, view = self.call("POST", path, body, headers=key)
                    other.join(120)
                else:
                    status, view = self.call("POST", path, body, headers=key)
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
                elif status in (404, 410):
                    ep.deleted = ep.deleted or status == 410
                    if status == 404 and self.forgotten(token):
                        token = None
            time.sleep(rng.uniform(0.0, 0.05))

    def forgotten(self, token: str) -> bool:
        return self.call("GET", f"/api/p/{token}")[0] == 404

    # --- the whole soak ------------------------------------------------------------------
    def play(self, players: int, seconds: float, kill_every: tuple[float, float], seed: int = 0) -> Figures:
        rng = random.Random(seed)
        threads = [threading.Thread(target=self.player, args=(n, random.Random(rng.random())), daemon=True)
                   for n in range(players)]
        killer = threading.Thread(target=self.killer, args=(kill_every, random.Random(rng.random())), daemon=True)
        for thread in [*threads, killer]:
            thread.start()
        time.sleep(seconds)
        self.stop.set()
        killer.join(120)
        for thread in threads:
            thread.join(180)
        return self.figures

    def settle(self, timeout: float = 300) -> list[str]:
        """Kill once more, start again and wait until the background catch-up has judged every
        finished episode; then stop gracefully and start once more. Returns the last start's notes."""
        self.server.kill()
        self.figures.kills += 1
        self.server = PlayServer(self.config, self.mode, self.run, *LIMITS)
        rd = RunDir(self.run)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if rd.done_keys() <= rd.judged_keys() and self.run.joinpath("scores.parquet").exists():
                break
            time.sleep(0.5)
        self.server.stop()
        last = PlayServer(self.config, self.mode, self.run, *LIMITS)
        last.stop()
        return [line for line in last.startup if "repaired" in line]

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


@pytest.mark.soak
def test_a_short_soak(tmp_path: Path) -> None:
    with FakeOpenAIServer(FakeState(latency_s=0.02, fault_rate=0.02, fault_kinds=("429", "500"), fault_seed=1)) as fake:
        config = write_config(tmp_path / "play.yaml", fake.base_url, max_turns=5, min_turns=4)
        soak = Soak(config, tmp_path / "run")
        figures = soak.play(players=20, seconds=45, kill_every=(8, 14))
        notes = soak.settle()
        found = soak.check()
    assert figures.problems == [], (figures.problems[:5], figures)
    assert figures.kills >= 3 and figures.started > 20 and figures.deleted > 0 and figures.double_sends > 0
    assert figures.malformed > 0 and figures.finished > 0
    assert found["lost"] == 0 and found["resurrected"] == 0 and found["episodes"] > 0, (found, soak.lost, soak.back)
    assert notes == []  # a graceful stop leaves nothing to repair
