"""Benchmark: build the leaderboard from 100,000 synthetic episodes with 10,000 resamples.

Targets (issue 5): <= 5 s wall and <= 1 GB peak RSS. The synthetic run is written by a child
process, so this process's peak RSS covers only emobench's imports and the build itself.

    python bench/bench_leaderboard.py [--subjects 10] [--cases 2000] [--seeds 5] [--n-boot 10000]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_S = 5.0
TARGET_RSS_MB = 1024.0


def generate(run_dir: Path, subjects: int, cases: int, seeds: int) -> None:
    from tests.synthetic_runs import SubjectTruth, write_run

    truths = [SubjectTruth(f"subject-{i:02d}", 45 + 2 * i, 0.3 + 0.04 * i, fragility=i % 4)
              for i in range(subjects)]
    write_run(run_dir, truths, n_cases=cases, n_seeds=seeds, seed=1, pairwise=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subjects", type=int, default=10)
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--n-boot", type=int, default=10_000)
    ap.add_argument("--generate", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:
        generate(args.generate, args.subjects, args.cases, args.seeds)
        return

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "bench-run"
        subprocess.run(
            [sys.executable, __file__, "--generate", str(run_dir), "--subjects",
             str(args.subjects), "--cases", str(args.cases), "--seeds", str(args.seeds)],
            check=True,
        )
        t0 = time.perf_counter()
        from emobench.publish.leaderboard import build_leaderboard, write_leaderboard

        t_import = time.perf_counter() - t0
        load = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), time.process_time()
        table = build_leaderboard([run_dir], n_boot=args.n_boot, seed=0)
        t_build, c_build = time.perf_counter() - t0, time.process_time() - c0
        t0 = time.perf_counter()
        write_leaderboard(table, Path(tmp) / "out")
        t_write = time.perf_counter() - t0

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    episodes = args.subjects * args.cases * args.seeds
    print(f"episodes            {episodes:,} ({args.subjects} subjects x {args.cases} cases x "
          f"{args.seeds} seeds), {args.n_boot:,} bootstrap resamples, {table.num_rows} rows")
    print(f"import              {t_import:6.2f} s (not counted)")
    print(f"build_leaderboard   {t_build:6.2f} s   ratio to {TARGET_S:g} s target: "
          f"{t_build / TARGET_S:.2f}")
    print(f"  cpu time          {c_build:6.2f} s   (all threads; load average at start "
          f"{load:.1f} on {os.cpu_count()} cores)")
    print(f"write parquet       {t_write:6.2f} s")
    print(f"peak RSS            {rss_mb:6.0f} MB  ratio to {TARGET_RSS_MB:g} MB target: "
          f"{rss_mb / TARGET_RSS_MB:.2f}")


if __name__ == "__main__":
    main()
