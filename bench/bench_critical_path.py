"""Benchmark: 200 episodes x 12 turns against a server with 250 ms per call and no capacity limit.

The issue's measure is wall / (12 turns x 3 calls x 250 ms): the time of one episode whose
calls follow one another. The loop does better than that chain: turn 1 opens with the card's
message (subject, then judge); on each later turn the simulator speaks, then the subject; the
simulator call of turn t+1 runs while the judges read turn t (before min_turns, with the rule
director, nothing can stop the episode in between); the last turn's judgement, the persona
probe and the post-episode holistic judgement follow. That dependent chain, counted from the
records, is the second ideal. The same number of chains of the same length then run through
plain aiohttp against the same server: what this machine and server allow any client.

    HF_HUB_OFFLINE=1 python bench/bench_critical_path.py [--episodes 200] [--turns 12] [--latency 0.25]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from _servers import bench_config, episode_grid, fake_server, load_line, measure, raw_chains, recorded

TARGET = 1.05


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--latency", type=float, default=0.25)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from emobench.run.runner import run_benchmark

    cases, seeds = episode_grid(args.episodes)
    print(load_line())
    with fake_server(latency_s=args.latency) as server, tempfile.TemporaryDirectory() as tmp:
        warm = bench_config(server.base_url, seeds=[0], max_turns=1, min_turns=1, limit_cases=1)
        asyncio.run(run_benchmark(warm, Path(tmp) / "warm", show_progress=False))
        server.stats(reset=True)
        # Every episode in flight and no client-side cap below that: only the chain remains.
        n = cases * seeds
        config = bench_config(
            server.base_url, seeds=list(range(seeds)), limit_cases=cases, max_turns=args.turns, min_turns=args.turns,
            concurrency=n, max_concurrency=4 * n,
        )
        run_dir = Path(tmp) / "run"
        began = time.monotonic()  # the server process stamps with the same system-wide clock
        m = measure(lambda: asyncio.run(run_benchmark(config, run_dir, show_progress=False)))
        ended = time.monotonic()
        wall = m.wall_s
        stats = server.stats(reset=True)
        rec = recorded(run_dir)
        plain = measure(lambda: asyncio.run(raw_chains(server.base_url, rec.episodes, rec.chain)))

    if stats["requests"] != rec.calls:
        sys.exit(f"the run directory records {rec.calls} calls, the server saw {stats['requests']}")
    chain, ideal = rec.chain, rec.chain * args.latency
    sequential = args.turns * 3 * args.latency
    span = stats["last_end"] - stats["first_start"]
    print(f"episodes: {rec.episodes} x {args.turns} turns, all in flight; {rec.calls} calls at {1000 * args.latency:.0f} ms")
    print(f"critical path, run wall / (12 x 3 x {args.latency:g} s = {sequential:.2f} s): {wall / sequential:.3f} "
          f"(target <= {TARGET}, wall {wall:.2f} s)")
    print(f"dependent chain: {chain} links = {chain + rec.overlapped} calls "
          f"({', '.join(f'{k} {v}' for k, v in rec.roles.items())}) less {rec.overlapped} simulator calls "
          f"beside the judges; ideal {ideal:.2f} s")
    print(f"critical path, run wall / chain ideal: {wall / ideal:.3f}")
    print(f"critical path, server span / chain ideal: {span / ideal:.3f} (first request in to last answer out, {span:.2f} s)")
    print(f"critical path, plain aiohttp: {rec.episodes} chains of {chain} calls, wall / chain ideal "
          f"{plain.wall_s / ideal:.3f} (harness / aiohttp {wall / plain.wall_s:.3f})")
    print(f"start-up before the first request: {stats['first_start'] - began:.2f} s; "
          f"after the last answer: {ended - stats['last_end']:.2f} s")
    print(f"harness overhead beyond the ideal: {wall - ideal:.2f} s, {1000 * (wall - ideal) / chain:.0f} ms per link, "
          f"for {rec.episodes} episodes' calls per link")
    # Each link's calls are answered together, and one process handles them one after another:
    # once episodes x CPU per call passes the latency, CPU, not the chain, sets the pace.
    per_call = m.cpu_s / rec.calls
    print(f"harness CPU: {m.cpu_s:.2f} s, {1000 * per_call:.3f} ms per call, {100 * m.cpu_s / wall:.0f}% of one core "
          f"over the run; CPU-bound floor, harness CPU / ideal: {m.cpu_s / ideal:.3f}")
    print(load_line())


if __name__ == "__main__":
    main()
