"""The affect tracker over a whole run on every core: worker processes, each loading the encoder once.

Scoring after a run is almost all the affect tracker's encoder (docs/scale.md), and one process
runs it on one core (its BLAS is held to one thread, emobench/sentence_encoder.py says why). Here the episodes'
messages are cut into chunks that a pool of processes reads, each with its own tracker loaded
once by the pool's initializer. Each episode is read by the same `AffectTracker.read` call as in
one process, in the same batches, so the readings are identical, not merely close.

The number of workers: the `workers` argument (the CLI has none), else EMOBENCH_SCORING_WORKERS,
else the cores this process may run on (os.sched_getaffinity). One worker reads in this process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Final

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


def cores() -> int:
    """The cores this process may run on (a container's or taskset's limit included)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def scoring_workers(episodes: int, requested: int | None = None) -> int:
    """How many processes read the trackers of `episodes` episodes (1: this process alone)."""
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
    return max(1, min(cores(), episodes // MIN_EPISODES_PER_WORKER))


def read_episodes(
    texts: Texts, workers: int = 1, tick: Callable[[int], None] | None = None
) -> list[list[AffectReading]]:
    """The tracker's readings of each episode's messages, in order; `tick` hears how many
    episodes are read so far. workers > 1 reads them in that many processes, started here (so a
    script that calls this keeps its top level under `if __name__ == "__main__":`, as every
    spawned process re-imports the script)."""
    if not texts:
        return []
    if workers <= 1 or len(texts) <= 1:
        tracker = default_tracker()
        out = []
        for done, messages in enumerate(texts, start=1):
            out.append(tracker.read(messages))
            if tick is not None:
                tick(done)
        return out
    default_tracker()  # a missing model is refused here, in one line, before any process starts
    size = max(1, -(-len(texts) // (workers * _CHUNKS_PER_WORKER)))
    chunks = [[list(m) for m in texts[i : i + size]] for i in range(0, len(texts), size)]
    # spawn, not fork: a forked copy of a process with threads (the event loop's, BLAS's, Ray's)
    # can inherit a held lock. And not forkserver: its workers are not this process's children,
    # so their CPU would be missing from this process's accounts (os.times, bench_scoring.py).
    context = multiprocessing.get_context("spawn")
    out = []
    with ProcessPoolExecutor(max_workers=min(workers, len(chunks)), mp_context=context, initializer=_load) as pool:
        for readings in pool.map(_read_chunk, chunks):
            out.extend(readings)
            if tick is not None:
                tick(len(out))
    return out


def _load() -> None:
    default_tracker()


def _read_chunk(chunk: list[list[str]]) -> list[list[AffectReading]]:
    tracker = default_tracker()
    return [tracker.read(messages) for messages in chunk]
