"""Benchmark: emobench.env against a zero-latency loopback server, next to `emobench run`.

N episodes x T turns are played twice in one process, with the holistic rubric and the probe
off so both make the same per-turn calls: once through the environment (a fixed policy reply,
many environments in flight sharing one host: endpoint caps and clients), once through
``run_benchmark`` (the subject is a model call there, and episodes are written to disk). The
same number of raw calls then goes through plain aiohttp. Printed: the environment's own CPU
per step beyond its model calls (target <= 1 ms), steps per second, and the ratios.

    HF_HUB_OFFLINE=1 python bench/bench_env.py [--episodes 200] [--turns 12] [--in-flight 64]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

from _servers import bench_config, episode_grid, fake_server, load_line, measure, raw_aiohttp

TARGET_MS = 1.0
REPLY = "That sounds heavy. What part of it weighs on you most right now?"


async def play(config: object, in_flight: int, log_dir: Path) -> int:
    from emobench.env import open_host
    from emobench.run.runner import long_lived_heap

    # The batch layer's GC setting (emobench.run.runner.long_lived_heap), which a trainer can use too.
    async with open_host(config, log_dir=log_dir) as host:  # type: ignore[arg-type]
        gate = asyncio.Semaphore(in_flight)
        jobs = [(case, seed) for case in host.cases() for seed in host.config.seeds]

        async def one(case: object, seed: int) -> int:
            async with gate:
                env = host.make()
                await env.reset(case, seed)  # type: ignore[arg-type]
                steps = 1
                while not (await env.step(REPLY)).done:
                    steps += 1
                return steps

        with long_lived_heap():
            return sum(await asyncio.gather(*(one(c, s) for c, s in jobs)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--in-flight", type=int, default=64, help="episodes in flight")
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight (the endpoint cap)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from emobench.run.runner import run_benchmark

    cases, seeds = episode_grid(args.episodes)
    print(load_line())
    with fake_server() as server, tempfile.TemporaryDirectory() as tmp:
        def config(**extra: object) -> object:
            # dev, not test: an environment refuses the held-out split (emobench/env/held_out.py)
            settings = {"seeds": list(range(seeds)), "limit_cases": cases, "split": "dev", **extra}
            base = bench_config(
                server.base_url, max_concurrency=args.concurrency, max_turns=args.turns, min_turns=args.turns,
                concurrency=args.in_flight, probe=False, **settings,
            )
            return base.model_copy(update={"panel": base.panel.model_copy(update={"holistic": False, "pairwise": False})})

        cfg = config()
        asyncio.run(play(config(limit_cases=2, seeds=[0]), 4, Path(tmp)))  # warm-up
        server.stats(reset=True)
        steps = 0

        def run_env() -> None:
            nonlocal steps
            steps = asyncio.run(play(cfg, args.in_flight, Path(tmp)))

        e = measure(run_env)
        env_calls = server.stats(reset=True)["requests"]
        r = measure(lambda: asyncio.run(run_benchmark(cfg, Path(tmp) / "run", show_progress=False)))  # type: ignore[arg-type]
        run_calls = server.stats(reset=True)["requests"]
        a = measure(lambda: asyncio.run(raw_aiohttp(server.base_url, env_calls, args.concurrency)))

    per_call_raw = a.cpu_s / env_calls
    env_own_ms = 1000 * (e.cpu_s - per_call_raw * env_calls) / steps
    run_own_ms = 1000 * (r.cpu_s - per_call_raw * run_calls) / steps
    print(f"{steps} steps ({cases * seeds} episodes x {args.turns} turns, {args.in_flight} in flight); "
          f"model calls: env {env_calls}, emobench run {run_calls} (its subject is a model call)")
    print(f"env CPU per step beyond its model calls: {env_own_ms:.3f} ms "
          f"(target <= {TARGET_MS:g} ms, ratio {env_own_ms / TARGET_MS:.2f})")
    print(f"emobench run CPU per turn beyond its model calls: {run_own_ms:.3f} ms "
          f"(env / run ratio {env_own_ms / run_own_ms:.2f})")
    print(f"steps per second: env {steps / e.wall_s:.0f}, emobench run {steps / r.wall_s:.0f} turns/s "
          f"(ratio {r.wall_s / e.wall_s:.2f}); plain aiohttp CPU per call {1000 * per_call_raw:.3f} ms")
    print(load_line())


if __name__ == "__main__":
    main()
