"""Benchmark: the harness's CPU per model call against a zero-latency server (target <= 1 ms).

N episodes x 12 turns (min_turns = max_turns = 12) go through ``run_benchmark`` with no response
cache: prompt rendering, parsing, records and the run directory all count; the server runs in
its own process and does not. The same number of raw calls then go through plain aiohttp and
through ``openai.AsyncOpenAI`` in this process, for the ratios. Scoring (``finalize_run``) is
not part of the episode loop and is left out: it runs the affect tracker (trackers are
excepted from the target; ``bench_trackers.py`` measures them).

    HF_HUB_OFFLINE=1 python bench/bench_overhead.py [--episodes 200] [--turns 12] [--profile]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight (the endpoint cap)")
    ap.add_argument("--in-flight", type=int, default=64, help="episodes in flight (the run's concurrency)")
    ap.add_argument(
        "--profile", action="store_true",
        help="also print the harness run's cProfile hot spots (the profiler inflates the CPU figures)",
    )
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
        server.stats(reset=True)

        run_dir = Path(tmp) / "run"
        profile = cProfile.Profile(time.process_time) if args.profile else None  # CPU, not wall, per function

        def run_harness() -> None:
            job = run_benchmark(config, run_dir, show_progress=False)
            if profile is None:
                asyncio.run(job)
            else:
                profile.runcall(asyncio.run, job)

        h = measure(run_harness)
        calls = server.stats(reset=True)["requests"]
        rec = recorded(run_dir)
        if calls != rec.calls:
            sys.exit(f"the run directory records {rec.calls} calls, the server saw {calls}")
        a = measure(lambda: asyncio.run(raw_aiohttp(server.base_url, calls, args.concurrency)))
        o = measure(lambda: asyncio.run(raw_openai(server.base_url, calls, args.concurrency)))
        server_cpu = server.stats()["cpu_s"]

    ms = {name: 1000 * m.cpu_s / calls for name, m in (("harness", h), ("aiohttp", a), ("openai", o))}
    harness, plain, sdk = ms["harness"], ms["aiohttp"], ms["openai"]
    print(f"calls: {calls} ({rec.episodes} episodes x {args.turns} turns, {args.concurrency} in flight, "
          f"harness wall {h.wall_s:.1f} s)")
    print(f"harness CPU per call: {harness:.3f} ms (target <= {TARGET_MS:g} ms, ratio {harness / TARGET_MS:.2f})")
    print(f"plain aiohttp CPU per call: {plain:.3f} ms (reference figure 0.41 ms; harness / aiohttp ratio {harness / plain:.2f})")
    print(f"openai.AsyncOpenAI CPU per call: {sdk:.3f} ms (reference figure 9.9 ms; harness / openai ratio {harness / sdk:.3f})")
    print(f"fake server CPU per request: {1000 * server_cpu / (2 * calls):.3f} ms (its own process; not counted above)")
    print(load_line())
    if profile is not None:
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
