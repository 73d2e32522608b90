"""Scoring on every core (emobench/trackers/pool.py): the same scores as one process, and how
many processes a run gets. One pool for the module: a spawned worker takes a second to start."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from emobench.config import validate_config
from emobench.errors import InputError
from emobench.registry import load_registry
from emobench.run.finalize import finalize_run
from emobench.run.runner import ROOT, run_benchmark
from emobench.rundir import RunDir
from emobench.trackers import pool
from emobench.trackers.pool import MIN_EPISODES_PER_WORKER, WORKERS_ENV, scoring_workers


@pytest.fixture(scope="module")
def scored_twice(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny scripted run (2 cases x 3 seeds), scored by this process and by a pool of 2."""
    role = {"binding": "scripted:platitude"}
    config = validate_config(
        {"subjects": [role], "user": role, "judges": [role], "split": "demo", "seeds": [0, 1, 2],
         "max_turns": 3, "min_turns": 2},
        "test",
    )
    base = tmp_path_factory.mktemp("scoring")
    played = asyncio.run(run_benchmark(config, base / "played" / "run", show_progress=False)).run_dir
    registry = load_registry(ROOT)
    runs = []
    for label, workers in (("serial", 1), ("pool", 2)):
        run = base / label / "run"  # one folder name for both: the run id is in every row
        shutil.copytree(played, run)
        finalize_run(RunDir(run), registry, workers=workers)
        runs.append(run)
    return runs[0], runs[1]


def test_a_pool_of_processes_scores_a_run_exactly_as_one_process_does(scored_twice: tuple[Path, Path]) -> None:
    serial, pooled = (pq.read_table(RunDir(run).scores) for run in scored_twice)
    assert serial.num_rows == 6
    assert serial.column("valence_path").null_count == 0  # the tracker did read every episode
    assert pooled.equals(serial)
    reports = [RunDir(run).read_report() for run in scored_twice]
    assert reports[0] == reports[1]
    messages = sum(len(e.turns) for e in RunDir(scored_twice[0]).read_episodes())
    scoring = [RunDir(run).read_manifest()["scoring"] for run in scored_twice]
    assert [(s["where"], s["workers"], s["messages"]) for s in scoring] == [("local", 1, messages), ("local", 2, messages)]


@given(episodes=st.integers(0, 5000), requested=st.integers(1, 64), cores=st.integers(1, 256))
def test_the_worker_count_is_the_one_asked_for_else_the_cores_a_run_fills(
    episodes: int, requested: int, cores: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(WORKERS_ENV, raising=False)
        patch.setattr(pool, "cores", lambda: cores)
        assert scoring_workers(episodes, requested) == min(requested, max(1, episodes))
        auto = scoring_workers(episodes)
        # Never more than the cores, and a pool only when each worker gets enough episodes.
        assert 1 <= auto <= cores
        assert auto == 1 or episodes // auto >= MIN_EPISODES_PER_WORKER
        assert auto == min(cores, max(1, episodes // MIN_EPISODES_PER_WORKER))
        patch.setenv(WORKERS_ENV, str(requested))
        assert scoring_workers(episodes) == min(requested, max(1, episodes))


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_a_bad_worker_count_in_the_environment_is_refused_in_one_line(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WORKERS_ENV, value)
    with pytest.raises(InputError, match=rf"^{WORKERS_ENV}: expected a positive whole number of processes, got ") as bad:
        scoring_workers(100)
    assert "\n" not in str(bad.value)


def test_the_cores_are_those_this_process_may_run_on() -> None:
    import os

    assert pool.cores() == len(os.sched_getaffinity(0))


class _ClusterWithoutCPU:
    """What a Ray connection tells of a cluster whose nodes offer no CPU (a head with num_cpus=0)."""

    @staticmethod
    def cluster_resources() -> dict[str, float]:
        return {"memory": 1e9}


def test_a_ray_cluster_with_no_cpu_scores_on_this_machine_and_says_so_in_one_line() -> None:
    from emobench.run.ray_scoring import RayReader

    said: list[str] = []
    texts = [["I failed the exam and I can't stop crying."], ["Thanks, that actually helps."]]
    read = RayReader(_ClusterWithoutCPU(), said.append)(texts, 1)
    assert said == ["--ray: the cluster has no CPU to score on; scoring on this machine's cores"]
    assert (read.where, read.workers, read.messages) == ("local", 1, 2)
    assert read.episodes == pool.read_locally(texts, 1).episodes
