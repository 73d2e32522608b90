"""Benchmark: the test suite's last time against its budget (whole suite 30 min, quick tier 5 min).

Reads what the last `nox -s tests` and `nox -s quick` left in ~/.cache/emobench/
(tests/tiers.py writes it; EMOBENCH_CACHE moves the folder) and prints each run's wall time as a ratio of its target, each tier's
time and the slowest tests, so a change that doubles a tier shows in the landing that made it.

    python bench/bench_suite_budget.py [--slowest 10] [--dir ~/.cache/emobench]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from emobench.user_cache import cache_root

TARGETS_S = {"tests": 30 * 60, "quick": 5 * 60}


def report(label: str, path: Path, slowest: int) -> list[str]:
    if not path.exists():
        return [f"{label}: no durations at {path}; run `python3 -m nox -s {label}` first"]
    data = json.loads(path.read_text())
    target = TARGETS_S[label]
    wall = float(data["wall_s"])
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(data["finished"]))
    lines = [f"{label}: {wall / 60:.1f} min wall = {wall / target:.2f} x its {target // 60} min target "
             f"({'within' if wall <= target else 'OVER'}; {when}, {data['cpu']}, {data['workers'] or 1} process(es))"]
    lines.append("  each tier's tests, their time summed over the workers:")
    for tier, row in sorted(data["tiers"].items(), key=lambda kv: -kv[1]["seconds"]):
        lines.append(f"  {tier:<9} {row['tests']:>5} tests {row['seconds'] / 60:>6.1f} min")
    tests = sorted(data["tests"].items(), key=lambda kv: -kv[1]["seconds"])[:slowest]
    lines += [f"  {entry['seconds']:>7.1f} s  [{entry['tier']}] {nodeid}" for nodeid, entry in tests]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slowest", type=int, default=10)
    ap.add_argument("--dir", type=Path, default=cache_root())
    args = ap.parse_args()
    for label in TARGETS_S:
        print("\n".join(report(label, args.dir / f"test-durations-{label}.json", args.slowest)))


if __name__ == "__main__":
    main()
