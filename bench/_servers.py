"""Benchmark helpers: a fake OpenAI-compatible server in its own process, and raw-call loads.

The server runs in a child process so that the harness process's CPU
(``time.process_time()``) counts the harness alone. It is an aiohttp server rather than the
stdlib ``tests/fake_openai.py`` one, which runs a thread per connection: measured here at 16
in flight, the stdlib server answered 278 requests/s for 0.57 ms of its CPU each, this one 455
requests/s for 0.29 ms, and the saturation benchmark needs 320/s. It reuses the stdlib
server's ``default_responder``, so the harness gets the same answers for every kind of call.

    python bench/_servers.py --latency 0.05 --capacity 16   # prints "PORT <n>", serves until killed
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fake_openai import default_responder  # noqa: E402


class _Stats:
    def __init__(self) -> None:
        self.in_service = 0
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.max_in_service = 0
        self.first_start: float | None = None
        self.last_end = 0.0
        self.busy_s = 0.0  # request-seconds in service: with the span, how full the slots were
        self.cpu0 = time.process_time()
        self.bodies: list[bytes] | None = None  # the request bodies as sent, when asked to keep them


def make_app(latency_s: float, capacity: int | None) -> web.Application:
    stats = _Stats()
    # At most `capacity` requests are in service at once; the rest wait here, as at a busy server.
    gate = asyncio.Semaphore(capacity) if capacity else None

    async def serve(body: dict[str, Any]) -> bytes:
        stats.in_service += 1
        stats.max_in_service = max(stats.max_in_service, stats.in_service)
        start = time.monotonic()
        if stats.first_start is None:
            stats.first_start = start
        if latency_s:
            await asyncio.sleep(latency_s)
        text = default_responder(body)
        words = len(text.split())
        stats.in_service -= 1
        stats.requests += 1
        stats.last_end = time.monotonic()
        stats.busy_s += stats.last_end - start
        return orjson.dumps({
            "id": "fake", "object": "chat.completion", "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": words, "total_tokens": 10 + words},
        })

    async def completions(request: web.Request) -> web.Response:
        raw = await request.read()
        if stats.bodies is not None:
            stats.bodies.append(raw)
        body = orjson.loads(raw)
        if gate is None:
            payload = await serve(body)
        else:
            async with gate:
                payload = await serve(body)
        return web.Response(body=payload, content_type="application/json")

    async def get_stats(request: web.Request) -> web.Response:
        out = {
            "requests": stats.requests, "max_in_service": stats.max_in_service,
            "first_start": stats.first_start, "last_end": stats.last_end, "busy_s": stats.busy_s,
            "cpu_s": time.process_time() - stats.cpu0,
        }
        if request.query.get("reset"):
            stats.reset()
            if request.query.get("keep"):
                stats.bodies = []
        return web.json_response(out)

    async def get_bodies(request: web.Request) -> web.Response:
        # orjson writes no raw newline, so one body per line.
        return web.Response(body=b"\n".join(stats.bodies or []), content_type="application/x-ndjson")

    async def models(request: web.Request) -> web.Response:  # what a run's preflight reaches first
        return web.json_response({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    app = web.Application(client_max_size=64 << 20)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/stats", get_stats)
    app.router.add_get("/bodies", get_bodies)
    return app


async def _serve_forever(latency_s: float, capacity: int | None) -> None:
    runner = web.AppRunner(make_app(latency_s, capacity), access_log=None)
    await runner.setup()
    # A deep backlog: a critical-path run opens a couple of hundred connections at once.
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=2048)
    await site.start()
    port = runner.addresses[0][1]
    print(f"PORT {port}", flush=True)
    await asyncio.Event().wait()


@dataclass
class ServerProcess:
    """A running fake server; ``stats(reset=True)`` reads and zeroes its counters."""

    proc: subprocess.Popen[str]
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self, reset: bool = False, keep_bodies: bool = False) -> dict[str, Any]:
        """``keep_bodies`` (with reset): keep every request body from now on, for ``bodies``."""
        url = f"http://127.0.0.1:{self.port}/stats" + ("?reset=1" if reset else "") + ("&keep=1" if keep_bodies else "")
        with urllib.request.urlopen(url, timeout=30) as resp:
            return orjson.loads(resp.read())

    def bodies(self) -> list[dict[str, Any]]:
        """The request bodies kept since ``stats(reset=True, keep_bodies=True)``, in arrival order."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/bodies", timeout=60) as resp:
            return [orjson.loads(line) for line in resp.read().splitlines()]


@contextmanager
def fake_server(latency_s: float = 0.0, capacity: int | None = None) -> Iterator[ServerProcess]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--latency", str(latency_s)]
    if capacity:
        cmd += ["--capacity", str(capacity)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"fake server did not start: {line!r}")
        yield ServerProcess(proc, int(line.split()[1]))
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# --- raw-call loads: the same requests without the harness, for the comparison ratios ---------

def sample_requests(model: str = "fake-model") -> list[dict[str, Any]]:
    """A subject, a simulator and a judge request of the sizes a mid-episode turn sends."""
    from emobench.episode.simulator import USER_MOVE_FORMAT
    from emobench.judging.mdep import MDEP_FORMAT

    said = "I don't know, it's just a lot right now. My son says he's moving abroad and I keep smiling about it. " * 2
    reply = "That sounds hard. What part of it weighs on you most? It makes sense that you'd feel torn. " * 2
    history: list[dict[str, str]] = []
    for _ in range(6):
        history += [{"role": "user", "content": said}, {"role": "assistant", "content": reply}]
    system = {"role": "system", "content": "You are playing a person in a conversation. " * 40}
    base = {"model": model, "temperature": 0.7, "top_p": 1.0, "max_tokens": 256, "seed": 1234}
    return [
        {**base, "messages": [*history, {"role": "user", "content": said}]},
        {**base, "messages": [system, *history], "response_format": USER_MOVE_FORMAT},
        {**base, "messages": [system, {"role": "user", "content": said * 8}], "response_format": MDEP_FORMAT},
    ]


