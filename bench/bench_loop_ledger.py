"""Benchmark: where the harness's own CPU per model call goes, function by function, in a live run.

The run of ``bench_overhead.py`` (N episodes x 12 turns against the zero-latency fake server),
with the episode loop's, the judges' and the run folder's synchronous steps each wrapped in a
CPU-time counter (``time.thread_time``) where the caller looks it up. Each step is then printed
as CPU per model call, share of the run's CPU, count and CPU per use; the same steps are also
timed alone in a tight loop on one of the run's own inputs, from its second half (a list the
run goes on growing is timed at its final length, which only makes "alone" slower), for the
slowdown that running between socket calls and other episodes' steps puts on the same code.

A wrapped step costs about 1 us more per use (two clock reads); nested steps count twice. What
no step covers is aiohttp, asyncio and the coroutines' own glue: that remainder is held against
plain aiohttp's CPU per call for the same number of calls (``bench_overhead.py``'s floor), the
ratio the run would have with every step listed here at no cost at all.

    HF_HUB_OFFLINE=1 python bench/bench_loop_ledger.py [--episodes 210] [--turns 12]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import tempfile
import time
import timeit
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
from _servers import bench_config, episode_grid, fake_server, load_line, measure, raw_aiohttp

# (module, name): the name as the calling module looks it up, so the wrapper is what runs.
STEPS = [
    ("emobench.judging.stage", "audit_episode"),
    ("emobench.judging.stage", "append_line"),
    ("emobench.judging.mdep", "judge_messages"),
    ("emobench.judging.mdep", "parse_mdep"),
    ("emobench.judging.mdep", "aggregate"),
    ("emobench.judging.mdep", "derive_seed"),
    ("emobench.judging.holistic", "holistic_messages"),
    ("emobench.judging.holistic", "parse_holistic"),
    ("emobench.episode.stepper", "simulator_messages"),
    ("emobench.episode.stepper", "parse_user_move"),
    ("emobench.episode.stepper", "subject_messages"),
    ("emobench.episode.stepper", "derive_seed"),
    ("emobench.episode.stepper", "rule_director"),
    ("emobench.episode.stepper", "apply_action"),
    ("emobench.episode.stepper", "simulator_guidance"),
    ("emobench.episode.stepper", "visible_reply"),
    ("emobench.episode.stepper", "Turn"),
    ("emobench.episode.stepper", "EPMPoint"),
    ("emobench.episode.stepper", "DirectorState"),
    ("emobench.episode.probe", "probe_messages"),
    ("emobench.episode.probe", "parse_probe"),
    ("emobench.episode.roles", "ModelCall"),
    ("emobench.endpoints.client", "chat_params"),
    ("emobench.endpoints.client", "Completion"),
]
# (class path, method)
METHODS = [
    ("emobench.trackers.epm.EPMEngine", "step"),
    ("emobench.episode.stepper.EpisodeState", "episode"),
    ("emobench.rundir.RunDir", "append_episode"),
]


class Ledger:
    def __init__(self) -> None:
        self.cpu: Counter[str] = Counter()
        self.uses: Counter[str] = Counter()
        self.samples: dict[str, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = {}

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        clock, cpu, uses, samples = time.thread_time, self.cpu, self.uses, self.samples

        def counted(*args: Any, **kwargs: Any) -> Any:
            started = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                cpu[label] += clock() - started
                uses[label] += 1
                n = uses[label]
                if n & (n - 1) == 0:  # the input of the last power-of-two use: from the run's second half
                    samples[label] = (fn, args, kwargs)

        return counted

    def install(self) -> None:
        for module, name in STEPS:
            owner = importlib.import_module(module)
            setattr(owner, name, self.wrap(f"{name} ({module.rsplit('.', 1)[1]})", getattr(owner, name)))
        for path, name in METHODS:
            module, cls = path.rsplit(".", 1)
            owner = getattr(importlib.import_module(module), cls)
            setattr(owner, name, self.wrap(f"{cls}.{name}", getattr(owner, name)))
        client = importlib.import_module("emobench.endpoints.client")
        client.orjson = SimpleNamespace(  # type: ignore[attr-defined]
            dumps=self.wrap("orjson.dumps (client)", orjson.dumps),
            loads=self.wrap("orjson.loads (client)", orjson.loads),
            JSONDecodeError=orjson.JSONDecodeError,
        )

    def reset(self) -> None:
        self.cpu.clear()
        self.uses.clear()
        self.samples.clear()


def alone_us(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
    runs = max(1, int(0.02 / max(timeit.timeit(lambda: fn(*args, **kwargs), number=1), 1e-7)))
    return 1e6 * min(timeit.repeat(lambda: fn(*args, **kwargs), number=runs, repeat=5)) / runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=210)
    ap.add_argument("--turns", type=int, default=12)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from emobench.run.runner import run_benchmark

    ledger = Ledger()
    ledger.install()
    cases, seeds = episode_grid(args.episodes)
    print(load_line())
    with fake_server() as server, tempfile.TemporaryDirectory() as tmp:
        config = bench_config(
            server.base_url, seeds=list(range(seeds)), max_turns=args.turns, min_turns=args.turns,
            concurrency=args.episodes, limit_cases=cases,
        )
        warm = bench_config(server.base_url, seeds=[0], max_turns=2, min_turns=2, limit_cases=2)
        asyncio.run(run_benchmark(warm, Path(tmp) / "warm", show_progress=False))
        server.stats(reset=True)
        ledger.reset()
        started = time.process_time()
        asyncio.run(run_benchmark(config, Path(tmp) / "run", show_progress=False))
        cpu = time.process_time() - started
        calls = server.stats()["requests"]
        # Timed alone while the run folder (which append_line / append_episode write) still exists.
        alone = {label: alone_us(*sample) for label, sample in ledger.samples.items()}
        floor = measure(lambda: asyncio.run(raw_aiohttp(server.base_url, calls, 16))).cpu_s
    print(f"run: {calls} calls, {cpu:.2f} s of CPU, {1000 * cpu / calls:.3f} ms per call")
    print(f"{'ms/call':>8} {'share':>6} {'uses':>7} {'us/use':>8} {'alone':>8} {'live/alone':>10}  step")
    covered = 0.0
    for label, spent in ledger.cpu.most_common():
        covered += spent
        per_use = 1e6 * spent / ledger.uses[label]
        solo = alone.get(label)
        ratio = f"{per_use / solo:10.1f}" if solo else f"{'':>10}"
        print(f"{1000 * spent / calls:8.4f} {spent / cpu:6.1%} {ledger.uses[label]:7d} {per_use:8.1f} "
              f"{solo or 0:8.1f} {ratio}  {label}")
    print(f"the steps together: {1000 * covered / calls:.3f} ms per call, {covered / cpu:.1%} of the run's CPU")
    rest = cpu - covered
    print(f"plain aiohttp: {1000 * floor / calls:.3f} ms per call; the run {cpu / floor:.2f}x that, and with every "
          f"step above at no cost {rest / floor:.2f}x ({1000 * rest / calls:.3f} ms per call)")
    print(load_line())


if __name__ == "__main__":
    main()
