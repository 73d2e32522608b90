"""Benchmark: loading the shipped library, read from its files against answered from the
process's memo (a command that needs the cards again, and every in-process test after the first).

Prints each median and their ratio, measured in this one run.

    HF_HUB_OFFLINE=1 python bench/bench_registry_load.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from _servers import cpu_line

from emobench.library_paths import library_root
from emobench.registry.loader import _read_registry, load_registry


def _median_seconds(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    root = library_root()
    load_registry(root)  # fills the memo
    read = _median_seconds(lambda: _read_registry(root), args.repeats)
    memo = _median_seconds(lambda: load_registry(root), args.repeats)
    cases = sum(1 for _ in load_registry(root).all_cases())
    print(cpu_line())
    print(f"library: {cases} cases in {root}")
    print(f"read from files: {read * 1000:.0f} ms; from the memo (files hashed): {memo * 1000:.1f} ms; "
          f"memo / read = {memo / read:.3f}")


if __name__ == "__main__":
    main()
