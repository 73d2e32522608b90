"""How long the command line takes to start, against importing typer and rich alone.

Every command runs as a fresh process, N times, interleaved with the others so that a busy
machine slows all of them alike; the figure is the median wall time. The goal (issue 23):
`emobench --help` within 1.5x of `python -c "import typer, rich.console"`.

    python bench/bench_cli_startup.py                 # this checkout
    python bench/bench_cli_startup.py --before DIR    # also a source tree of another revision
                                                      # (e.g. `git archive REV | tar -x -C DIR`)

Measured on a 2-core AMD EPYC (AVX2, no AVX-512), median of 15, before = commit 4acd22b:
typer + rich 0.116 s; typer + rich + typer.rich_utils 0.189 s (1.63x); `emobench --help`
0.151 s (1.31x; before 0.694 s, 5.99x); `scenarios list` 0.506 s (before 0.845 s);
`leaderboard show` 1.096 s (before 1.207 s: pandas, imported by emobench.publish.runs, is most of it).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EMOBENCH = ["-m", "emobench"]
COMMANDS = {
    "emobench --help": [*EMOBENCH, "--help"],
    "emobench --version": [*EMOBENCH, "--version"],
    "emobench scenarios list": [*EMOBENCH, "scenarios", "list"],
    "emobench leaderboard show": [*EMOBENCH, "leaderboard", "show", str(ROOT / "leaderboard")],
}
BASELINE = "import typer, rich.console"
# What typer's own rich help imports besides: the top-level help is drawn without it.
RICH_HELP = "import typer, rich.console, typer.rich_utils"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def timed(argv: list[str], source: Path | None) -> float:
    env = {**os.environ, "COLUMNS": "120", "HF_HUB_OFFLINE": "1"}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    started = time.perf_counter()
    subprocess.run([sys.executable, *argv], env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   cwd=source or ROOT)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=15, help="runs of each command")
    parser.add_argument("--before", type=Path, help="a source tree of the revision to compare with")
    args = parser.parse_args()

    trees = {"now": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    jobs = {("baseline", BASELINE): (["-c", BASELINE], None), ("baseline", RICH_HELP): (["-c", RICH_HELP], None)}
    for tree, source in trees.items():
        for name, argv in COMMANDS.items():
            if tree == "before" and name == "emobench --version":
                continue  # the flag is new
            jobs[(tree, name)] = (argv, source)
    samples: dict[tuple[str, str], list[float]] = {key: [] for key in jobs}
    for _ in range(args.n):
        for key, (argv, source) in jobs.items():
            samples[key].append(timed(argv, source))

    median = {key: statistics.median(values) for key, values in samples.items()}
    base = median[("baseline", BASELINE)]
    print(f"{cpu_name()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; median of {args.n} runs each")
    for (tree, name), value in median.items():
        print(f"{tree:>8}  {name:<44} {value:6.3f} s   {value / base:5.2f}x baseline")
    ratio = median[("now", "emobench --help")] / base
    print(f"emobench --help / ({BASELINE}) = {ratio:.2f} (goal: at most 1.5)")


if __name__ == "__main__":
    main()
