"""Each role's concurrency cap, held across a whole Ray cluster rather than per worker.

One budget actor owns every role's cap (its ``max_concurrency``) as a count of free call slots.
Workers lease slots in batches and keep them while they have calls to make, so a call waits on
the actor only when its worker has no slot left; idle slots beyond a batch go back. A restarted
worker first gives back what its lost predecessor held, whose calls died with it.

The same actor keeps the run's fault ledger: a worker tells it of each fault as it happens, and
settles an episode's faults when it sends them with that episode's record; what a lost worker
had not settled is taken over by its successor, or by the driver (ray_executor.py).

Nothing here imports Ray: the executor makes ``EndpointBudget`` an actor, and a gate only
awaits the ``.remote`` calls of the handle it is given.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from emobench.endpoints.client import Completion, EndpointStats
from emobench.records import Sampling

POLL_S = 0.02  # how soon a worker that got no slot asks again


class EndpointBudget:
    """Free slots per role and who holds the rest (a Ray actor: its methods run one at a time)."""

    def __init__(self, caps: dict[str, int]) -> None:
        self.caps = dict(caps)
        self.free = dict(caps)
        self.held: dict[int, Counter[str]] = {}
        self.round_trips = 0
        # holder -> episode attempt -> (endpoint, kind) of each fault not yet sent with a record
        self.pending: dict[int, dict[str, list[tuple[str, str]]]] = {}

    def lease(self, role: str, want: int, holder: int) -> int:
        self.round_trips += 1
        granted = min(want, self.free[role])
        self.free[role] -= granted
        self.held.setdefault(holder, Counter())[role] += granted
        return granted

    def give_back(self, role: str, count: int, holder: int) -> None:
        self.round_trips += 1
        count = min(count, self.held.get(holder, Counter())[role])
        self.held[holder][role] -= count
        self.free[role] += count

    def forget(self, holder: int) -> int:
        """A worker (re)starts: slots its earlier incarnation held are free again."""
        lost = self.held.pop(holder, Counter())
        for role, count in lost.items():
            self.free[role] += count
        return sum(lost.values())

    def fault(self, holder: int, attempt: str, endpoint: str, kind: str) -> None:
        self.pending.setdefault(holder, {}).setdefault(attempt, []).append((endpoint, kind))

    def settle(self, holder: int, attempts: list[str]) -> None:
        """These attempts' faults left with their records: they are the driver's now."""
        for attempt in attempts:
            self.pending.get(holder, {}).pop(attempt, None)

    def adopt(self, holder: int, attempt: str | None = None) -> list[tuple[str, str]]:
        """The faults a lost worker had not settled. A successor files them under its own
        `attempt` (settled when it sends them on); the driver, with none, takes them outright."""
        lost = [fault for faults in self.pending.pop(holder, {}).values() for fault in faults]
        if attempt is not None and lost:
            self.pending[holder] = {attempt: list(lost)}
        return lost

    def state(self) -> dict[str, Any]:
        return {"caps": self.caps, "free": self.free, "round_trips": self.round_trips}


def batch_size(cap: int, workers: int) -> int:
    """Slots leased per round trip: a worker's even share of the cap. A worker keeps fewer than a
    batch idle, so all of them together keep fewer than the cap: one that has none can always get one.
    Measured (bench/bench_ray.py, 2 workers, cap 16): half a share per lease made one lease round
    trip per 9 model calls."""
    return max(1, cap // workers)


class LeasedGate:
    """A worker's share of one role's cap: a semaphore whose permits are leased from the budget."""

    def __init__(self, budget: Any, role: str, holder: int, batch: int) -> None:
        self._budget = budget
        self.role = role
        self._holder = holder
        self.batch = batch
        self.held = 0
        self.busy = 0
        self._waiting = 0
        self._asking: asyncio.Future[None] | None = None

    async def _ask(self) -> None:
        try:
            granted = await self._budget.lease.remote(self.role, self.batch, self._holder)
            self.held += granted
            if not granted:  # every slot is out on another worker
                await asyncio.sleep(POLL_S)
        finally:
            self._asking = None

    async def acquire(self) -> None:
        self._waiting += 1
        try:
            while self.busy >= self.held:
                if self._asking is None:  # one request at a time; every waiter waits on it
                    self._asking = asyncio.ensure_future(self._ask())
                await asyncio.shield(self._asking)
        finally:
            self._waiting -= 1
        self.busy += 1

    def release(self) -> None:
        self.busy -= 1
        idle = self.held - self.busy
        if not self._waiting and idle >= self.batch:
            self.held -= idle
            self._budget.give_back.remote(self.role, idle, self._holder)


class BudgetedEndpoint:
    """An endpoint whose calls each hold one leased slot of its role's cluster-wide cap."""

    def __init__(self, inner: Any, gate: LeasedGate) -> None:
        self.inner = inner
        self.gate = gate
        self.name = inner.name
        self.model = inner.model

    @property
    def stats(self) -> EndpointStats:
        stats: EndpointStats = self.inner.stats
        return stats

    async def complete(
        self, messages: list[dict[str, str]], sampling: Sampling, seed: int, response_format: dict[str, Any] | None = None
    ) -> Completion:
        await self.gate.acquire()
        try:
            done: Completion = await self.inner.complete(messages, sampling, seed, response_format)
            return done
        finally:
            self.gate.release()

    async def aclose(self) -> None:
        await self.inner.aclose()
