"""`emobench run --ray` on a local Ray cluster of two worker processes, started once for the module.

Every run goes against one loopback fake server that demands a key, so all share the binding and
the config hash, and each worker must read the key from its own environment. Records are
compared with a local run's on the same seeds, apart from timings.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from emobench.config import RunConfig, load_config_data, validate_config
from emobench.errors import InputError
from emobench.registry import load_registry
from emobench.run.finalize import finalize_run
from emobench.run.runner import ROOT, run_benchmark
from emobench.rundir import RunDir
from emobench.trackers.affect import AffectTracker
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder

ray = pytest.importorskip("ray", reason="the ray extra (pip install 'emobench[ray]')")
pytestmark = pytest.mark.ray

KEY_VAR = "EMOBENCH_RAY_TEST_KEY"
SECRET = f"sk-ray-{uuid.uuid4().hex}"
MARK_VAR = "EMOBENCH_RAY_TEST_MARK"  # finds the processes of a Ray this module started
SEEDS = list(range(5))  # 2 demo cases x 5 seeds = 10 episodes
TIMINGS = {"latency_s", "started_at", "finished_at"}


def _processes(mark: str) -> list[tuple[int, str]]:
    """(pid, command line) of this user's processes whose environment holds MARK_VAR=mark."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"{MARK_VAR}={mark}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                found.append((int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def cluster() -> Iterator[Path]:
    mark, temp = uuid.uuid4().hex, Path(tempfile.mkdtemp(prefix="ebray-"))
    saved = {var: os.environ.get(var) for var in (KEY_VAR, MARK_VAR)}
    os.environ[KEY_VAR], os.environ[MARK_VAR] = SECRET, mark  # the workers' environment: they inherit it
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR, _temp_dir=str(temp))
    try:
        yield temp
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeState(latency_s=0.01, key=SECRET)) as fake:
        yield fake


def _config_data(base_url: str, retries: int | None = None, **extra: Any) -> dict[str, Any]:
    role: dict[str, Any] = {"binding": f"openai:fake-model@{base_url}", "api_key_env": KEY_VAR}
    if retries is not None:  # else the config's default
        role["retries"] = retries
    return {
        "subjects": [{**role, "label": "subject-a"}], "user": role, "judges": [{**role, "label": "judge-0"}],
        "split": "demo", "seeds": SEEDS, "max_turns": 3, "min_turns": 2, "concurrency": 4, **extra,
    }


def _config(base_url: str, retries: int | None = None, **extra: Any) -> RunConfig:
    return validate_config(_config_data(base_url, retries, **extra), "test")


def _run(config: RunConfig, run_dir: Path, **kwargs: Any) -> Any:
    return asyncio.run(run_benchmark(config, run_dir, show_progress=False, **kwargs))


def _strip(value: Any, drop: frozenset[str] | set[str] = TIMINGS) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v, drop) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [_strip(v, drop) for v in value]
    return value


def _records(run_dir: Path, name: str, drop: frozenset[str] | set[str] = TIMINGS) -> list[dict[str, Any]]:
    lines = (run_dir / name).read_bytes().splitlines()
    return sorted((_strip(json.loads(line), drop) for line in lines), key=lambda r: r["key"])


def _assert_same_records(run_dir: Path, local: Path, drop: frozenset[str] | set[str] = TIMINGS) -> None:
    episodes = _records(run_dir, "episodes.jsonl", drop)
    keys = [e["key"] for e in episodes]
    assert len(keys) == len(set(keys)) == 2 * len(SEEDS)  # every episode exactly once
    assert episodes == _records(local, "episodes.jsonl", drop)
    assert _records(run_dir, "judgements.jsonl", drop) == _records(local, "judgements.jsonl", drop)


