"""Benchmark: `run --ray` on a local Ray cluster against the local batch layer, one server, one sitting.

N episodes x 12 turns (min_turns = max_turns = 12) go through ``run_benchmark`` twice against the
same zero-latency fake server (its own process, not counted): once locally, once split over
``--ray-cpus`` local processes at once (each with its share of the episodes and caps: the Ray
run's shape without Ray), once with ``ray="local"`` on a Ray this script starts (``--ray-cpus``
workers). The local figure is this
process's CPU; the Ray figure adds every Ray process's (driver, workers, raylet, GCS, agents),
read from /proc every 50 ms by a sampler process of its own. Ray's start and each run's
workers' start (measured on a 1-episode run) are reported apart, as fixed costs. Ray starts
first and stays up; ``--repeat N`` plays the three N times in turn and prints the median ratio
(the same code measured 1.21 and 1.76 in two runs back to back: one run's ratio is not a figure).

    HF_HUB_OFFLINE=1 python bench/bench_ray.py [--episodes 1000] [--turns 12] [--ray-cpus 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _servers import Measured, bench_config, cpu_line, episode_grid, fake_server, load_line, measure, recorded

MARK = "EMOBENCH_BENCH_RAY"  # set before Ray starts: every Ray process inherits it, the server does not
ACTORS = {"EpisodeWorker": "workers", "EndpointBudget": "budget"}  # the rest is Ray's own (raylet, GCS, agents)
AIM = 1.3  # --ray's CPU per call beyond the fixed cost, at most this times the local run's


def sample(mark: str) -> None:
    """The sampler process: from "start" to "stop" on stdin, the CPU seconds spent by the
    processes holding the mark, each read every 50 ms (one that ends between reads loses at most
    that); processes there at "start" count from their CPU then, later ones from zero. Not itself:
    it holds the mark too."""
    import threading

    import psutil

    def marked(known: dict[int, psutil.Process]) -> None:
        for proc in psutil.process_iter():
            try:
                if proc.pid not in known and proc.pid != os.getpid() and proc.environ().get(MARK) == mark:
                    known[proc.pid] = proc
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue

    def read(procs: dict[int, psutil.Process], into: dict[int, float]) -> None:
        for pid, proc in list(procs.items()):
            try:
                t = proc.cpu_times()
                into[pid] = t.user + t.system
                title = " ".join(proc.cmdline())  # Ray titles an actor's process with its class
                kinds[pid] = next((kind for actor, kind in ACTORS.items() if actor in title), kinds.get(pid, "ray"))
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                del procs[pid]

    procs: dict[int, psutil.Process] = {}
    kinds: dict[int, str] = {}
    base: dict[int, float] = {}
    last: dict[int, float] = {}
    sys.stdin.readline()
    marked(procs)
    read(procs, base)
    stop = threading.Event()

    def wait_for_stop() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=wait_for_stop, daemon=True).start()
    scanned = time.monotonic()
    while not stop.is_set():
        time.sleep(0.05)
        if time.monotonic() - scanned > 0.5:  # a run's workers appear at its start
            marked(procs)
            scanned = time.monotonic()
        read(procs, last)
    print(json.dumps({k: sum(cpu - base.get(pid, 0.0) for pid, cpu in last.items() if kinds.get(pid, "ray") == k)
                      for k in ("workers", "budget", "ray")}), flush=True)


def part(args: argparse.Namespace, url: str, index: int, parts: int) -> None:
    """One of `parts` local processes playing the grid's seeds index, index + parts, ... with the
    caps and episodes in flight split as among Ray's workers: prints its CPU and wall once told to go."""
    from emobench.run.runner import run_benchmark

    cases, seeds = episode_grid(args.episodes)
    config = bench_config(
        url, max_concurrency=args.concurrency // parts, seeds=list(range(seeds))[index::parts], max_turns=args.turns,
        min_turns=args.turns, concurrency=args.in_flight // parts, limit_cases=cases,
    )
    with tempfile.TemporaryDirectory() as tmp:
        def run(name: str, cfg: object) -> None:
            asyncio.run(run_benchmark(cfg, Path(tmp) / name, show_progress=False))  # type: ignore[arg-type]

        run("warm", bench_config(url, seeds=[0], max_turns=2, min_turns=2, limit_cases=1))
        print("ready", flush=True)
        sys.stdin.readline()
        done = measure(lambda: run("part", config))
    print(json.dumps({"cpu_s": done.cpu_s, "wall_s": done.wall_s}), flush=True)


