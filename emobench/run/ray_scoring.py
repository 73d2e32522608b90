"""Scoring under `emobench run --ray`: the affect tracker read by scoring actors on the cluster.

Scoring a run is almost all the tracker's encoder (docs/scale.md). Under `--ray` the CLI holds one
Ray connection over the whole run (`ray_session`): the play workers (emobench/run/ray_executor.py)
join it, and once they are gone `finalize_run` is handed a `RayReader`. That starts one scoring
actor per CPU the cluster has (fewer for a small run: as many as trackers/pool.py would start
on a machine of that many cores), each loading the encoder once, and maps them, in order, over
the same chunks of episodes and with the same `read_chunk` call as the local pool, so the scores
are identical. Scoring itself knows nothing of Ray: a reader is any callable shaped like
`read_locally`.

Why not read each episode in the play worker that played it and send the readings with its
record: the run folder would have to keep them, and resume and merge carry them; and a play
worker, an async actor playing many episodes at once, would hold its event loop for the
encoder's tens of milliseconds per message, stalling the episodes it is playing.

Ray is imported only here and in ray_executor.py, so emobench runs without it installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from emobench.config import RunConfig
from emobench.errors import EmobenchError
from emobench.run.ray_executor import actor_lost, check, connect, disconnect
from emobench.trackers.affect import AffectReading, default_tracker
from emobench.trackers.pool import Readings, Texts, Tick, chunks, read_chunk, read_locally, scoring_workers


class ScoringActor:
    """A Ray actor holding one tracker: the encoder is loaded once, when it starts."""

    def __init__(self) -> None:
        default_tracker()

    def read(self, chunk: list[list[str]]) -> tuple[list[list[AffectReading]], float]:
        return read_chunk(chunk)


@dataclass(frozen=True)
class RayReader:
    """A `Reader` (trackers/pool.py) whose processes are scoring actors on the connected cluster."""

    ray: Any
    say: Callable[[str], None]  # the one line that tells of a fallback to this machine

    def __call__(self, texts: Texts, workers: int | None = None, tick: Tick | None = None) -> Readings:
        if not texts:
            return Readings([], "ray", 0, 0, 0.0)
        cpus = int(self.ray.cluster_resources().get("CPU", 0))
        if cpus < 1:
            self.say("--ray: the cluster has no CPU to score on; scoring on this machine's cores")
            return read_locally(texts, workers, tick)
        default_tracker()  # a missing model is refused here, in one line, before any actor starts
        count = min(cpus, scoring_workers(len(texts), workers, available=cpus))
        parts = chunks(texts, count)
        actor = self.ray.remote(num_cpus=1, scheduling_strategy="SPREAD")(ScoringActor)
        actors = [actor.remote() for _ in range(min(count, len(parts)))]
        out: list[list[AffectReading]] = []
        cpu = 0.0
        try:
            from ray.util import ActorPool  # hands each chunk to the next idle actor, results in order

            for readings, seconds in ActorPool(actors).map(lambda a, part: a.read.remote(part), parts):
                out.extend(readings)
                cpu += seconds
                if tick is not None:
                    tick(len(out))
        except self.ray.exceptions.RayTaskError as exc:  # the actor's own error, as a local run reports it
            raise exc.cause if isinstance(exc.cause, EmobenchError) else exc from None
        except self.ray.exceptions.RayActorError as exc:
            raise actor_lost(exc, "a scoring actor was lost") from None
        finally:
            for handle in actors:
                self.ray.kill(handle)
        messages = sum(len(m) for m in texts)
        return Readings(out, "ray", len(actors), messages, cpu)


@contextmanager
def ray_session(address: str, config: RunConfig, say: Callable[[str], None]) -> Iterator[RayReader]:
    """One Ray connection for a whole `run --ray`, playing and scoring: a local Ray is started
    once (not again for the scoring) and shut down at the end, a cluster joined is left running."""
    check(config)  # refused before Ray starts
    ray, temp = connect(address)
    try:
        yield RayReader(ray, say)
    finally:
        disconnect(ray, temp)
