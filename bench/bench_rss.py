"""Benchmark: peak RSS of a 1,000-episode run against a zero-latency server.

1,000 episodes (25 test cases x 40 seeds) x 12 turns go through ``run_benchmark`` with no
response cache; the server runs in its own process. A sampler thread follows this process's
RSS against the bytes in episodes.jsonl, which gives the growth per finished episode and so
how many finished episodes stay in memory. Scoring (``finalize_run``) is left out: it runs the
affect tracker, whose cost and memory ``bench_trackers.py`` measures.

    HF_HUB_OFFLINE=1 python bench/bench_rss.py [--episodes 1000] [--turns 12] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

from _servers import bench_config, episode_grid, fake_server, load_line

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class Sampler(threading.Thread):
    """(RSS MB, bytes of episodes.jsonl) every `every_s` seconds while the run goes."""

    def __init__(self, episodes: Path, every_s: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.episodes, self.every_s = episodes, every_s
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            size = self.episodes.stat().st_size if self.episodes.exists() else 0
            self.samples.append((rss_mb(), size))


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y on x."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--concurrency", type=int, default=64, help="episodes in flight (the config's concurrency)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from emobench.records import Episode
    from emobench.run.runner import run_benchmark
    from emobench.rundir import RunDir

    cases, seeds = episode_grid(args.episodes)
    print(load_line())
    with fake_server() as server, tempfile.TemporaryDirectory() as tmp:
        warm = bench_config(server.base_url, seeds=[0], max_turns=2, min_turns=2, limit_cases=2)
        asyncio.run(run_benchmark(warm, Path(tmp) / "warm", show_progress=False))
        config = bench_config(
            server.base_url, seeds=list(range(seeds)), limit_cases=cases, max_turns=args.turns, min_turns=args.turns,
            concurrency=args.concurrency, max_concurrency=args.concurrency,
        )
        rd = RunDir(Path(tmp) / "run")
        base = rss_mb()
        sampler = Sampler(rd.episodes)
        sampler.start()
        t0 = time.perf_counter()
        asyncio.run(run_benchmark(config, rd.path, show_progress=False))
        wall = time.perf_counter() - t0
        sampler.stop.set()
        sampler.join()
        run_peak = peak_mb()
        after_run = rss_mb()

        lines = rd.episodes.read_bytes().splitlines()
        n = len(lines)
        line_kb = sum(map(len, lines)) / n / 1024
        tracemalloc.start()
        one = Episode.model_validate_json(lines[n // 2])
        record_kb = tracemalloc.get_traced_memory()[0] / 1024
        tracemalloc.stop()
        del one

    # Growth while the middle 80% of the episodes finish: past start-up, before the judging stage.
    total = n * line_kb * 1024
    mid = [(size / total * n, rss) for rss, size in sampler.samples if 0.1 * total <= size <= 0.9 * total]
    per_episode_kb = 1024 * slope(mid) if len(mid) >= 3 else float("nan")
    copies = (run_peak - base) * 1024 / (record_kb * n)
    print(f"episodes: {n} x {args.turns} turns, {args.concurrency} in flight, run wall {wall:.0f} s")
    print(f"RSS before the run: {base:.0f} MB (imports, registry, warm-up)")
    print(f"peak RSS of the run: {run_peak:.0f} MB (ratio {run_peak / base:.2f} of the RSS before it)")
    print(f"RSS growth per finished episode: {per_episode_kb:.0f} KB (one episode: {line_kb:.0f} KB of JSON, "
          f"{record_kb:.0f} KB as a parsed record; ratio growth / record {per_episode_kb / record_kb:.2f})")
    # Growth per episode near one record means every finished episode stays in memory, not only
    # the ones in flight; the post-episode stage then reads all of them back from disk.
    print(f"episodes held in memory at the peak: {copies:.2f} x all {n} records ((peak - before) / ({n} x record); "
          f"only {args.concurrency} are in flight at once)")
    print(f"RSS after the run returned: {after_run:.0f} MB")
    print(load_line())


if __name__ == "__main__":
    main()
