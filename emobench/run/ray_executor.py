"""`emobench run --ray`: the run's episodes played by workers on a Ray cluster.

The driver (the `run` process) keeps everything it does locally: preflight, the manifest, resume,
the writes, the leftover and pairwise judging, finalising (whose tracker readings, the bulk of
it, scoring actors on the cluster make: emobench/run/ray_scoring.py). Each worker is a Ray actor that binds
the run's roles once, through the same code as the local runner, then plays and judges the
episodes it is handed and returns their records; only the driver writes the run folder.

- A worker that dies is restarted by Ray and its unfinished episodes are tried again; an episode
  whose record reached the driver is written once and never handed out again.
- Each fault a worker meets is written down with the budget actor (its ledger) before the call
  that met it goes on; the driver claims an episode's faults when its record arrives. What a lost
  worker left unclaimed its successor's next record claims, or the driver, at the end.
- Each role's ``max_concurrency`` holds across the cluster (emobench/run/ray_budget.py).
- Keys are read by each worker from its own node's environment, as a local run reads them:
  nothing is put in Ray's ``runtime_env`` or in what is sent to a worker.
- The response cache is each node's own file at the run's cache path (SQLite is safe across the
  processes of one machine, not across machines sharing a file system).

Ray is imported only here and in ray_scoring.py, so emobench runs without it installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import logging
import os
import re
import shutil
import tempfile
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from emobench.config import RoleConfig, RunConfig
from emobench.endpoints.binding import parse_binding
from emobench.endpoints.cache import ResponseCache
from emobench.endpoints.client import ChatEndpoint
from emobench.endpoints.pool import EndpointPool
from emobench.episode.loop import run_episode
from emobench.episode.roles import EpisodePrompts, Provenance
from emobench.errors import EmobenchError, EndpointError, InputError
from emobench.judging.stage import Panel, bind_panel, judge_episode
from emobench.records import Limits
from emobench.registry import Registry
from emobench.run.binding import PLAYING_GC_THRESHOLD, BoundRoles, bind_roles, load_prompts, run_registry
from emobench.run.ray_budget import BudgetedEndpoint, EndpointBudget, LeasedGate, batch_size
from emobench.rundir import RunDir, append_line

LOCAL = "local"  # `--ray` with no address: start a Ray on this machine for the run
LOCAL_CPUS = 4  # a local Ray's worker processes, at most (fewer on a smaller machine)
RESTARTS = 3  # times Ray restarts a lost worker, retrying its unfinished episodes
SWEEP_S = 10.0  # at most this long to collect the faults of a run an error stopped


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker is sent: the validated config (key variables' names, never values)."""

    config: dict[str, Any]
    root: str
    cache_path: str | None
    provenance: Provenance
    workers: int
    budget: str  # the name of the run's budget actor
    language: str  # the cases' language: it picks the templates


@dataclass(frozen=True)
class Played:
    """One episode as a worker returns it: its records as the lines the run folder gets."""

    episode: bytes
    judgement: bytes
    claims: list[str]  # the attempts whose faults the ledger holds for this record
    calls: int
    turns: int
    faults: list[tuple[str, str]] = field(default_factory=list)  # claimed by the driver

    def write(self, rd: RunDir) -> None:
        append_line(rd.episodes, self.episode)
        append_line(rd.judgements, self.judgement)
        for endpoint, kind in self.faults:
            rd.log_fault(endpoint, kind)


# The episode attempt a worker's task is playing: its calls' faults are filed under it.
_ATTEMPT: ContextVar[str | None] = ContextVar("emobench_ray_attempt", default=None)


class WorkerFaults:
    """A worker's faults, each filed with the ledger (the budget actor) under the episode attempt
    whose call met it before that call goes on: a worker killed at any moment has told the ledger
    of every fault it read. The worker keeps no copy, so nothing it holds can be lost or sent twice."""

    def __init__(self, ledger: Any, holder: int) -> None:
        self._ledger = ledger
        self._holder = holder
        self.loose = f"loose-{uuid.uuid4().hex}"  # met outside any episode, or a predecessor's

    async def adopt(self) -> None:
        """Take over the faults a lost predecessor (same holder) left unclaimed."""
        await self._ledger.adopt.remote(self._holder, self.loose)

    @staticmethod
    def begin() -> str:
        """A new attempt at an episode, for the calls of this task and the tasks it starts."""
        attempt = uuid.uuid4().hex
        _ATTEMPT.set(attempt)
        return attempt

    async def note(self, endpoint: str, kind: str) -> None:
        await self._ledger.fault.remote(self._holder, _ATTEMPT.get() or self.loose, endpoint, kind)

    def claims(self, attempt: str) -> list[str]:
        """What the driver claims with this attempt's record: its faults and any loose ones."""
        return [attempt, self.loose]


