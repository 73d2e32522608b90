"""Each role's concurrency cap, held across a whole Ray cluster rather than per worker.

One budget actor owns every role's cap (its ``max_concurrency``) as a count of free call slots.
Workers lease slots in batches and each keeps its even share of the cap, so a call waits on the
actor only when its worker has no slot left, and on a slot of its own when every slot is out. A
restarted worker first gives back what its lost predecessor held, whose calls died with it.

The same actor keeps the run's fault ledger, the one place a fault is written down: a worker
tells it of each fault, and waits for it to hear, before the call goes on; the driver claims an
episode's faults when its record arrives. A successor takes over what its lost predecessor left
unclaimed, the driver what is left at the end (ray_executor.py). Being one actor, the ledger
hands each fault out once, whatever dies when.

Nothing here imports Ray: the executor makes ``EndpointBudget`` an actor, and a gate only
awaits the ``.remote`` calls of the handle it is given.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from typing import Any

from emobench.endpoints.client import Completion, EndpointStats
from emobench.records import Sampling

POLL_S = 0.02  # how soon a worker that holds no slot and got none asks again
SPARE_S = 1.0  # how soon a worker whose own slots are all busy asks again for one to spare


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

    def claim(self, holder: int, attempts: list[str]) -> list[tuple[str, str]]:
        """The driver's, with these attempts' record: their faults, unless a successor took them."""
        filed = self.pending.get(holder, {})
        return [fault for attempt in attempts for fault in filed.pop(attempt, [])]

    def adopt(self, holder: int, attempt: str | None = None) -> list[tuple[str, str]]:
        """The faults a lost worker left unclaimed. A successor files them under its own
        `attempt` (claimed with its next record); the driver, with none, takes them outright."""
        lost = [fault for faults in self.pending.pop(holder, {}).values() for fault in faults]
        if attempt is not None and lost:
            self.pending[holder] = {attempt: list(lost)}
        return lost

    def state(self) -> dict[str, Any]:
        return {"caps": self.caps, "free": self.free, "round_trips": self.round_trips}


def batch_size(cap: int, workers: int) -> int:
    """Slots leased per round trip: a worker's even share of the cap, or one where the cap is
    smaller than the workers."""
    return max(1, cap // workers)


class LeasedGate:
    """A worker's share of one role's cap: a semaphore whose permits are leased from the budget.

    A worker keeps ``keep`` slots (its even share, ``cap // workers``) once leased, and gives back
    at once any beyond it that no call waits for; with no share to keep (a cap below the workers)
    it keeps fewer than a batch idle. So all workers together keep at most the cap, and one with
    no slot can always get one. A worker that finds every slot out while its own are busy waits
    for one of its own rather than asking again: the budget is asked at most every SPARE_S then.
    Measured (bench/bench_ray.py, 2 workers, cap 16): asking every POLL_S instead made a round
    trip per four model calls."""

    def __init__(self, budget: Any, role: str, holder: int, batch: int, keep: int = 0) -> None:
        self._budget = budget
        self.role = role
        self._holder = holder
        self.batch = batch
        self.keep = keep
        self.held = 0
        self.busy = 0
        self._waiting = 0
        self._asking: asyncio.Future[None] | None = None
        self._spare_at = 0.0  # until then the budget is taken to have no slot to spare
        self._wakers: deque[asyncio.Future[None]] = deque()  # calls waiting for one of this worker's slots

    async def _ask(self) -> None:
        try:
            granted = await self._budget.lease.remote(self.role, self.batch, self._holder)
            self.held += granted
            if granted:
                return
            if self.busy:  # one of its own comes back sooner than the budget has one to spare
                loop = asyncio.get_running_loop()
                self._spare_at = loop.time() + SPARE_S
                loop.call_at(self._spare_at, self._wake_all)
            else:  # every slot is out on another worker
                await asyncio.sleep(POLL_S)
        finally:
            self._asking = None

    async def acquire(self) -> None:
        self._waiting += 1
        try:
            while self.busy >= self.held:
                if self.busy and asyncio.get_running_loop().time() < self._spare_at:
                    await self._own_slot()
                    continue
                if self._asking is None:  # one request at a time; every waiter waits on it
                    self._asking = asyncio.ensure_future(self._ask())
                await asyncio.shield(self._asking)
        finally:
            self._waiting -= 1
        self.busy += 1

    async def _own_slot(self) -> None:
        waker = asyncio.get_running_loop().create_future()
        self._wakers.append(waker)
        try:
            await waker
        except asyncio.CancelledError:
            if waker.done() and not waker.cancelled():  # woken but gone: the slot goes to the next
                self._wake_one()
            raise

    def _wake_one(self) -> None:
        while self._wakers:
            waker = self._wakers.popleft()
            if not waker.done():
                waker.set_result(None)
                return

    def _wake_all(self) -> None:
        while self._wakers:
            self._wake_one()

    def release(self) -> None:
        self.busy -= 1
        if self._wakers:
            self._wake_one()
            return
        idle = self.held - max(self.busy, self.keep)
        if not self._waiting and idle >= (1 if self.keep else self.batch):
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
