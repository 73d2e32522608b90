"""Benchmark: the harness's CPU per model call against a zero-latency server (target <= 1 ms).

N episodes x 12 turns (min_turns = max_turns = 12) go through ``run_benchmark`` with no response
cache: prompt rendering, parsing, records and the run directory all count; the server runs in
its own process and does not. The same number of raw calls then go through plain aiohttp (at the
endpoint cap, and at the three roles' caps together, which the harness may fill) and through
``openai.AsyncOpenAI`` in this process, for the ratios; the harness / plain aiohttp ratio is held
against the 1.5 aim. Plain aiohttp also replays the harness's own request bodies, kept by the
server in arrival order: the floor for exactly the bytes the harness sent, not three fixed ones.
Scoring (``finalize_run``) is not part of the episode loop and is left out: it runs the affect
tracker (trackers are excepted from the target; ``bench_trackers.py`` measures them).

    HF_HUB_OFFLINE=1 python bench/bench_overhead.py [--episodes 210] [--in-flight 210] [--turns 12] [--no-openai] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

from _servers import bench_config, episode_grid, fake_server, load_line, measure, raw_aiohttp, raw_openai, recorded

TARGET_MS = 1.0
FLOOR_AIM = 1.5  # harness CPU per call / plain aiohttp's, at 210 and 1,020 episodes in flight


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=210)
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight (the endpoint cap)")
    ap.add_argument("--in-flight", type=int, default=210, help="episodes in flight (the run's concurrency)")
    ap.add_argument(
        "--profile", action="store_true",
        help="also print the harness run's cProfile hot spots (the profiler inflates the CPU figures)",
    )
    ap.add_argument("--no-openai", action="store_true", help="skip the openai.AsyncOpenAI load (the slowest part)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from emobench.run.runner import run_benchmark

    cases, seeds = episode_grid(args.episodes)
    print(load_line())
    with fake_server() as server, tempfile.TemporaryDirectory() as tmp:
        config = bench_config(
            server.base_url, max_concurrency=args.concurrency, seeds=list(range(seeds)), max_turns=args.turns,
            min_turns=args.turns, concurrency=args.in_flight, limit_cases=cases,
        )
        warm = bench_config(server.base_url, seeds=[0], max_turns=2, min_turns=2, limit_cases=2)
        # Imports, template compilation and the first connections are not per-call costs.
        asyncio.run(run_benchmark(warm, Path(tmp) / "warm", show_progress=False))
        asyncio.run(raw_aiohttp(server.base_url, 50, args.concurrency))
        asyncio.run(raw_openai(server.base_url, 50, args.concurrency))
        server.stats(reset=True, keep_bodies=True)

        run_dir = Path(tmp) / "run"
        profile = cProfile.Profile(time.process_time) if args.profile else None  # CPU, not wall, per function

        def run_harness() -> None:
            job = run_benchmark(config, run_dir, show_progress=False)
            if profile is None:
                asyncio.run(job)
            else:
                profile.runcall(asyncio.run, job)

        h = measure(run_harness)
        sent = server.bodies()
        calls = server.stats(reset=True)["requests"]
        rec = recorded(run_dir)
        if calls != rec.calls:
            sys.exit(f"the run directory records {rec.calls} calls, the server saw {calls}")
        if len(sent) != calls:
            sys.exit(f"the server kept {len(sent)} request bodies of {calls}")
        same = measure(lambda: asyncio.run(raw_aiohttp(server.base_url, calls, args.concurrency, sent)))
        sent.clear()  # tens of MB; the loads below do not need them
        a = measure(lambda: asyncio.run(raw_aiohttp(server.base_url, calls, args.concurrency)))
        # The three roles (subject, simulator, judge) each have the cap: up to three times as many in flight.
        a3 = measure(lambda: asyncio.run(raw_aiohttp(server.base_url, calls, 3 * args.concurrency)))
        o = None if args.no_openai else measure(lambda: asyncio.run(raw_openai(server.base_url, calls, args.concurrency)))
        server_cpu = server.stats()["cpu_s"]

    harness, plain = (1000 * m.cpu_s / calls for m in (h, a))
    print(f"calls: {calls} ({rec.episodes} episodes x {args.turns} turns, {args.in_flight} episodes and "
          f"{args.concurrency} requests in flight per role, harness wall {h.wall_s:.1f} s)")
    print(f"harness CPU per call: {harness:.3f} ms (target <= {TARGET_MS:g} ms, ratio {harness / TARGET_MS:.2f})")
    print(f"plain aiohttp CPU per call: {plain:.3f} ms; harness / aiohttp ratio {harness / plain:.2f} "
          f"(aim <= {FLOOR_AIM:g}: {'met' if harness / plain <= FLOOR_AIM else 'not met'})")
    own = 1000 * same.cpu_s / calls
    print(f"plain aiohttp sending the harness's own {calls} bodies: {own:.3f} ms; ratio {harness / own:.2f}")
    wide = 1000 * a3.cpu_s / calls
    print(f"plain aiohttp at {3 * args.concurrency} in flight: {wide:.3f} ms; ratio {harness / wide:.2f}")
    if o is not None:
        sdk = 1000 * o.cpu_s / calls
        print(f"openai.AsyncOpenAI CPU per call: {sdk:.3f} ms; harness / openai ratio {harness / sdk:.3f}")
    print(f"fake server CPU per request: {1000 * server_cpu / ((3 if o is None else 4) * calls):.3f} ms "
          "(its own process; not counted above)")
    print(load_line())
    if profile is not None:
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
