"""Benchmark: the demo's wall time (``emobench run`` on configs/demo.yaml, no response cache), per server setting.

Each variant runs the whole demo once, as ``nox -s demo`` does once ``.venv`` exists: convert
(cached), start the embedded model's vLLM server, play 2 cases x 4 turns with two subjects,
judge, score, print the leaderboard. Variants:
- ``default``: what emobench does (float32 on a CPU without native bf16; on 4 cores or fewer,
  vLLM's OpenMP workers also get the core its CPU build keeps for the scheduler);
- ``bfloat16``: the embedded model in bfloat16 (``EMOBENCH_EMBEDDED_DTYPE``), the slow case on such a CPU;
- ``reserve1``: vLLM's own thread layout, one core kept for its scheduler.
Prints the CPU, each variant's wall time and its ratio to the first variant, measured in one run.

    HF_HUB_OFFLINE=1 python bench/bench_demo.py [--variants default,reserve1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _servers import cpu_line, load_line

VARIANTS = {
    "default": {},
    "bfloat16": {"EMOBENCH_EMBEDDED_DTYPE": "bfloat16"},
    "reserve1": {"VLLM_CPU_NUM_OF_RESERVED_CPU": "1"},
}


def run_demo(variant: str, out: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("EMOBENCH_EMBEDDED_DTYPE", "VLLM_CPU_NUM_OF_RESERVED_CPU")}
    env.update(VARIANTS[variant], HF_HUB_OFFLINE="1")
    cmd = [sys.executable, "-m", "emobench", "run", "--no-cache", "--no-progress", "--out", str(out), "--run-id", variant]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="default,reserve1")
    args = ap.parse_args()
    print(cpu_line())
    print(load_line(), flush=True)
    walls: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in args.variants.split(","):
            walls[variant] = run_demo(variant, Path(tmp))
            minutes, seconds = divmod(round(walls[variant]), 60)
            first = next(iter(walls.values()))
            print(f"{variant:9s} demo wall time {minutes} min {seconds:02d} s "
                  f"({walls[variant] / first:.2f} of {next(iter(walls))})", flush=True)
    print(load_line())


if __name__ == "__main__":
    main()