class EpisodeWorker:
    """A Ray actor (async: it plays many episodes at once). Roles are bound on first use, so a
    worker Ray restarts after a loss binds them again and frees its predecessor's leases."""

    _pool: EndpointPool
    _bound: BoundRoles
    _prompts: EpisodePrompts
    _registry: Registry
    _limits: Limits
    _panel: Panel

    def __init__(self, spec: WorkerSpec, index: int) -> None:
        import ray

        self._spec = spec
        # Found by name: a handle among the constructor's arguments would tie Ray's restart of
        # this worker to the driver's copy of them.
        self._budget = ray.get_actor(spec.budget)
        self._index = index
        self._ready: asyncio.Future[None] | None = None
        self._faults = WorkerFaults(self._budget, index)
        self._calls_seen = 0
        self._stack = AsyncExitStack()

    async def _start(self) -> None:
        await self._budget.forget.remote(self._index)
        await self._faults.adopt()
        spec, root = self._spec, Path(self._spec.root)
        config = RunConfig.model_validate(spec.config)
        cache = ResponseCache(Path(spec.cache_path)) if spec.cache_path else None
        logs = Path(tempfile.gettempdir())  # a pool writes logs only for the vllm: servers --ray refuses
        self._pool = EndpointPool(self._stack, logs, cache, on_fault=self._faults.note)

        def wrap(place: str, role: RoleConfig, client: ChatEndpoint) -> ChatEndpoint:
            cap = role.max_concurrency
            gate = LeasedGate(self._budget, place, self._index, batch_size(cap, spec.workers), keep=cap // spec.workers)
            return BudgetedEndpoint(client, gate)

        self._bound = await bind_roles(self._pool, config, wrap)
        self._prompts = load_prompts(root, config, spec.language)
        self._registry = run_registry(config, root)
        self._limits = config.limits()
        self._panel = bind_panel(config.panel, self._bound.judges, root, config.judges_language(spec.language))
        gc.freeze()  # as the local runner's long_lived_heap: what was built so far is never walked again
        gc.set_threshold(*PLAYING_GC_THRESHOLD)

    async def _ensure(self) -> None:
        if self._ready is None:
            self._ready = asyncio.ensure_future(self._start())
        await self._ready

    async def where(self) -> dict[str, Any]:
        import ray

        await self._ensure()
        return {"node_id": ray.get_runtime_context().get_node_id()}

    async def play(self, subject: int, case_id: str, seed: int) -> Played:
        await self._ensure()
        attempt = self._faults.begin()
        case = self._registry.case(case_id)
        roles = self._bound.episode_roles(self._bound.subjects[subject])
        episode = await run_episode(case, roles, self._prompts, seed, self._limits, self._spec.provenance)
        judgement = await judge_episode(self._panel, case, episode, self._limits)
        calls = sum(c.stats.calls for c in self._pool.clients())
        new_calls, self._calls_seen = calls - self._calls_seen, calls
        records = episode.model_dump_json().encode(), judgement.model_dump_json().encode()
        return Played(*records, self._faults.claims(attempt), new_calls, len(episode.turns))


def refuse_vllm(config: RunConfig) -> None:
    """A vllm: binding starts its server inside the process that binds it: on Ray, every worker."""
    for place, role in config.bindings():
        if parse_binding(role.binding).kind == "vllm":
            raise InputError(
                "--ray", f"{place}.binding",
                f"{role.binding!r} would start a vLLM server in every worker; serve it yourself (vllm serve) and "
                "bind its URL, openai:MODEL@http://HOST:PORT/v1",
            )


def check(config: RunConfig) -> None:
    """What --ray refuses, found before the run folder is touched."""
    if importlib.util.find_spec("ray") is None:
        raise InputError("--ray", "", "Ray is not installed: pip install 'emobench[ray]'")
    refuse_vllm(config)


def connect(address: str) -> tuple[Any, str | None]:
    """Ray, joined or started; and the temporary folder of a Ray started here (None otherwise).
    A process already connected (the CLI's `ray_session`, a notebook, a test) keeps its Ray."""
    try:
        import ray
    except ImportError:
        raise InputError("--ray", "", "Ray is not installed: pip install 'emobench[ray]'") from None
    if ray.is_initialized():  # a caller (a notebook, a test) already connected this process
        return ray, None
    if address != LOCAL:
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise InputError("--ray", "", f"cannot join the Ray cluster at {address!r}: {exc}") from None
        return ray, None
    temp = tempfile.mkdtemp(prefix="emobench-ray-")  # Ray's sockets need a short path: not the run folder
    ray.init(
        num_cpus=min(LOCAL_CPUS, os.cpu_count() or 1), include_dashboard=False, log_to_driver=False,
        logging_level=logging.ERROR, _temp_dir=temp,
    )
    return ray, temp


def actor_lost(exc: Exception, what: str) -> InputError:
    """A lost actor's error in one line: Ray's report of it is pages long, its last error line is
    the cause (most often emobench missing on the actor's machine)."""
    errors = [line.strip() for line in str(exc).splitlines() if re.match(r"\s*\w+Error: ", line)]
    return InputError(
        "--ray", "", f"{what} ({errors[-1] if errors else type(exc).__name__}); "
        "is this emobench installed on every machine of the cluster?",
    )


def disconnect(ray: Any, temp: str | None) -> None:
    """Shut down a Ray that `connect` started (temp: its folder); one joined is left running."""
    if temp is not None:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


@dataclass
class RayCluster:
    """The driver's side: hands episodes to the least busy worker and counts what comes back."""

    ray: Any
    address: str
    workers: list[Any]
    where: list[dict[str, Any]]
    budget: Any = None  # the budget actor, which keeps the fault ledger too
    log_fault: Callable[[str, str], None] | None = None  # the run folder's fault log
    calls: int = 0
    faults: int = 0
    busy: Counter[int] = field(default_factory=Counter)  # episodes in flight per worker
    holders: dict[int, int] = field(default_factory=dict)  # worker -> its index with the budget

    def provenance(self) -> dict[str, Any]:
        nodes = [n for n in self.ray.nodes() if n.get("Alive")]
        return {
            "address": self.address,
            "ray_version": self.ray.__version__,
            "nodes": sorted(n["NodeID"] for n in nodes),
            "cpus": int(sum(n.get("Resources", {}).get("CPU", 0) for n in nodes)),
            "workers": len(self.workers),
            "worker_nodes": sorted(w["node_id"] for w in self.where),
        }

    async def play(self, subject: int, case_id: str, seed: int) -> Played:
        from ray.exceptions import RayActorError, RayTaskError

        while self.workers:
            worker = min(self.workers, key=lambda w: self.busy[id(w)])
            self.busy[id(worker)] += 1
            try:
                played: Played = await worker.play.remote(subject, case_id, seed)
            except RayTaskError as exc:  # the worker's own error, reported as a local run reports it
                cause = exc.cause
                raise cause if isinstance(cause, EmobenchError) else exc from None
            except RayActorError:  # lost past its restarts: the episode goes to another worker
                if worker in self.workers:
                    self.workers.remove(worker)
                    await self._adopt(worker)
                continue
            finally:
                self.busy[id(worker)] -= 1
            self.calls += played.calls
            if self.budget is not None:
                played = replace(played, faults=await self.budget.claim.remote(self.holders[id(worker)], played.claims))
            self.faults += len(played.faults)
            return played
        raise EndpointError("ray", "every worker was lost")

    async def _adopt(self, worker: Any) -> None:
        """Write the faults a worker noted but never sent with a record (none will come now)."""
        await self._take(self.holders[id(worker)])

    async def sweep(self) -> None:
        """At the end of a run, write what no record carried: faults met outside any episode
        after a worker's last one, those of a worker restarted with no episode left for it, and
        in a run an error stopped, those of the episode that failed and of those cut short."""
        for holder in sorted(set(self.holders.values())):
            await self._take(holder)

    async def _take(self, holder: int) -> None:
        if self.budget is None or self.log_fault is None:
            return
        for endpoint, kind in await self.budget.adopt.remote(holder):
            self.log_fault(endpoint, kind)
            self.faults += 1


@asynccontextmanager
async def ray_cluster(
    address: str, config: RunConfig, root: Path, cache: ResponseCache | None, provenance: Provenance,
    language: str = "en", log_fault: Callable[[str, str], None] | None = None,
) -> AsyncIterator[RayCluster]:
    check(config)
    ray, temp = connect(address)
    workers: list[Any] = []
    budget = None
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        count = max(1, min(cpus, config.concurrency))
        caps = {place: role.max_concurrency for place, role in config.bindings()}
        name = f"emobench-budget-{uuid.uuid4().hex}"
        budget = ray.remote(num_cpus=0)(EndpointBudget).options(name=name).remote(caps)
        spec = WorkerSpec(
            config.model_dump(mode="json"), str(root), str(cache.path) if cache else None, provenance, count, name,
            language,
        )
        actor = ray.remote(
            num_cpus=1, max_restarts=RESTARTS, max_task_retries=RESTARTS, max_concurrency=config.concurrency,
            scheduling_strategy="SPREAD",
        )(EpisodeWorker)
        workers = [actor.remote(spec, i) for i in range(count)]
        cluster = RayCluster(ray, address, list(workers), [], budget, log_fault)
        cluster.holders = {id(w): i for i, w in enumerate(workers)}
        try:  # bind every worker's roles now: a missing key on some node is refused before any episode
            cluster.where = await asyncio.gather(*(w.where.remote() for w in workers))
        except ray.exceptions.RayTaskError as exc:
            raise exc.cause if isinstance(exc.cause, EmobenchError) else exc from None
        except ray.exceptions.RayActorError as exc:
            raise actor_lost(exc, "a worker could not start") from None
        try:
            yield cluster
        except Exception:  # the faults that led to it too, as a local run logs them as they happen
            with contextlib.suppress(Exception):  # the run's own error is the one to report
                await asyncio.wait_for(cluster.sweep(), SWEEP_S)
            raise
        await cluster.sweep()
    finally:
        for worker in workers:
            ray.kill(worker)
        if budget is not None:
            ray.kill(budget)
        disconnect(ray, temp)
