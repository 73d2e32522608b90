"""Benchmark: scoring a run (``finalize_run``) in one process and on every core, back to back.

N episodes x 12 turns are played against the fake server, then the same run folder is scored
twice: with one process (the serial path) and with a pool of worker processes
(emobench/trackers/pool.py); with --ray a third time, by scoring actors on a local Ray of as
many CPUs (emobench/run/ray_scoring.py, as `emobench run --ray` scores). All write the same
scores.parquet (checked here). For each: wall seconds, CPU seconds of this process and of its
workers (under Ray: every process of the Ray this started, its daemons included), and what
that makes per core. Beside them, the encoder's matmul bound: the multiply-adds one message
costs (from its token count and the model's shapes) over what one core does in a numpy float32
matmul of the encoder's shapes.

    HF_HUB_OFFLINE=1 python bench/bench_scoring.py [--episodes 1020] [--workers N] [--rounds R] [--ray]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _servers import bench_config, cpu_line, episode_grid, fake_server, load_line


@dataclass(frozen=True)
class Timed:
    wall_s: float
    own_cpu_s: float
    workers_cpu_s: float
    machine_busy_s: float  # every process's CPU on the machine meanwhile, this one's included
    machine_idle_s: float

    @property
    def cpu_s(self) -> float:
        return self.own_cpu_s + self.workers_cpu_s


def machine_ticks() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine so far, from /proc/stat (Linux)."""
    fields = [float(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields[:8]) - idle) / hz, idle / hz


class RayCPU:
    """CPU seconds of the Ray this process started (its daemons, idle workers and actors: all
    its descendants), from a baseline; sampled at every tick too, as a scoring actor is killed,
    its CPU gone from any account, as soon as the last chunk is read."""

    def __init__(self) -> None:
        import psutil

        self._me = psutil.Process()
        self.actors: set[int] = set()  # the scoring actors' processes, apart from Ray's own
        self.base = self._now()
        self.seen = dict(self.base)

    def _now(self) -> dict[int, float]:
        import psutil

        out = {}
        for proc in self._me.children(recursive=True):
            try:
                times = proc.cpu_times()
                out[proc.pid] = times.user + times.system
                if "ScoringActor" in " ".join(proc.cmdline()):
                    self.actors.add(proc.pid)
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
        return out

    def sample(self) -> None:
        self.seen.update(self._now())

    def spent(self, pids: set[int] | None = None) -> float:
        self.sample()
        return sum(cpu - self.base.get(pid, 0.0) for pid, cpu in self.seen.items() if pids is None or pid in pids)


def score(run: Path, workers: int, reader: Any = None) -> Timed:
    from emobench.registry import load_registry
    from emobench.run.finalize import finalize_run
    from emobench.rundir import RunDir

    registry = load_registry(Path(__file__).resolve().parents[1])
    ray_cpu = RayCPU() if reader is not None else None
    busy, idle = machine_ticks()
    before, t0 = os.times(), time.perf_counter()
    if ray_cpu is None:
        finalize_run(RunDir(run), registry, workers=workers)
    else:
        finalize_run(RunDir(run), registry, workers=workers, reader=reader, tick=lambda *_: ray_cpu.sample())
    wall, after = time.perf_counter() - t0, os.times()
    busy_after, idle_after = machine_ticks()
    # The pool's processes are this process's children, reaped when it closes: os.times has them.
    # Ray's are not reaped while it runs: they are read from /proc (RayCPU).
    children = after.children_user + after.children_system - before.children_user - before.children_system
    if ray_cpu is not None:
        actors = ray_cpu.spent(ray_cpu.actors)
        print(f"  Ray's processes: {len(ray_cpu.actors)} scoring actors {actors:.1f} s CPU (their start and "
              f"encoder load included), the rest of Ray {ray_cpu.spent() - actors:.1f} s", flush=True)
    return Timed(
        wall,
        after.user + after.system - before.user - before.system,
        ray_cpu.spent() if ray_cpu is not None else max(0.0, children),
        busy_after - busy,
        idle_after - idle,
    )


def matmul_gflops(rows: int, hidden: int, ffn: int, seconds: float = 2.0) -> float:
    """One core's float32 GFLOP/s per CPU second on the encoder's widest product (rows x hidden @ hidden x ffn)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a = rng.standard_normal((rows, hidden), dtype=np.float32)
    b = rng.standard_normal((hidden, ffn), dtype=np.float32)
    out = np.empty((rows, ffn), dtype=np.float32)
    with threadpool_limits(limits=1, user_api="blas"):
        np.matmul(a, b, out=out)
        # CPU seconds, as for the messages per core: time off the core (a shared machine) is not counted.
        n, t0 = 0, time.process_time()
        while time.process_time() - t0 < seconds:
            np.matmul(a, b, out=out)
            n += 1
        elapsed = time.process_time() - t0
    return 2 * rows * hidden * ffn * n / elapsed / 1e9


def encoder_flops(token_counts: list[int]) -> tuple[float, dict[str, int]]:
    """Mean FLOPs per message (2 per multiply-add) of the encoder's products, unpadded."""
    from emobench.sentence_encoder import _model_dir

    config = json.loads((_model_dir() / "config.json").read_text())
    h, ffn, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    total = 0.0
    for t in token_counts:
        dense = 2 * t * h * (3 * h + h + 2 * ffn)  # qkv, attention output, feed-forward up and down
        attention = 2 * 2 * t * t * h  # scores and context, every head together
        total += layers * (dense + attention)
    return total / len(token_counts), {"hidden": h, "ffn": ffn, "layers": layers}


