"""Benchmark: 200 episodes x 12 turns against a server with 250 ms per call and no capacity limit.

With every episode in flight at once, the run can take no less than one episode's chain of
dependent calls: turn 1 opens with the card's message (subject, then judge), turns 2-12 add
the simulator before them (simulator, subject, judge), the persona probe follows the last
turn, and the post-episode holistic judgement follows as soon as the episode ends. The ideal is
that chain's length x 250 ms, counted from the records (so it follows the protocol if that
changes); the target is wall / ideal <= 1.05. The issue's shorthand,
12 x 3 x 250 ms, is printed beside it. The same number of chains of the same length then run
through plain aiohttp against the same server: what this machine and server allow any client.

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

from _servers import bench_config, fake_server, load_line, measure, raw_chains, recorded

TARGET = 1.05


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--latency", type=float, default=0.25)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from emobench.runner import run_benchmark

    seeds = -(-args.episodes // 25)  # 25 of the test split's 30 cases, as many seeds as it takes
    cases = -(-args.episodes // seeds)
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
    span = stats["last_end"] - stats["first_start"]
    print(f"episodes: {rec.episodes} x {args.turns} turns, all in flight; {rec.calls} calls at {1000 * args.latency:.0f} ms")
    print(f"ideal: {ideal:.2f} s = {chain} dependent calls x {args.latency:g} s "
          f"({', '.join(f'{k} {v}' for k, v in rec.roles.items())}; issue shorthand 12 x 3 x {args.latency:g} = "
          f"{args.turns * 3 * args.latency:.2f} s)")
    print(f"critical path, run wall / ideal: {wall / ideal:.3f} (target <= {TARGET}, wall {wall:.2f} s)")
    print(f"critical path, server span / ideal: {span / ideal:.3f} (first request in to last answer out, {span:.2f} s)")
    print(f"critical path, plain aiohttp: {rec.episodes} chains of {chain} calls, wall / ideal "
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
