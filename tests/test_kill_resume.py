"""Kill test (issue 6): `emobench run` is kill -9'ed mid-run, then resumed; the result equals an
uninterrupted run's, with no torn line kept and no episode twice.

The killed and the resumed run are real `python -m emobench` processes; the uninterrupted run
goes in this process, through the same `run_benchmark` and `finalize_run`, while the resumed
one works (scoring loads the affect tracker, which takes seconds in every process). All
use one fake server, so they share the binding and therefore the config hash.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from emobench.config import load_config_data, validate_config
from emobench.registry import load_registry
from emobench.run.finalize import finalize_run
from emobench.run.runner import ROOT, run_benchmark
from emobench.rundir import RunDir
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState

SCORE_KEYS = ["subject", "case_id", "seed"]
EPISODES = 16  # 2 demo cases x 8 seeds


def _start(env: dict[str, str], *args: str | Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "emobench", "run", *map(str, args), "--no-cache", "--no-progress"]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _finish(proc: subprocess.Popen[bytes], timeout_s: float = 150) -> None:
    out, _ = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, out.decode(errors="replace")[-2000:]


def _wait_for_lines(path: Path, proc: subprocess.Popen[bytes], n: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        time.sleep(0.02)
    out = proc.stdout.read().decode(errors="replace") if proc.poll() is not None and proc.stdout else ""
    pytest.fail(f"{path} did not reach {n} lines while the run was going (exit {proc.poll()}): {out[-1000:]}")


def _scores(run_dir: Path) -> pd.DataFrame:
    table = pd.read_parquet(run_dir / "scores.parquet").drop(columns=["run_id"])
    return table.sort_values(SCORE_KEYS).reset_index(drop=True)


@pytest.mark.timeout(240)
def test_kill_9_mid_run_then_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    # One torch thread per process: the two runs score side by side on a small machine.
    env = {
        **os.environ, "EMOBENCH_RESPONSE_CACHE": str(tmp_path / "cache" / "responses.sqlite"), "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    with FakeOpenAIServer(FakeState(latency_s=0.02)) as server:
        cfg = write_config(
            tmp_path / "run.yaml", server.base_url, seeds=list(range(EPISODES // 2)), max_turns=4, min_turns=4, concurrency=2
        )
        runs = tmp_path / "runs"
        killed = runs / "r"
        victim = _start(env, "--config", cfg, "--out", runs, "--run-id", "r")
        resume: subprocess.Popen[bytes] | None = None
        try:
            _wait_for_lines(killed / "episodes.jsonl", victim, 3)
            assert victim.poll() is None, "the run ended before it could be killed"
            victim.send_signal(signal.SIGKILL)
            victim.communicate(timeout=30)
            assert victim.returncode == -signal.SIGKILL

            # Every whole line is a record; at most the unterminated tail after the last newline is torn.
            data = (killed / "episodes.jsonl").read_bytes()
            *whole, tail = data.split(b"\n")
            keys = [json.loads(line)["key"] for line in whole]
            assert 3 <= len(keys) < EPISODES, "the kill did not land mid-run"
            if tail:
                with pytest.raises(json.JSONDecodeError):
                    json.loads(tail)

            resume = _start(env, "--resume", killed)
            result = asyncio.run(run_benchmark(validate_config(load_config_data(cfg), cfg), runs / "full", show_progress=False))
            finalize_run(RunDir(result.run_dir), load_registry(ROOT))
            _finish(resume)
        finally:
            for proc in (victim, resume):  # a failed assertion leaves no run behind
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.communicate()

    resumed = [json.loads(line)["key"] for line in (killed / "episodes.jsonl").read_bytes().splitlines()]
    assert len(resumed) == EPISODES and len(set(resumed)) == EPISODES  # nothing lost, nothing twice
    assert resumed[: len(keys)] == keys  # what was finished before the kill was kept, not redone
    full = [json.loads(line)["key"] for line in (runs / "full" / "episodes.jsonl").read_bytes().splitlines()]
    assert sorted(resumed) == sorted(full)
    after, uninterrupted = _scores(killed), _scores(runs / "full")
    assert not after.duplicated(SCORE_KEYS).any()
    pd.testing.assert_frame_equal(after, uninterrupted)


@pytest.mark.timeout(120)
def test_sigterm_stops_the_run_cleanly_and_keeps_finished_episodes(tmp_path: Path) -> None:
    # SIGTERM goes through the same unwinding as Ctrl-C, so servers the run started are stopped.
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with FakeOpenAIServer(FakeState(latency_s=0.05)) as server:
        cfg = write_config(tmp_path / "run.yaml", server.base_url, seeds=list(range(8)), max_turns=4, min_turns=4, concurrency=1)
        proc = _start(env, "--config", cfg, "--out", tmp_path, "--run-id", "r")
        try:
            _wait_for_lines(tmp_path / "r" / "episodes.jsonl", proc, 1)
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    text = out.decode(errors="replace")
    assert proc.returncode == 143, text[-2000:]
    assert f"terminated: finished work is kept; rerun with --resume {tmp_path / 'r'}" in text and "Traceback" not in text
    keys = [json.loads(line)["key"] for line in (tmp_path / "r" / "episodes.jsonl").read_bytes().splitlines()]
    assert 1 <= len(keys) < 16 and len(set(keys)) == len(keys)