@pytest.fixture(scope="module")
def local_run(server: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(_config(server.base_url), tmp_path_factory.mktemp("local") / "run").run_dir


@pytest.mark.timeout(300)
def test_a_ray_run_equals_a_local_run_and_keeps_keys_out_of_ray(
    cluster: Path, server: FakeOpenAIServer, local_run: Path, tmp_path: Path
) -> None:
    result = _run(_config(server.base_url), tmp_path / "run", ray="local")
    assert result.new_episodes == 2 * len(SEEDS)
    _assert_same_records(result.run_dir, local_run)
    manifest, local = (json.loads((d / "manifest.json").read_text()) for d in (result.run_dir, local_run))
    node = ray.get_runtime_context().get_node_id()
    assert manifest.pop("ray") == {
        "address": "local", "ray_version": ray.__version__, "nodes": [node], "cpus": 2, "workers": 2,
        "worker_nodes": [node, node],
    }
    assert {k: v for k, v in manifest.items() if k not in ("run_id", "created_at")} == {
        k: v for k, v in local.items() if k not in ("run_id", "created_at")
    }
    # The key reached the server from the workers' own environment, and nowhere in Ray.
    assert {r["headers"]["Authorization"] for r in server.state.requests} == {f"Bearer {SECRET}"}
    assert SECRET not in json.dumps(ray.get_runtime_context().runtime_env)
    stored = [p for p in cluster.rglob("*") if p.is_file() and not p.is_socket()]
    assert stored and not [p for p in stored if SECRET.encode() in p.read_bytes()]


@pytest.mark.timeout(300)
def test_a_killed_worker_loses_nothing_and_doubles_nothing_not_even_its_faults(
    cluster: Path, server: FakeOpenAIServer, local_run: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    killed: list[int] = []

    async def kill_a_worker_mid_run() -> None:
        # At 5 retries one call in 1,400 met six 429s in a row and ended the run (CI saw it; 4 and 15
        # local runs in 150 seeds did): 20 leave it one in 10^11.
        config = _config(server.base_url, retries=20)
        task = asyncio.create_task(run_benchmark(config, run_dir, show_progress=False, ray="local"))
        episodes = run_dir / "episodes.jsonl"
        while not task.done() and not (episodes.exists() and episodes.read_bytes().count(b"\n") >= 2):
            await asyncio.sleep(0.02)
        if task.done():  # the run's own error, whole, rather than the assertion's clipped repr of it
            task.result()
        workers = [pid for pid, cmd in _processes(os.environ[MARK_VAR]) if "EpisodeWorker" in cmd]
        assert len(workers) == 2 and not task.done(), "the run ended before a worker could be killed"
        os.kill(workers[0], signal.SIGKILL)
        killed.append(workers[0])
        await task

    server.state.latency_s = 0.1  # long enough episodes to land the kill mid-run
    # Every third request refused with a 429 (Retry-After 0): each is one fault, retried at once.
    server.state.fault_rate, server.state.fault_kinds, server.state.rng = 0.3, ("429",), random.Random(7)
    server.state.injected.clear()
    try:
        asyncio.run(kill_a_worker_mid_run())
    finally:
        server.state.latency_s, server.state.fault_rate = 0.01, 0.0
    written = (run_dir / "episodes.jsonl").read_bytes().count(b"\n")
    assert killed and written == 2 * len(SEEDS)
    _assert_same_records(run_dir, local_run, TIMINGS | {"attempts"})  # retries aside
    # The killed worker's faults too: those of the episodes it finished, of those it was playing
    # (their attempts died with it) and any it met between. A fault reaches the ledger before its
    # call goes on, so what can be missed is one fault per call in flight when the kill came: a
    # 429 the server had sent but the worker had not read, or one read but not yet with the
    # ledger. The killed worker had at most 4 calls in flight: the driver hands an episode to the
    # less busy worker, so each of the 2 plays at most 2 of the 4 concurrent episodes, and an
    # episode with one judge makes at most 2 calls at a time (before min_turns its next simulator
    # call overlaps the judge's).
    logged = [json.loads(line) for line in (run_dir / "faults.jsonl").read_bytes().splitlines()]
    assert {(f["kind"], f["endpoint"]) for f in logged} == {("http_429", server.base_url.rstrip("/"))}, logged[:3]
    assert 0 <= server.state.injected["429"] - len(logged) <= 4, (server.state.injected, len(logged))


@pytest.mark.timeout(300)
def test_each_roles_cap_holds_across_the_cluster(cluster: Path, tmp_path: Path) -> None:
    flying: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    lock = threading.Lock()

    def responder(body: dict[str, Any]) -> str:
        model = body["model"]
        with lock:
            flying[model] += 1
            peak[model] = max(peak[model], flying[model])
        time.sleep(0.02)
        with lock:
            flying[model] -= 1
        return default_responder(body)

    with FakeOpenAIServer(FakeState(responder=responder)) as fake:

        def role(model: str, label: str | None = None) -> dict[str, Any]:
            return {"binding": f"openai:{model}@{fake.base_url}", "max_concurrency": 2, "label": label}

        config = validate_config(
            {"subjects": [role("m-subject", "s")], "user": role("m-user"), "judges": [role("m-judge", "j")],
             "split": "demo", "seeds": list(range(4)), "max_turns": 3, "min_turns": 2, "concurrency": 8},
            "test",
        )
        _run(config, tmp_path / "run", ray="local")
    # Two workers, each free to run 8 episodes: without the shared budget each role would reach 4.
    assert set(peak) == {"m-subject", "m-user", "m-judge"}
    assert max(peak.values()) == 2, peak


@pytest.mark.timeout(400)
def test_a_killed_driver_leaves_a_run_that_a_ray_resume_completes_playing_nothing_finished_again(
    cluster: Path, server: FakeOpenAIServer, local_run: Path, tmp_path: Path
) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(_config_data(server.base_url)))
    # The driver joins this module's Ray (no Ray of its own to start); Ray ends its workers with it.
    cmd = [sys.executable, "-m", "emobench", "run", "--config", str(config), "--out", str(tmp_path), "--run-id", "r",
           "--no-cache", "--no-progress", "--ray", ray.get_runtime_context().gcs_address]
    episodes, judgements = tmp_path / "r" / "episodes.jsonl", tmp_path / "r" / "judgements.jsonl"
    server.state.latency_s = 0.1
    driver = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 200
        while driver.poll() is None and time.monotonic() < deadline:
            if episodes.exists() and episodes.read_bytes().count(b"\n") >= 2:
                break
            time.sleep(0.02)
        assert driver.poll() is None, (driver.stdout.read() if driver.stdout else b"").decode(errors="replace")[-2000:]
        driver.send_signal(signal.SIGKILL)
        driver.communicate(timeout=30)
        # Until its workers are gone and their last calls answered: the resume's calls are counted apart.
        while [p for p, cmd in _processes(os.environ[MARK_VAR]) if "EpisodeWorker" in cmd] and time.monotonic() < deadline:
            time.sleep(0.05)
        asked = -1
        while asked != len(server.state.requests):
            asked = len(server.state.requests)
            time.sleep(0.3)
    finally:
        server.state.latency_s = 0.01
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
    # Whole lines (the kill may have cut a line, or come before the first judgement was written).
    kept = {path: path.read_bytes()[: path.read_bytes().rfind(b"\n") + 1] if path.exists() else b""
            for path in (episodes, judgements)}
    before = kept[episodes].count(b"\n")
    assert 2 <= before < 2 * len(SEEDS), "the kill did not land mid-run"
    resumed = _run(validate_config(load_config_data(config), config), tmp_path / "r", resume=True, ray="local")
    assert resumed.new_episodes == 2 * len(SEEDS) - before
    _assert_same_records(tmp_path / "r", local_run)  # every episode and judgement once, as a local run's
    assert all(path.read_bytes().startswith(data) for path, data in kept.items())  # nothing finished rewritten
    # The server answered during the resume exactly the calls its new records carry (the rest
    # of the episodes, and the judge calls of one whose judgement the kill cut off): an episode
    # finished before the kill and played again, written or not, would add calls.
    new = [line for path, data in kept.items() for line in path.read_bytes()[len(data):].splitlines()]
    assert len(server.state.requests) - asked == sum(len(json.loads(line)["calls"]) for line in new)


@pytest.mark.timeout(300)
def test_a_key_missing_from_the_workers_environment_stops_the_run_before_any_episode(
    cluster: Path, server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The driver has the key (its preflight passes); the workers, started before it was set, do not.
    monkeypatch.setenv("EMOBENCH_RAY_LATE_KEY", SECRET)
    role = {"binding": f"openai:fake-model@{server.base_url}", "api_key_env": "EMOBENCH_RAY_LATE_KEY"}
    config = _config(server.base_url, user=role)
    with pytest.raises(InputError, match="EMOBENCH_RAY_LATE_KEY") as refused:
        _run(config, tmp_path / "run", ray="local")
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "run" / "episodes.jsonl").exists()


@pytest.mark.timeout(300)
def test_scoring_actors_on_the_cluster_score_a_run_exactly_as_one_local_process(
    cluster: Path, local_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from emobench.run.ray_scoring import RayReader

    registry = load_registry(ROOT)
    runs = {label: tmp_path / label / "run" for label in ("local", "ray")}  # one folder name: run_id is in every row
    for run in runs.values():
        shutil.copytree(local_run, run)
    finalize_run(RunDir(runs["local"]), registry, workers=1)
    # From here this process's tracker reads no episode: the readings must come from elsewhere.
    # (Validity reads each episode's closing message again, here none: an empty read is let by.)
    own_read = AffectTracker.read
    driver_read: list[str] = []

    def read(tracker: AffectTracker, texts: list[str]) -> Any:
        driver_read.extend(texts)
        return own_read(tracker, texts)

    monkeypatch.setattr(AffectTracker, "read", read)
    readers: set[int] = set()  # the processes of scoring actors alive while chunks come back

    def tick(stage: str, done: int, total: int) -> None:
        readers.update(pid for pid, cmd in _processes(os.environ[MARK_VAR]) if "ScoringActor" in cmd)

    finalize_run(RunDir(runs["ray"]), registry, workers=2, tick=tick, reader=RayReader(ray, print))
    local, on_ray = (pd.read_parquet(RunDir(run).scores) for run in runs.values())
    assert on_ray["valence_path"].notna().all() and len(on_ray) == 2 * len(SEEDS)
    assert on_ray.equals(local)
    assert driver_read == [] and len(readers) == 2 and os.getpid() not in readers
    manifests = {label: RunDir(run).read_manifest()["scoring"] for label, run in runs.items()}
    messages = sum(len(json.loads(line)["turns"]) for line in (local_run / "episodes.jsonl").read_bytes().splitlines())
    assert {k: v for k, v in manifests["ray"].items() if "cpu" not in k} == {
        "where": "ray", "workers": 2, "messages": messages}
    assert manifests["local"]["where"] == "local" and manifests["local"]["workers"] == 1
    assert manifests["ray"]["messages_per_cpu_s"] > 0
