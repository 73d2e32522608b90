"""A resume reads the run folder's records one at a time: the driver of a long run keeps their
keys, not the records (5,000 episodes held at once had cost the driver of a resumed `--ray` run
300 MiB for the rest of its life; bench/bench_ray_scale.py, docs/scale.md)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from emobench.registry import Registry
from emobench.run.runner import _finished
from emobench.rundir import RunDir

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
