"""Benchmark: keep a server busy that serves at most 16 requests at once with 50 ms latency.

Such a server answers at most 16 / 0.05 = 320 requests/s. The run's achieved request rate over
that maximum is the figure (target >= 0.95): 200 episodes x 12 turns, every episode in flight and
64 requests at the server, so it always has a queue. Episodes are chains of dependent calls:
with 64 episodes in flight, those admitted last lag behind, and once fewer than 16 remain the
server idles (measured: slots 97.5% busy until the last 3 s, then 83%, 46%, 33%; ratio 0.89).
With all of them in flight they progress in lockstep and finish together; the endpoint cap,
not the episode count, bounds the requests. The same server is then loaded with raw calls at
the same request concurrency, through plain aiohttp (what the server itself allows: its timer
overshoot and this machine's load) and through ``openai.AsyncOpenAI`` (the issue's comparison).

    HF_HUB_OFFLINE=1 python bench/bench_saturation.py [--episodes 200] [--in-flight N] [--raw-calls 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

from _servers import bench_config, episode_grid, fake_server, load_line, measure, raw_aiohttp, raw_openai, recorded

TARGET = 0.95
CAPACITY = 16
LATENCY_S = 0.05
MAX_RATE = CAPACITY / LATENCY_S


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--concurrency", type=int, default=64, help="requests in flight: the endpoint cap, and the raw loads'")
    ap.add_argument("--in-flight", type=int, default=0, help="episodes in flight (default: all of them)")
    ap.add_argument("--raw-calls", type=int, default=3000)
    ap.add_argument("--openai-calls", type=int, default=2000)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from emobench.run.runner import run_benchmark

    cases, seeds = episode_grid(args.episodes)
    print(load_line())
    with fake_server(latency_s=LATENCY_S, capacity=CAPACITY) as server, tempfile.TemporaryDirectory() as tmp:
        warm = bench_config(server.base_url, seeds=[0], max_turns=1, min_turns=1, limit_cases=1)
        asyncio.run(run_benchmark(warm, Path(tmp) / "warm", show_progress=False))
        asyncio.run(raw_openai(server.base_url, 20, 4))  # imports openai outside the timing
        server.stats(reset=True)

        # The client-side cap is above the server's, so the server, not the harness, queues.
        config = bench_config(
            server.base_url, seeds=list(range(seeds)), limit_cases=cases, max_turns=args.turns, min_turns=args.turns,
            concurrency=args.in_flight or cases * seeds, max_concurrency=args.concurrency,
        )
        run_dir = Path(tmp) / "run"
        h = measure(lambda: asyncio.run(run_benchmark(config, run_dir, show_progress=False)))
        served = server.stats(reset=True)
        rec = recorded(run_dir)
        if served["requests"] != rec.calls:
            sys.exit(f"the run directory records {rec.calls} calls, the server saw {served['requests']}")
        a = measure(lambda: asyncio.run(raw_aiohttp(server.base_url, args.raw_calls, args.concurrency)))
        plain_served = server.stats(reset=True)
        o = measure(lambda: asyncio.run(raw_openai(server.base_url, args.openai_calls, args.concurrency)))

    span = served["last_end"] - served["first_start"]
    rate, run_rate = rec.calls / span, rec.calls / h.wall_s
    plain, sdk = args.raw_calls / a.wall_s, args.openai_calls / o.wall_s
    service_ms = 1000 * served["busy_s"] / served["requests"]
    print(f"server: {CAPACITY} in service at most (seen {plain_served['max_in_service']}), {1000 * LATENCY_S:.0f} ms each "
          f"(measured {service_ms:.1f} ms: timer overshoot), at most {MAX_RATE:.0f} requests/s")
    print(f"harness: {rec.episodes} episodes x {args.turns} turns, {args.in_flight or rec.episodes} in flight, "
          f"{args.concurrency} requests at most, {rec.calls} calls, "
          f"CPU {1000 * h.cpu_s / rec.calls:.3f} ms per call")
    print(f"saturation, harness: {rate:.0f} requests/s (target >= {TARGET}, ratio {rate / MAX_RATE:.3f}; "
          f"first request to last answer)")
    print(f"saturation, harness over the whole run: {run_rate:.0f} requests/s (ratio {run_rate / MAX_RATE:.3f}; "
          "start-up and the last episodes' tail included)")
    # Slot use sets aside the server's own timer overshoot: how full the harness kept its 16 slots.
    print(f"server slots busy during the harness run: {served['busy_s'] / (CAPACITY * span):.3f} of {CAPACITY} x {span:.1f} s")
    print(f"saturation, plain aiohttp: {plain:.0f} requests/s (ratio {plain / MAX_RATE:.3f}; "
          f"harness / aiohttp {rate / plain:.3f})")
    print(f"saturation, openai.AsyncOpenAI: {sdk:.0f} requests/s (ratio {sdk / MAX_RATE:.3f}; issue 0.32; "
          f"CPU {1000 * o.cpu_s / args.openai_calls:.2f} ms per call)")
    print(load_line())


if __name__ == "__main__":
    main()