def split_locally(args: argparse.Namespace, server: Any, parts: int) -> tuple[Measured, int]:
    """The Ray run's shape without Ray: `parts` local processes at once, each with its share of the
    episodes and caps. Their CPU, the wall of the slowest, and the calls the server answered them."""
    url = server.base_url
    argv = [sys.executable, __file__, "--episodes", str(args.episodes), "--turns", str(args.turns),
            "--concurrency", str(args.concurrency), "--in-flight", str(args.in_flight)]
    procs = [subprocess.Popen([*argv, "--part", url, str(i), str(parts)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) for i in range(parts)]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    server.stats(reset=True)  # their warm-up runs' calls are not the run's
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    done = [json.loads(proc.communicate(timeout=1800)[0]) for proc in procs]
    return Measured(sum(d["cpu_s"] for d in done), max(d["wall_s"] for d in done)), server.stats(reset=True)["requests"]


def report(args: argparse.Namespace, rep: int, calls: int, local: Measured, split: Measured, run_cpu: dict[str, float],
           start_cpu: dict[str, float], fixed_calls: int, ray_wall_s: float) -> float:
    """Print one turn's figures; return its ratio (--ray / local, CPU per call beyond the fixed cost)."""
    local_ms = 1000 * local.cpu_s / calls
    per = {k: 1000 * v / calls for k, v in run_cpu.items()}
    # Each process's CPU per call beyond a run's fixed cost (the 1-episode run: the workers' start).
    beyond = {k: 1000 * (run_cpu[k] - start_cpu[k]) / (calls - fixed_calls) for k in run_cpu}
    ray_ms, marginal_ms = sum(per.values()), sum(beyond.values())
    ratio = marginal_ms / local_ms
    print(f"turn {rep + 1}, {load_line()}")
    print(f"calls: {calls} per run ({args.episodes} episodes x {args.turns} turns, {args.concurrency} per role in flight, "
          f"{args.in_flight} episodes in flight)")
    print(f"local batch layer: CPU {local_ms:.3f} ms per call, wall {local.wall_s:.1f} s")
    print(f"--ray ({args.ray_cpus} workers): CPU {ray_ms:.3f} ms per call (driver {per['driver']:.3f}, workers "
          f"{per['workers']:.3f}, budget actor {per['budget']:.3f}, Ray's own processes {per['ray']:.3f}), "
          f"wall {ray_wall_s:.1f} s")
    print(f"--ray per call beyond a run's fixed cost: CPU {marginal_ms:.3f} ms (driver {beyond['driver']:.3f}, workers "
          f"{beyond['workers']:.3f}, budget actor {beyond['budget']:.3f}, Ray's own processes {beyond['ray']:.3f})")
    print(f"ratio --ray / local, CPU per call beyond the fixed cost: {ratio:.2f} against the aim of {AIM} "
          f"({'met' if ratio <= AIM else 'missed'}); with the fixed cost {ray_ms / local_ms:.2f}; "
          f"without Ray's own processes {(marginal_ms - beyond['ray']) / local_ms:.2f}; "
          f"the workers alone {beyond['workers'] / local_ms:.2f}; wall {ray_wall_s / local.wall_s:.2f}")
    print(f"the same split over {args.ray_cpus} local processes at once, no Ray: CPU {1000 * split.cpu_s / calls:.3f} ms "
          f"per call, wall {split.wall_s:.1f} s; the workers' CPU per call beyond the fixed cost / theirs: "
          f"{beyond['workers'] / (1000 * split.cpu_s / calls):.2f}")
    return ratio


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--ray-cpus", type=int, default=2, help="the local Ray's CPUs: one worker process each")
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight per role (the endpoint cap)")
    ap.add_argument("--in-flight", type=int, default=64, help="episodes in flight (the run's concurrency)")
    ap.add_argument("--repeat", type=int, default=1, help="turns of local, split and Ray runs in one sitting")
    ap.add_argument("--sample", metavar="MARK", help=argparse.SUPPRESS)  # the CPU sampler's own process
    ap.add_argument("--part", nargs=3, help=argparse.SUPPRESS)  # URL I N: one of the N local processes
    args = ap.parse_args()
    if args.sample:
        return sample(args.sample)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.part:
        return part(args, args.part[0], int(args.part[1]), int(args.part[2]))

    import ray

    from emobench.run.runner import run_benchmark

    cases, seeds = episode_grid(args.episodes)
    if seeds < args.ray_cpus:  # the split control gives each local process its own seeds
        ap.error(f"--episodes {args.episodes} is {seeds} seed(s) of 25 cases; the split over {args.ray_cpus} processes "
                 f"needs at least {25 * (args.ray_cpus - 1) + 1} episodes")
    print(cpu_line())
    print(load_line())
    with fake_server() as server, tempfile.TemporaryDirectory() as tmp:
        config = bench_config(
            server.base_url, max_concurrency=args.concurrency, seeds=list(range(seeds)), max_turns=args.turns,
            min_turns=args.turns, concurrency=args.in_flight, limit_cases=cases,
        )
        warm = bench_config(server.base_url, seeds=[0], max_turns=2, min_turns=2, limit_cases=1)

        def run(name: str, cfg: object, **kwargs: object) -> None:
            asyncio.run(run_benchmark(cfg, Path(tmp) / name, show_progress=False, **kwargs))  # type: ignore[arg-type]

        run("warm", warm)  # imports, templates and the first connections are not per-call costs
        mark = uuid.uuid4().hex
        os.environ[MARK] = mark  # before Ray starts (the split processes and sampler inherit it too: not counted)
        temp = tempfile.mkdtemp(prefix="ebbench-")
        started = time.perf_counter()
        ray.init(num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                 _temp_dir=temp)
        ray_start_s = time.perf_counter() - started

        def sampled(work: Callable[[], object]) -> tuple[Measured, dict[str, float]]:
            """This process's CPU and wall while work runs, and the CPU of the workers and of Ray's own processes."""
            sampler = subprocess.Popen([sys.executable, __file__, "--sample", mark], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True)
            assert sampler.stdin is not None
            sampler.stdin.write("start\n")
            sampler.stdin.flush()
            driver = measure(work)
            return driver, json.loads(sampler.communicate("stop\n", timeout=60)[0])

        def on_ray(name: str, cfg: object) -> tuple[Measured, dict[str, float], int]:
            server.stats(reset=True)
            driver, others = sampled(lambda: run(name, cfg, ray="local"))
            return driver, others, server.stats(reset=True)["requests"]

        ratios: list[float] = []
        try:
            # A 1-episode run: the workers' start (imports, registry, role binding), paid once per run.
            fixed, fixed_other, fixed_calls = on_ray("ray-warm", warm)
            _, idle = sampled(lambda: time.sleep(10))  # Ray's own processes with nothing to do
            start_cpu = {"driver": fixed.cpu_s, **fixed_other}
            for rep in range(args.repeat):  # local, split and Ray in turn: the ratio of each turn
                server.stats(reset=True)
                local = measure(lambda rep=rep: run(f"local{rep}", config))  # type: ignore[misc]
                calls = server.stats(reset=True)["requests"]
                if calls != recorded(Path(tmp) / f"local{rep}").calls:
                    sys.exit("the local run's records and the server disagree on the number of calls")
                split, split_calls = split_locally(args, server, args.ray_cpus)
                if split_calls != calls:
                    sys.exit("the split local processes made another number of calls than the local run")
                ray_run, other, ray_calls = on_ray(f"ray{rep}", config)
                if ray_calls != calls or recorded(Path(tmp) / f"ray{rep}").calls != calls:
                    sys.exit(f"the Ray run made {ray_calls} calls, the local run {calls}")
                ratios.append(report(args, rep, calls, local, split, {"driver": ray_run.cpu_s, **other}, start_cpu,
                                     fixed_calls, ray_run.wall_s))
        finally:
            ray.shutdown()
            shutil.rmtree(temp, ignore_errors=True)

    print(f"fixed costs: Ray start {ray_start_s:.1f} s wall once; per run, the workers' start {fixed.wall_s:.1f} s wall "
          f"and {sum(start_cpu.values()):.1f} s CPU (a 1-episode run, {fixed_calls} calls); Ray's own processes idle: "
          f"{sum(idle.values()) / 10:.3f} CPU s per s")
    if len(ratios) > 1:
        print(f"ratio --ray / local over {len(ratios)} turns: {', '.join(f'{r:.2f}' for r in ratios)}; median "
              f"{statistics.median(ratios):.2f} against the aim of {AIM}")
    print(load_line())


if __name__ == "__main__":
    main()