async def _drive(
    n: int, concurrency: int, call: Callable[[dict[str, Any]], Awaitable[str]], requests: list[dict[str, Any]] | None = None
) -> None:
    requests = requests or sample_requests()
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            text = await call(requests[i % len(requests)])
        assert text

    await asyncio.gather(*(one(i) for i in range(n)))


async def raw_aiohttp(base_url: str, n: int, concurrency: int, requests: list[dict[str, Any]] | None = None) -> None:
    """Plain aiohttp + orjson: the floor any client can reach. ``requests``: the bodies to send
    in turn (default: three of a mid-episode turn's sizes, ``sample_requests``)."""
    url = f"{base_url}/chat/completions"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def call(body: dict[str, Any]) -> str:
            async with session.post(url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}) as resp:
                data = orjson.loads(await resp.read())
            return str(data["choices"][0]["message"]["content"])

        await _drive(n, concurrency, call, requests)


async def raw_chains(base_url: str, chains: int, length: int) -> None:
    """Plain aiohttp, ``chains`` at once, each ``length`` dependent calls: the critical-path floor."""
    url = f"{base_url}/chat/completions"
    requests = sample_requests()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def chain() -> None:
            for i in range(length):
                body = orjson.dumps(requests[i % len(requests)])
                async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
                    assert orjson.loads(await resp.read())["choices"][0]["message"]["content"]

        await asyncio.gather(*(chain() for _ in range(chains)))


async def raw_openai(base_url: str, n: int, concurrency: int) -> None:
    """``openai.AsyncOpenAI`` as it comes (its pool keeps 100 connections alive, above the loads here)."""
    import openai

    async with openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0) as client:

        async def call(body: dict[str, Any]) -> str:
            done = await client.chat.completions.create(**body)
            return done.choices[0].message.content or ""

        await _drive(n, concurrency, call)


@dataclass(frozen=True)
class Measured:
    cpu_s: float
    wall_s: float


def measure(fn: Callable[[], Any]) -> Measured:
    """CPU and wall seconds of this process while fn runs."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return Measured(time.process_time() - c0, time.perf_counter() - t0)


def load_line() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def cpu_line() -> str:
    from emobench.endpoints.embedded import BF16_FLAGS, cpu_flags, served_dtype

    name = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
        if line.startswith("model name"):
            name = line.partition(":")[2].strip()
            break
    flags = cpu_flags()
    simd = " ".join(sorted(f for f in flags if f.startswith(("avx512", "amx")) or f == "avx2")) or "-"
    return (f"CPU: {name}, {os.cpu_count()} cores; flags {simd}; native bf16: {'yes' if flags & BF16_FLAGS else 'no'}; "
            f"embedded model served in {served_dtype()} by default")


def episode_grid(episodes: int) -> tuple[int, int]:
    """(cases, seeds) covering at least ``episodes``: 25 of the test split's 30 cases, as many seeds as it takes."""
    seeds = -(-episodes // 25)
    return -(-episodes // seeds), seeds


def bench_config(base_url: str, **extra: Any) -> Any:
    """A RunConfig with every role on the fake server (one shared client, as with one vLLM)."""
    from emobench.config import validate_config

    role = {"binding": f"openai:fake-model@{base_url}", "max_concurrency": extra.pop("max_concurrency", 16)}
    data = {
        "subjects": [{**role, "label": "subject", "sampling": {"temperature": 0.7, "max_tokens": 256}}],
        "user": {**role, "sampling": {"temperature": 0.8, "max_tokens": 256}},
        "judges": [{**role, "label": "judge", "sampling": {"temperature": 0.0, "max_tokens": 512}}],
        "split": "test",
        **extra,
    }
    return validate_config(data, "bench")


@dataclass(frozen=True)
class Recorded:
    """The model calls a run directory records, and its longest chain of dependent calls."""

    episodes: int
    calls: int
    chain: int
    roles: dict[str, int]
    overlapped: int


def recorded(run_dir: Path) -> Recorded:
    """Episode calls, then the post-episode judgement's (which follows the episode's last call).

    With one judge and no retries, each recorded call is one link of its episode's chain, except
    the simulator calls that run beside the judges of the turn before (before min_turns, with the
    rule director: see the episode loop).
    """
    from emobench.records import EpisodeJudgement
    from emobench.rundir import RunDir, read_records

    rd = RunDir(run_dir)
    config = rd.read_manifest()["config"]
    episodes = rd.read_episodes()
    judged = read_records(rd.judgements, EpisodeJudgement)
    longest = max(episodes, key=lambda e: len(e.calls))
    roles: dict[str, int] = {}
    for call in longest.calls:
        roles[call.role] = roles.get(call.role, 0) + 1
    post = max((len(j.calls) for j in judged), default=0)
    if post:
        roles["post-episode judge"] = post
    overlapped = 0 if config["director"] else sum(1 for t in longest.turns if 1 < t.index <= config["min_turns"])
    return Recorded(
        episodes=len(episodes),
        calls=sum(len(e.calls) for e in episodes) + sum(len(j.calls) for j in judged),
        chain=len(longest.calls) + post - overlapped,
        roles=roles,
        overlapped=overlapped,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description="fake OpenAI-compatible server for the benchmarks")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds each request spends in service")
    ap.add_argument("--capacity", type=int, default=0, help="at most this many requests in service (0: no limit)")
    args = ap.parse_args()
    asyncio.run(_serve_forever(args.latency, args.capacity or None))


if __name__ == "__main__":
    main()
