"""The parts of `run --ray` that need no Ray: the shared budget's arithmetic, the flag, refusals."""

from __future__ import annotations

import asyncio
import contextvars
import subprocess
import sys
from collections import Counter
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.cli_support import bare_ray_flag
from emobench.config import validate_config
from emobench.errors import InputError
from emobench.run.ray_budget import EndpointBudget, LeasedGate, batch_size
from emobench.run.ray_executor import RayCluster, WorkerFaults, actor_lost, check
from emobench.run.runner import ROOT


class _Handle:
    """An in-process actor handle: ``handle.method.remote(...)`` is awaitable, as Ray's is, and
    runs the budget's method at once (an actor runs its methods one at a time)."""

    def __init__(self, budget: EndpointBudget) -> None:
        self._budget = budget

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._budget, name)

        class _Method:
            @staticmethod
            def remote(*args: Any) -> asyncio.Future[Any]:
                done = asyncio.get_running_loop().create_future()
                done.set_result(method(*args))
                return done

        return _Method()


@settings(max_examples=60, deadline=None)
@given(
    cap=st.integers(1, 12),
    workers=st.integers(1, 4),
    calls=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=60),
)
def test_leased_slots_never_exceed_the_cap_and_all_come_back(cap: int, workers: int, calls: list[tuple[int, int]]) -> None:
    budget = EndpointBudget({"user": cap})
    handle = _Handle(budget)
    gates = [LeasedGate(handle, "user", holder, batch_size(cap, workers), keep=cap // workers) for holder in range(workers)]
    flying, peak = Counter[str](), Counter[str]()

    async def call(worker: int, hold: int) -> None:
        gate = gates[worker % workers]
        await gate.acquire()
        flying["user"] += 1
        peak["user"] = max(peak["user"], flying["user"])
        for _ in range(hold):  # other calls get to run while this one holds its slot
            await asyncio.sleep(0)
        flying["user"] -= 1
        gate.release()

    async def run() -> None:
        await asyncio.wait_for(asyncio.gather(*(call(w, h) for w, h in calls)), timeout=30)

    asyncio.run(run())
    assert 1 <= peak["user"] <= cap
    # Whatever a worker still holds is its share, or with none below one batch; nothing was lost on the way.
    assert all(gate.busy == 0 and gate.held <= (gate.keep or gate.batch - 1) for gate in gates)
    assert budget.free["user"] + sum(gate.held for gate in gates) == cap


def test_a_worker_busy_on_its_whole_share_waits_for_its_own_slots_not_on_the_budget() -> None:
    # Two workers, each with more calls than its share of the cap: all slots are out, so asking
    # the budget again (a round trip each) cannot help; a worker waits for one of its own.
    cap, workers = 4, 2
    budget = EndpointBudget({"user": cap})
    handle = _Handle(budget)
    gates = [LeasedGate(handle, "user", holder, batch_size(cap, workers), keep=cap // workers) for holder in range(workers)]
    flying = peak = 0

    async def call(gate: LeasedGate) -> None:
        nonlocal flying, peak
        await gate.acquire()
        flying += 1
        peak = max(peak, flying)
        await asyncio.sleep(0.004)
        flying -= 1
        gate.release()

    async def run() -> None:
        await asyncio.wait_for(asyncio.gather(*(call(gates[i % workers]) for i in range(48))), timeout=30)

    asyncio.run(run())
    assert peak == cap
    assert budget.round_trips <= 2 * workers, budget.round_trips  # the first lease, and one ask that found none
    assert [gate.held for gate in gates] == [2, 2] and budget.free["user"] == 0  # each keeps its share


def test_a_restarted_worker_frees_what_its_lost_predecessor_held() -> None:
    budget = EndpointBudget({"subjects[0]": 4})
    assert budget.lease("subjects[0]", 3, holder=0) == 3
    assert budget.lease("subjects[0]", 3, holder=1) == 1
    assert budget.lease("subjects[0]", 1, holder=1) == 0  # all lent: a worker waits and asks again
    assert budget.forget(0) == 3
    assert budget.free == {"subjects[0]": 3}
    budget.give_back("subjects[0]", 5, holder=1)  # gives back at most what it holds
    assert budget.free == {"subjects[0]": 4}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "--ray"], ["run", "--ray", "local"]),
        (["run", "--ray", "--no-progress"], ["run", "--ray", "local", "--no-progress"]),
        (["run", "--ray", "auto"], ["run", "--ray", "auto"]),
        (["run", "--ray", "10.0.0.5:6379", "--limit", "1"], ["run", "--ray", "10.0.0.5:6379", "--limit", "1"]),
        (["show", "--ray"], ["show", "--ray"]),  # only run has the flag
        (["run", "--", "--ray"], ["run", "--", "--ray"]),
    ],
)
def test_bare_ray_means_a_local_ray(args: list[str], expected: list[str]) -> None:
    assert bare_ray_flag(args) == expected


