"""The driver's memory does not grow with the run's size (bench/bench_ray_scale.py, docs/scale.md):
a resume reads the run folder's records one at a time and keeps their keys (5,000 episodes held
at once had cost the driver of a resumed `--ray` run 300 MiB for the rest of its life), and
episodes are started as others end, not all at once (a task waiting at the gate holds 1.5 KB)."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import emobench.run.runner as runner
from emobench.config import load_config_data, validate_config
from emobench.registry import Registry
from emobench.run.runner import _finished
from emobench.rundir import RunDir
from tests.conftest import Serve, write_config
from tests.fake_openai import default_responder

RECORD = Path(__file__).parent / "fixtures" / "records" / "episode.jsonl"  # one 4-turn episode of the test split


def _peak_bytes(run_dir: Path, episodes: int, registry: Registry) -> int:
    """Python's peak allocation while a resume checks a run folder of this many episodes."""
    record = json.loads(RECORD.read_bytes())
    run_dir.mkdir()
    with open(run_dir / "episodes.jsonl", "w") as fh:
        for seed in range(episodes):
            fh.write(json.dumps({**record, "seed": seed, "key": f"{record['subject']}|{record['case_id']}|{seed}"}) + "\n")
    cases = registry.cases("test")
    tracemalloc.start()
    try:
        done, _ = _finished(RunDir(run_dir), cases)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(done) == episodes
    return peak


def test_a_resume_holds_the_keys_of_the_finished_episodes_not_their_records(tmp_path: Path, registry: Registry) -> None:
    small, large = _peak_bytes(tmp_path / "small", 20, registry), _peak_bytes(tmp_path / "large", 100, registry)
    # 80 more episodes cost their keys (about 100 bytes each), not 80 records (tens of KB each).
    assert large - small < 200_000, (small, large)


def test_episodes_start_as_others_end_not_all_at_once(serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = serve(default_responder)
    played = runner.run_episode
    tasks: list[int] = []

    async def counted(*args: Any, **kwargs: Any) -> Any:  # the run's episode tasks when one begins to play
        tasks.append(sum(getattr(t.get_coro(), "__qualname__", "").endswith(".one") for t in asyncio.all_tasks()))
        return await played(*args, **kwargs)

    monkeypatch.setattr(runner, "run_episode", counted)
    path = write_config(tmp_path / "run.yaml", fake.base_url, seeds=list(range(4)), max_turns=1, min_turns=1,
                        concurrency=2)
    config = validate_config(load_config_data(path), path)
    result = asyncio.run(runner.run_benchmark(config, tmp_path / "run", show_progress=False, cache=None))
    assert result.new_episodes == len(tasks) == 8
    assert max(tasks) <= 2 * 2, tasks  # the window: twice the concurrency (it was every episode of the run)
