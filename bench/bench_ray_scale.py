"""Benchmark: a long `--ray` run, its driver's memory and the run folder's writes sampled, the
driver SIGKILLed half-way and the run resumed.

A zero-latency fake server runs in its own process. The driver is a process of its own (this
script with ``--driver``), which calls ``run_benchmark(..., ray="local")`` as ``emobench run
--ray --no-cache`` does and then exits: it does not score, which for 10,000 episodes would be
half an hour of the affect tracker's encoder and is measured by bench/bench_scoring.py. Every
second this process samples the driver's RSS, the bytes it has written, the run folder's size
and the episodes finished, into a CSV. When ``--kill-at`` episodes are on disk the driver gets
SIGKILL, Ray's leftover processes are ended, and a second driver resumes the run (``resume``,
``--ray``). The checks: the lines on disk at the kill are kept byte for byte, the run ends with
every episode and judgement once, and the server answered during the resume exactly the calls
that the records written by the resume carry (a finished episode played again would add calls
that no new record holds). ``--plot`` draws the CSV into two SVG figures.

    HF_HUB_OFFLINE=1 python bench/bench_ray_scale.py [--episodes 10000] [--turns 4] [--kill-at 5000]
    python bench/bench_ray_scale.py --plot scale.csv --figures docs/figures
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _servers import bench_config, cpu_line, episode_grid, fake_server, load_line

MARK = "EMOBENCH_BENCH_RAY_SCALE"  # every process of a driver's Ray inherits it: how leftovers are found
SMOOTH = 3  # the write rate is plotted over this many one-second samples
FIELDS = ["t_s", "phase", "episodes", "driver_rss_mb", "workers_rss_mb", "driver_written_mb", "folder_mb", "load1"]


def drive(args: argparse.Namespace) -> None:
    """The driver process: the episodes on a local Ray, no scoring."""
    from emobench.run.runner import run_benchmark

    cases, seeds = episode_grid(args.episodes)
    config = bench_config(
        args.base_url, max_concurrency=args.concurrency, seeds=list(range(seeds)), max_turns=args.turns,
        min_turns=args.turns, concurrency=args.in_flight, limit_cases=cases,
    )
    result = asyncio.run(run_benchmark(config, Path(args.driver), resume=args.resume, show_progress=False, ray="local"))
    print(json.dumps({"new": result.new_episodes, "total": result.total_episodes}), flush=True)


def marked(mark: str) -> list[Any]:
    import psutil

    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(MARK) == mark:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


class Lines:
    """Whole lines of a growing file, counted from the bytes appended since the last look."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.count = path, 0, 0

    def update(self) -> int:
        if self.path.exists():
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
            whole = data.rfind(b"\n") + 1
            self.count += data.count(b"\n")
            self.offset += whole
        return self.count


def folder_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                continue
    return total


@dataclass
class Phase:
    wall_s: float
    requests: int
    episodes_at_end: int
    exit: int | None


def run_phase(
    name: str, cmd: list[str], run_dir: Path, rows: list[dict[str, Any]], t0: float, kill_at: int | None,
    server: Any,
) -> Phase:
    """Start a driver and sample it every second until it exits, or until kill_at episodes are on disk."""
    import psutil

    mark, temp = uuid.uuid4().hex, tempfile.mkdtemp(prefix="ebscale-")
    env = {**os.environ, MARK: mark, "TMPDIR": temp, "OMP_NUM_THREADS": "1"}
    lines = Lines(run_dir / "episodes.jsonl")
    started = time.monotonic()
    driver = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    proc = psutil.Process(driver.pid)
    workers: list[Any] = []
    next_sample = scanned = 0.0
    try:
        while driver.poll() is None:
            now = time.monotonic()
            episodes = lines.update()
            if kill_at is not None and episodes >= kill_at:
                driver.send_signal(signal.SIGKILL)
                driver.wait()
                break
            if now - scanned > 5:  # the workers appear a while after the driver starts
                workers = [p for p in marked(mark) if "EpisodeWorker" in " ".join(p.cmdline())]
                scanned = now
            if now >= next_sample:
                try:
                    rss, written = proc.memory_info().rss, proc.io_counters().write_chars
                except psutil.NoSuchProcess:
                    break
                worker_rss = 0
                for worker in workers:
                    try:
                        worker_rss += worker.memory_info().rss
                    except psutil.NoSuchProcess:
                        continue
                rows.append({
                    "t_s": round(now - t0, 2), "phase": name, "episodes": episodes, "driver_rss_mb": rss / 2**20,
                    "workers_rss_mb": worker_rss / 2**20, "driver_written_mb": written / 2**20,
                    "folder_mb": folder_bytes(run_dir) / 2**20, "load1": os.getloadavg()[0],
                })
                next_sample = now + 1.0
            time.sleep(0.05)
        wall = time.monotonic() - started
        out = driver.stdout.read().decode(errors="replace") if driver.stdout else ""
        if kill_at is None and driver.returncode != 0:
            sys.exit(f"the {name} driver failed ({driver.returncode}): {out[-3000:]}")
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        for leftover in marked(mark):  # a SIGKILLed driver's Ray keeps some of its processes
            try:
                leftover.kill()
            except psutil.NoSuchProcess:
                continue
        shutil.rmtree(temp, ignore_errors=True)
    return Phase(wall, server.stats(reset=True)["requests"], lines.update(), driver.returncode)