def _config(binding: str) -> Any:
    role = {"binding": binding}
    return validate_config({"subjects": [role], "user": role, "judges": [role], "split": "demo"}, "test")


def test_ray_refuses_a_vllm_binding_before_the_run_starts() -> None:
    pytest.importorskip("ray")
    with pytest.raises(InputError, match=r"--ray: subjects\[0\]\.binding: 'vllm:embedded' would start a vLLM server"):
        check(_config("vllm:embedded"))
    check(_config("openai:m@http://127.0.0.1:9/v1"))


def test_without_ray_installed_emobench_runs_and_ray_is_refused_in_one_line(tmp_path: Path) -> None:
    # ray made unimportable in a fresh process; the run is refused before its folder is made.
    script = (
        "import sys; sys.modules['ray'] = None\n"
        "from emobench.cli import main\n"
        f"sys.argv = ['emobench', 'run', '--ray', '--out', {str(tmp_path)!r}, '--run-id', 'r', '--no-progress',"
        " '--subject', 'scripted:platitude', '--user', 'scripted:platitude', '--judge', 'scripted:platitude']\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert lines[-1] == "error: --ray: Ray is not installed: pip install 'emobench[ray]'", done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "r").exists()


def _in(call: Coroutine[Any, Any, None], context: contextvars.Context) -> asyncio.Task[None]:
    """Run a call in an episode's context, as Ray runs an actor call in a task of its own."""
    return asyncio.get_running_loop().create_task(call, context=context)


_KINDS = ["start", "fault", "loose", "finish", "arrive", "restart", "lose"]
_EVENT = st.tuples(st.sampled_from(_KINDS), st.integers(0, 1), st.integers(0, 7))


@settings(max_examples=60, deadline=None)
@given(events=st.lists(_EVENT, max_size=60))
def test_each_fault_reaches_the_run_once_though_workers_die_at_any_moment(events: list[tuple[str, int, int]]) -> None:
    """Two worker slots play episodes, meet faults in them and outside them, and finish them; a
    record travels to the driver (which claims its faults on arrival) while its worker may be
    killed (Ray restarts it; the record arrives or is lost) or lost for good (the driver takes
    over). Whatever happens, every fault is written exactly once, and a record that arrives with
    no restart since it left carries every fault its own attempt met."""
    budget = EndpointBudget({"user": 2})
    ledger = _Handle(budget)
    cluster = RayCluster(None, "local", [], [], ledger, lambda endpoint, kind: written.update([kind]))
    cluster.holders = {0: 0, 1: 1}
    noted: Counter[str] = Counter()
    written: Counter[str] = Counter()

    async def arrive(h: int, claims: list[str], own: set[str], whole: bool) -> None:
        faults = await ledger.claim.remote(h, claims)
        if whole:
            assert own <= {kind for _, kind in faults}  # its own faults, with it
        written.update(kind for _, kind in faults)

    async def run() -> None:
        workers = {h: WorkerFaults(ledger, h) for h in (0, 1)}
        playing: dict[int, list[tuple[contextvars.Context, str, set[str]]]] = {0: [], 1: []}
        sent: dict[int, list[tuple[list[str], set[str], bool]]] = {0: [], 1: []}  # on their way
        for n, (what, h, pick) in enumerate(events):
            fault = ("user", f"fault-{n}")  # each fault told apart by its kind
            if what == "start":
                context = contextvars.Context()  # the task Ray runs an actor call in
                playing[h].append((context, context.run(WorkerFaults.begin), set()))
            elif what == "fault" and playing[h]:
                context, _, own = playing[h][pick % len(playing[h])]
                await _in(workers[h].note(*fault), context=context)
                noted[fault[1]] += 1
                own.add(fault[1])
            elif what == "loose":  # outside any episode (binding, say)
                await workers[h].note(*fault)
                noted[fault[1]] += 1
            elif what == "finish" and playing[h]:
                _, attempt, own = playing[h].pop(pick % len(playing[h]))
                sent[h].append((workers[h].claims(attempt), own, True))
            elif what == "arrive" and sent[h]:
                await arrive(h, *sent[h].pop(pick % len(sent[h])))
            elif what in ("restart", "lose"):  # SIGKILLed: each record on its way arrives or not
                playing[h] = []
                sent[h] = [(claims, own, False) for i, (claims, own, _) in enumerate(sent[h]) if pick >> i & 1]
                workers[h] = WorkerFaults(ledger, h)
                if what == "restart":  # Ray starts its successor, which adopts
                    await workers[h].adopt()
                else:  # gone for good: the driver writes what it had noted; another takes its slot
                    written.update(kind for _, kind in await ledger.adopt.remote(h))
        for h in (0, 1):  # the rest finish and arrive, then what is left is the driver's
            for claims, own, whole in sent[h]:
                await arrive(h, claims, own, whole)
            for _, attempt, own in playing[h]:
                await arrive(h, workers[h].claims(attempt), own, True)
        await cluster.sweep()

    asyncio.run(run())
    assert written == noted
    assert not any(budget.pending.values())


def test_a_record_carries_its_own_episodes_faults_not_another_ones() -> None:
    budget = EndpointBudget({"user": 2})
    ledger = _Handle(budget)
    worker = WorkerFaults(ledger, 0)

    async def run() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        one, two = contextvars.Context(), contextvars.Context()  # two episodes in flight on one worker
        first, second = one.run(WorkerFaults.begin), two.run(WorkerFaults.begin)
        await _in(worker.note("user", "429"), context=one)
        await _in(worker.note("judge", "timeout"), context=two)
        await _in(worker.note("judge", "500"), context=two)
        # With the ledger before each call went on: a kill now would not lose them.
        assert budget.pending == {0: {first: [("user", "429")], second: [("judge", "timeout"), ("judge", "500")]}}
        return await ledger.claim.remote(0, worker.claims(first)), await ledger.claim.remote(0, worker.claims(second))

    first, second = asyncio.run(run())
    assert first == [("user", "429")]
    assert second == [("judge", "timeout"), ("judge", "500")]
    assert not any(budget.pending.values())  # claimed with their records


def test_the_driver_writes_at_the_end_what_no_record_carried() -> None:
    budget = EndpointBudget({"user": 2})
    ledger = _Handle(budget)
    logged: list[tuple[str, str]] = []
    cluster = RayCluster(None, "local", [], [], ledger, lambda endpoint, kind: logged.append((endpoint, kind)))
    cluster.holders = {101: 0, 102: 1}

    async def run() -> None:
        first, second = WorkerFaults(ledger, 0), WorkerFaults(ledger, 1)
        await first.note("user", "timeout")  # after its last episode: no record will carry it
        episode = contextvars.Context()
        attempt = episode.run(WorkerFaults.begin)
        await _in(second.note("judge", "http_500"), context=episode)
        await ledger.claim.remote(1, second.claims(attempt))  # claimed with its record: not the sweep's
        restarted = WorkerFaults(ledger, 1)
        await _in(second.note("judge", "http_429"), context=episode)  # the lost attempt's
        await restarted.adopt()  # ... adopted by a successor that then gets no episode
        await cluster.sweep()

    asyncio.run(run())
    assert sorted(logged) == [("judge", "http_429"), ("user", "timeout")]
    assert cluster.faults == 2 and not any(budget.pending.values())


@given(
    noise=st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40), max_size=30),
    cause=st.sampled_from(["ModuleNotFoundError: No module named 'emobench'", "ImportError: cannot import name 'x'"]),
)
@settings(max_examples=40, deadline=None)
def test_a_lost_actor_is_told_in_one_line_with_its_last_error(noise: list[str], cause: str) -> None:
    """Ray's report of a lost actor is pages long; the user gets one line with its cause."""
    report = "\n".join([*noise, f"    {cause}", "The actor died unexpectedly before finishing this task."])
    error = actor_lost(RuntimeError(report), "a worker could not start")
    assert "\n" not in str(error)
    assert cause in str(error) and "a worker could not start" in str(error)
    bare = actor_lost(RuntimeError("no error line at all"), "a scoring actor was lost")
    assert "(RuntimeError)" in str(bare) and "\n" not in str(bare)