def describe(label: str, t: Timed, episodes: int, messages: int) -> str:
    return (
        f"{label}: wall {t.wall_s:.1f} s, CPU {t.cpu_s:.1f} s (this process {t.own_cpu_s:.1f}, workers "
        f"{t.workers_cpu_s:.1f}); wall / CPU {t.wall_s / t.cpu_s:.2f}; {1000 * t.cpu_s / episodes:.0f} ms CPU per "
        f"episode; {messages / t.cpu_s:.0f} messages per second per core\n  cores used {t.cpu_s / t.wall_s:.2f}; "
        f"the machine meanwhile: {t.machine_busy_s / t.wall_s:.2f} cores busy ({(t.machine_busy_s - t.cpu_s) / t.wall_s:.2f} "
        f"by other processes), {t.machine_idle_s / t.wall_s:.2f} idle"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=1020)
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--workers", type=int, default=None, help="the pool's processes (default: the cores)")
    ap.add_argument("--rounds", type=int, default=1, help="times each is scored, alternating")
    ap.add_argument("--ray", action="store_true", help="also score with Ray scoring actors on a local Ray "
                    "of --workers CPUs (needs the ray extra)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import pyarrow.parquet as pq

    from emobench.run.runner import run_benchmark
    from emobench.rundir import RunDir
    from emobench.sentence_encoder import Encoder
    from emobench.trackers.affect import default_tracker
    from emobench.trackers.pool import cores

    workers = args.workers or cores()
    print(cpu_line())
    print(f"cores this process may use: {cores()}; pool workers: {workers}")
    print(load_line())
    cases, seeds = episode_grid(args.episodes)
    with tempfile.TemporaryDirectory() as tmp:
        played = Path(tmp) / "played" / "run"
        with fake_server() as server:
            config = bench_config(
                server.base_url, seeds=list(range(seeds)), max_turns=args.turns, min_turns=args.turns,
                concurrency=64, limit_cases=cases,
            )
            asyncio.run(run_benchmark(config, played, show_progress=False))
        texts = [t.user.message for e in RunDir(played).read_episodes() for t in e.turns]
        default_tracker()  # loaded before either timing: a run's preflight loads it too
        episodes = len(RunDir(played).read_episodes())
        # Rounds alternate them, so that a shared machine's load falls on each alike.
        labels = ("serial", "parallel", "ray") if args.ray else ("serial", "parallel")
        timed: dict[str, list[Timed]] = {label: [] for label in labels}
        tables = {}
        reader = None
        ray_temp = tempfile.mkdtemp(prefix="ebray-", dir="/tmp")  # Ray's sockets need a short path
        for round_ in range(1, args.rounds + 1):
            for label in labels:
                count = 1 if label == "serial" else workers
                if label == "ray" and reader is None:  # started once, after the first round's others
                    reader = start_ray(workers, ray_temp)
                run = Path(tmp) / f"{label}-{round_}" / "run"  # one folder name: run_id is in every row
                shutil.copytree(played, run)
                print(f"round {round_}, {label}: scoring {episodes} episodes ({len(texts)} user messages) "
                      f"with {count} process(es)...", flush=True)
                t = score(run, count, reader if label == "ray" else None)
                timed[label].append(t)
                print(describe(label, t, episodes, len(texts)), flush=True)
                tables[label] = pq.read_table(RunDir(run).scores)
                if label == "ray":
                    print(f"  the manifest's scoring: {RunDir(run).read_manifest()['scoring']}", flush=True)
                shutil.rmtree(run.parent)
            for label in labels[1:]:
                if not tables[label].equals(tables["serial"]):
                    sys.exit(f"the {label} scores.parquet differs from the serial one")
        if reader is not None:
            reader.ray.shutdown()
        shutil.rmtree(ray_temp, ignore_errors=True)
        tokens = [len(ids) for ids in Encoder.load().token_ids(texts)]
    flops, shape = encoder_flops(tokens)
    gflops = matmul_gflops(256, shape["hidden"], shape["ffn"])
    best = {label: min(timed[label], key=lambda t: t.wall_s) for label in labels}
    s = best["serial"]
    print(f"scores identical: yes ({episodes} rows, every round)")
    for label, t in best.items():
        print(f"best of {args.rounds}: " + describe(label, t, episodes, len(texts)))
    for label in labels[1:]:
        rounds = ", ".join(f"{a.wall_s / b.wall_s:.2f}" for a, b in zip(timed["serial"], timed[label], strict=True))
        print(f"ratio serial wall / {label} wall: {s.wall_s / best[label].wall_s:.2f} (best of each, {workers} "
              f"workers; by round: {rounds})")
    print(f"serial CPU / serial wall: {s.cpu_s / s.wall_s:.2f} (above 1 would mean BLAS threads at work)")
    print(f"encoder: {shape['layers']} layers, hidden {shape['hidden']}, feed-forward {shape['ffn']}; "
          f"{sum(tokens) / len(tokens):.1f} tokens per message; {flops / 1e6:.0f} MFLOP per message (unpadded)")
    print(f"one core's numpy float32 matmul (256x{shape['hidden']} @ {shape['hidden']}x{shape['ffn']}): "
          f"{gflops:.1f} GFLOP/s -> matmul bound {gflops * 1e9 / flops:.0f} messages per second per core")
    print(load_line())


def start_ray(cpus: int, temp: str) -> Any:
    """A local Ray of `cpus` CPUs, as `emobench run --ray` starts one, and its scoring reader."""
    import ray

    from emobench.run.ray_scoring import RayReader

    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR, _temp_dir=temp)
    return RayReader(ray, print)


if __name__ == "__main__":
    main()