def records(path: Path) -> list[dict[str, Any]]:
    import orjson

    return [orjson.loads(line) for line in path.read_bytes().splitlines(keepends=True) if line.endswith(b"\n")]


def calls(lines: list[dict[str, Any]]) -> int:
    return sum(len(record.get("calls", [])) for record in lines)


def slope(rows: list[dict[str, Any]], phase: str, key: str = "driver_rss_mb") -> tuple[float, float, float, float]:
    """(first, middle, last) value of the phase's samples past its workers' start, and the fitted
    slope in MB per 1,000 episodes over those samples."""
    import numpy as np

    mine = [r for r in rows if r["phase"] == phase]
    base = mine[0]["episodes"]
    # From the phase's first episode on (the start is a fixed cost), while the process is there.
    steady = [r for r in mine if r["episodes"] > base and r[key] > 0] or mine
    x = np.array([r["episodes"] for r in steady], dtype=float)
    y = np.array([r[key] for r in steady], dtype=float)
    fit = float(np.polyfit(x, y, 1)[0]) * 1000 if len(set(x)) > 1 else 0.0
    return float(y[0]), float(y[len(y) // 2]), float(y[-1]), fit


def rate(rows: list[dict[str, Any]], phase: str) -> tuple[float, float]:
    """The run folder's growth in MB/s over the phase's episodes, and its bytes per episode."""
    mine = [r for r in rows if r["phase"] == phase and r["episodes"] > 0]
    first, last = mine[0], mine[-1]
    grown, span = last["folder_mb"] - first["folder_mb"], last["t_s"] - first["t_s"]
    return grown / max(span, 1e-9), grown * 2**20 / max(last["episodes"] - first["episodes"], 1)


def plot(csv_path: Path, figures: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(csv_path) as fh:
        rows: list[dict[str, Any]] = [{k: (v if k == "phase" else float(v)) for k, v in row.items()}
                                      for row in csv.DictReader(fh)]
    figures.mkdir(parents=True, exist_ok=True)
    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9})
    colours = {"run": "tab:blue", "resume": "tab:orange"}
    labels = {"run": "first driver (SIGKILLed half-way)", "resume": "resumed driver"}

    fig, ax = plt.subplots(figsize=(6, 3))
    for phase in ("run", "resume"):
        mine = [r for r in rows if r["phase"] == phase]
        ax.plot([r["episodes"] for r in mine], [r["driver_rss_mb"] for r in mine], color=colours[phase], lw=1,
                label=f"{labels[phase]}")
        up = [r for r in mine if r["workers_rss_mb"] > 0]
        ax.plot([r["episodes"] for r in up], [r["workers_rss_mb"] for r in up], color=colours[phase], lw=1, ls="--",
                label="its two workers, summed")
    ax.set(xlabel="episodes finished (on disk)", ylabel="RSS (MiB)", ylim=(0, None))
    ax.legend(loc="lower right", frameon=False)
    fig.tight_layout()
    fig.savefig(figures / "scale-memory.svg")

    fig, (size, speed) = plt.subplots(2, 1, figsize=(6, 4.2), sharex=True)
    for phase in ("run", "resume"):
        mine = [r for r in rows if r["phase"] == phase]
        size.plot([r["t_s"] for r in mine], [r["folder_mb"] for r in mine], color=colours[phase], lw=1, label=labels[phase])
        pairs = list(zip(mine, mine[SMOOTH:], strict=False))  # over SMOOTH samples: the writes come in bursts
        speed.plot([b["t_s"] for _, b in pairs], [(b["folder_mb"] - a["folder_mb"]) / (b["t_s"] - a["t_s"]) for a, b in pairs],
                   color=colours[phase], lw=1)
    size.set(ylabel="run folder (MiB)", ylim=(0, None))
    size.legend(loc="upper left", frameon=False)
    speed.set(xlabel="seconds since the first driver started", ylabel=f"growth, {SMOOTH} s (MiB/s)", ylim=(0, None))
    fig.tight_layout()
    fig.savefig(figures / "scale-writes.svg")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--kill-at", type=int, default=None, help="SIGKILL the driver at this many episodes (default: half)")
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight per role (the endpoint cap)")
    ap.add_argument("--in-flight", type=int, default=64, help="episodes in flight (the run's concurrency)")
    ap.add_argument("--csv", type=Path, default=Path("scale.csv"), help="where the samples go")
    ap.add_argument("--keep", type=Path, default=None, help="keep the run folder here (default: a temporary one)")
    ap.add_argument("--plot", type=Path, metavar="CSV", help="only draw this CSV's figures into --figures")
    ap.add_argument("--figures", type=Path, default=Path("docs/figures"))
    ap.add_argument("--driver", help=argparse.SUPPRESS)  # the driver's own process: its run folder
    ap.add_argument("--base-url", help=argparse.SUPPRESS)
    ap.add_argument("--resume", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.plot:
        return plot(args.plot, args.figures)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.driver:
        return drive(args)
    kill_at = args.kill_at if args.kill_at is not None else args.episodes // 2
    cases, seeds = episode_grid(args.episodes)
    total = cases * seeds
    print(cpu_line())
    print(load_line())
    tmp = Path(tempfile.mkdtemp(prefix="ebscale-run-"))
    run_dir = (args.keep or tmp) / "scale"
    rows: list[dict[str, Any]] = []
    try:
        with fake_server() as server:
            cmd = [sys.executable, __file__, "--driver", str(run_dir), "--base-url", server.base_url, "--episodes",
                   str(args.episodes), "--turns", str(args.turns), "--concurrency", str(args.concurrency),
                   "--in-flight", str(args.in_flight)]
            t0 = time.monotonic()
            server.stats(reset=True)
            first = run_phase("run", cmd, run_dir, rows, t0, kill_at, server)
            if first.exit is not None and first.exit >= 0:
                sys.exit(f"the driver ended ({first.exit}) before {kill_at} episodes were on disk")
            print(f"killed: {first.episodes_at_end} episodes on disk after {first.wall_s:.1f} s; {load_line()}")
            kept = {name: (run_dir / name).read_bytes() for name in ("episodes.jsonl", "judgements.jsonl")}
            kept = {name: data[: data.rfind(b"\n") + 1] for name, data in kept.items()}  # a torn tail is not kept
            second = run_phase("resume", [*cmd, "--resume"], run_dir, rows, t0, None, server)
            print(f"resumed: {second.wall_s:.1f} s; {load_line()}")
        with open(args.csv, "w", newline="") as fh:
            writer = csv.DictWriter(fh, FIELDS)
            writer.writeheader()
            writer.writerows({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()} for r in rows)
        report(run_dir, kept, first, second, rows, total, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(run_dir: Path, kept: dict[str, bytes], first: Phase, second: Phase, rows: list[dict[str, Any]], total: int,
           args: argparse.Namespace) -> None:
    failures = []
    after = {name: (run_dir / name).read_bytes() for name in kept}
    for name, data in kept.items():
        if not after[name].startswith(data):
            failures.append(f"{name}: the lines on disk at the kill were not kept as they were")
    episodes, judgements = records(run_dir / "episodes.jsonl"), records(run_dir / "judgements.jsonl")
    for name, lines in (("episodes", episodes), ("judgements", judgements)):
        keys = [r["key"] for r in lines]
        if len(keys) != total or len(set(keys)) != total:
            failures.append(f"{name}: {len(keys)} records, {len(set(keys))} distinct, {total} expected")
    before_ep = kept["episodes.jsonl"].count(b"\n")
    before_j = kept["judgements.jsonl"].count(b"\n")
    on_kill = calls(episodes[:before_ep]) + calls(judgements[:before_j])
    resumed = calls(episodes[before_ep:]) + calls(judgements[before_j:])
    if second.requests != resumed:
        failures.append(f"the server answered {second.requests} calls during the resume; its new records carry {resumed}")
    print(f"episodes: {total} ({args.turns} turns each, {args.in_flight} in flight, {args.concurrency} calls per role)")
    print(f"at the kill: {before_ep} episodes and {before_j} judgements on disk, carrying {on_kill} calls; the server "
          f"had answered {first.requests} (the rest: episodes in flight, lost with the driver and played again)")
    print(f"the resume: {total - before_ep} episodes, {len(judgements) - before_j} judgements, {second.requests} calls "
          f"answered, {resumed} carried by its records; wall {second.wall_s:.1f} s")
    for phase in ("run", "resume"):
        start, middle, end, fit = slope(rows, phase)
        w_start, w_middle, w_end, w_fit = slope(rows, phase, "workers_rss_mb")
        mbps, per = rate(rows, phase)
        print(f"{phase}: driver RSS {start:.0f} / {middle:.0f} / {end:.0f} MiB (first episode / middle / end), "
              f"slope {fit:+.2f} MiB per 1,000 episodes; workers' RSS {w_start:.0f} / {w_middle:.0f} / {w_end:.0f} MiB, "
              f"slope {w_fit:+.2f}; run folder grew {mbps:.2f} MiB/s, {per / 1024:.1f} KiB per episode")
    print(f"samples in {args.csv}")
    print(load_line())
    if failures:
        sys.exit("FAILED: " + "; ".join(failures))
    print("no finished episode was played again; every episode and judgement is on disk once")


if __name__ == "__main__":
    main()
