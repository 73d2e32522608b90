"""Benchmark: `emobench report` on a 1,000-episode run: render time and page size.

Targets (issue 11): the page renders in seconds (<= 5 s per 1,000 episodes) and stays a sensible
file (<= 16 KB per episode). Printed beside the leaderboard build of the same run (parquet and
index.html, 2,000 resamples) measured in the same process, as ratios. The synthetic run (two
judges, 6-12 turns of plausible text per episode) is written by a child process.

    python bench/bench_run_report.py [--cases 167] [--seeds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_S_PER_1000 = 5.0
TARGET_BYTES_PER_EPISODE = 16_000
CHROMIUM = Path("/usr/bin/chromium")


def generate(run_dir: Path, cases: int, seeds: int) -> None:
    from tests.synthetic_runs import SubjectTruth, write_episodes, write_run

    truths = [SubjectTruth("alpha-7b", 63, 0.6, 2), SubjectTruth("beta-8b", 57, 0.45, 5)]
    write_episodes(write_run(run_dir, truths, n_cases=cases, n_seeds=seeds, seed=1))


def _browser_load_s(page: Path, tmp: Path) -> float | None:
    """Seconds for headless Chromium to load the page, run its script and open one episode."""
    if not CHROMIUM.exists():
        return None
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           f"--user-data-dir={tmp / 'profile'}", "--dump-dom", f"{page.as_uri()}#ep=alpha-7b%7Ccase-00000%7C0"]
    subprocess.run(cmd, capture_output=True, timeout=300, check=True)  # warm: profile and caches
    t0 = time.perf_counter()
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
    assert 'class="turn"' in dom, "the episode did not open"
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=167)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--generate", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:
        generate(args.generate, args.cases, args.seeds)
        return

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "bench-run"
        subprocess.run([sys.executable, __file__, "--generate", str(run_dir), "--cases", str(args.cases),
                        "--seeds", str(args.seeds)], check=True)
        from emobench.publish.html import write_page
        from emobench.publish.leaderboard import build_leaderboard, write_leaderboard
        from emobench.viewer.episodes import open_run
        from emobench.viewer.run_report import write_run_report

        load = os.getloadavg()[0]
        # CPU seconds beside wall seconds: on a shared, loaded machine the CPU time is the steadier.
        t0, c0 = time.perf_counter(), time.process_time()
        run = open_run(run_dir)
        t_open, c_open = time.perf_counter() - t0, time.process_time() - c0
        t0, c0 = time.perf_counter(), time.process_time()
        write_run_report(run, run_dir / "report.html")
        t_render, c_render = time.perf_counter() - t0, time.process_time() - c0
        t0, c0 = time.perf_counter(), time.process_time()
        table = build_leaderboard([run_dir], n_boot=2000, seed=0)
        write_leaderboard(table, Path(tmp) / "lb")
        write_page(table, Path(tmp) / "lb", [run_dir])
        t_board, c_board = time.perf_counter() - t0, time.process_time() - c0
        page = run_dir / "report.html"
        size = page.stat().st_size
        source = sum((run_dir / f).stat().st_size for f in ("episodes.jsonl", "judgements.jsonl"))
        t_browser = _browser_load_s(page, Path(tmp))
        shutil.rmtree(Path(tmp) / "profile", ignore_errors=True)

    n = len(run.rows)
    total = t_open + t_render
    per_1000 = total * 1000 / n
    print(f"episodes            {n:,}, {sum(r.n_turns for r in run.rows):,} turns, 2 judges "
          f"(load average at start {load:.1f} on {os.cpu_count()} cores)")
    cpu = c_open + c_render
    print(f"read the run        {t_open:6.2f} s wall, {c_open:6.2f} s cpu")
    print(f"render + write page {t_render:6.2f} s wall, {c_render:6.2f} s cpu")
    print(f"  per 1,000 episodes {per_1000:5.2f} s wall, {cpu * 1000 / n:5.2f} s cpu   ratio to "
          f"{TARGET_S_PER_1000:g} s target: {per_1000 / TARGET_S_PER_1000:.2f} wall, "
          f"{cpu * 1000 / n / TARGET_S_PER_1000:.2f} cpu")
    print(f"  ratio to the leaderboard build of the same run ({t_board:.2f} s wall, {c_board:.2f} s cpu): "
          f"{total / t_board:.2f} wall, {cpu / c_board:.2f} cpu")
    print(f"page size           {size / 1e6:6.2f} MB, {size / n:,.0f} bytes per episode   ratio to "
          f"{TARGET_BYTES_PER_EPISODE:,} B target: {size / n / TARGET_BYTES_PER_EPISODE:.2f}")
    print(f"  ratio to the run's episodes.jsonl + judgements.jsonl: {size / source:.2f}")
    if t_browser is not None:
        print(f"headless Chromium: load, script, open one episode: {t_browser:.2f} s")


if __name__ == "__main__":
    main()
