"""The affect tracker over a whole run on every core: worker processes, each loading the encoder once.

Scoring after a run is almost all the affect tracker's encoder (docs/scale.md), and one process
runs it on one core (its BLAS is held to one thread, emobench/sentence_encoder.py says why). Here the episodes'
messages are cut into chunks that a pool of processes reads, each with its own tracker loaded
once by the pool's initializer. Each episode is read by the same `AffectTracker.read` call as in
one process, in the same batches, so the readings are identical, not merely close.

The number of workers: the `workers` argument (the CLI has none), else EMOBENCH_SCORING_WORKERS,
else the cores this process may run on (os.sched_getaffinity). One worker reads in this process.

A `Reader` is where the readings are made: `read_locally` here, or a Ray cluster's scoring actors
under `emobench run --ray` (emobench/run/ray_scoring.py), which read the same chunks with the same
calls. Either says where it read and what the reading cost, for the run's manifest.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, Protocol

from emobench.errors import InputError
from emobench.trackers.affect import AffectReading, default_tracker

WORKERS_ENV: Final = "EMOBENCH_SCORING_WORKERS"
# With the worker count left to the cores: fewer episodes than this per worker are read in this
# process, as a pool's start (a fresh interpreter and an encoder per worker, about 2 s) costs
# more than it saves. A count asked for (argument or environment) is used whatever the size.
MIN_EPISODES_PER_WORKER: Final = 24
# Chunks per worker: enough that a slow chunk (long messages) does not leave a core idle at the
# end, few enough that the per-chunk transfer stays small beside the encoder's work.
_CHUNKS_PER_WORKER = 8

Texts = Sequence[Sequence[str]]
Tick = Callable[[int], None]


@dataclass(frozen=True)
class Readings:
    """Every episode's readings, in order, and where they were made."""

    episodes: list[list[AffectReading]]
    where: str  # "local" (this process or its pool) or "ray" (a Ray cluster's scoring actors)
    workers: int  # the processes that read (1: the scoring process itself; 0: nothing to read)
    messages: int
    cpu_s: float  # the readers' CPU seconds while reading (their start and encoder load aside)

    def provenance(self) -> dict[str, Any]:
        """The manifest's "scoring": where it ran, and messages per CPU second (per core)."""
        rate = round(self.messages / self.cpu_s, 1) if self.cpu_s > 0 else None
        return {"where": self.where, "workers": self.workers, "messages": self.messages,
                "read_cpu_s": round(self.cpu_s, 2), "messages_per_cpu_s": rate}


class Reader(Protocol):
    """Reads the episodes' messages (`workers`: the processes asked for, None to decide)."""

    def __call__(self, texts: Texts, workers: int | None = None, tick: Tick | None = None) -> Readings: ...


def cores() -> int:
    """The cores this process may run on (a container's or taskset's limit included)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def scoring_workers(episodes: int, requested: int | None = None, available: int | None = None) -> int:
    """How many processes read the trackers of `episodes` episodes (1: this process alone);
    `available`: the cores to fill, when not this machine's (a Ray cluster's CPUs)."""
    if requested is None:
        raw = os.environ.get(WORKERS_ENV, "").strip()
        if raw:
            if not raw.isdigit() or int(raw) < 1:
                raise InputError(WORKERS_ENV, "", f"expected a positive whole number of processes, got {raw!r}")
            requested = int(raw)
    if requested is not None:
        if requested < 1:
            raise InputError("workers", "", f"expected a positive whole number of processes, got {requested}")
        return min(requested, max(1, episodes))
    return max(1, min(cores() if available is None else available, episodes // MIN_EPISODES_PER_WORKER))


def read_locally(texts: Texts, workers: int | None = None, tick: Tick | None = None) -> Readings:
    """The tracker's readings of each episode's messages, in order, on this machine, by the
    processes `scoring_workers` decides; `tick` hears how many episodes are read so far. More
    than one process are started here (so a script that calls this keeps its top level under
    `if __name__ == "__main__":`, as every spawned process re-imports the script)."""
    messages = sum(len(m) for m in texts)
    if not texts:
        return Readings([], "local", 0, 0, 0.0)
    count = scoring_workers(len(texts), workers)
    if count == 1:
        tracker = default_tracker()
        out = []
        start = time.process_time()
        for done, episode in enumerate(texts, start=1):
            out.append(tracker.read(episode))
            if tick is not None:
                tick(done)
        return Readings(out, "local", 1, messages, time.process_time() - start)
    default_tracker()  # a missing model is refused here, in one line, before any process starts
    parts = chunks(texts, count)
    # spawn, not fork: a forked copy of a process with threads (the event loop's, BLAS's, Ray's)
    # can inherit a held lock. And not forkserver: its workers are not this process's children,
    # so their CPU would be missing from this process's accounts (os.times, bench_scoring.py).
    context = multiprocessing.get_context("spawn")
    out, cpu, count = [], 0.0, min(count, len(parts))
    with ProcessPoolExecutor(max_workers=count, mp_context=context, initializer=_load) as pool:
        for readings, seconds in pool.map(read_chunk, parts):
            out.extend(readings)
            cpu += seconds
            if tick is not None:
                tick(len(out))
    return Readings(out, "local", count, messages, cpu)


def chunks(texts: Texts, workers: int) -> list[list[list[str]]]:
    """The episodes cut into about `_CHUNKS_PER_WORKER` chunks per worker, in order."""
    size = max(1, -(-len(texts) // (workers * _CHUNKS_PER_WORKER)))
    return [[list(m) for m in texts[i : i + size]] for i in range(0, len(texts), size)]


def read_chunk(chunk: list[list[str]]) -> tuple[list[list[AffectReading]], float]:
    """One chunk's readings, as one process reads them, and the CPU seconds they took here."""
    tracker = default_tracker()
    start = time.process_time()
    readings = [tracker.read(messages) for messages in chunk]
    return readings, time.process_time() - start


def _load() -> None:
    default_tracker()
