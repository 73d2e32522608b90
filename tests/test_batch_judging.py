"""`emobench judge --batch`: the judge calls of a rescore go through the Batch API (files and
batches on the fake server) and fill the same records as direct calls; a command killed while
its batch runs resumes by polling that batch; an expired batch's unanswered requests go again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from emobench.cli import app
from emobench.records import EpisodeJudgement, PairwiseCall, PairwiseVerdict
from emobench.rundir import RunDir, read_records
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def server() -> Any:
    with FakeOpenAIServer(FakeState()) as srv:
        yield srv


@pytest.fixture(scope="module")
def finished(server: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A finished two-subject run, a panel file, and that panel's judgement of it by direct calls."""
    root = tmp_path_factory.mktemp("batch")
    subjects = [{"binding": f"openai:fake-model@{server.base_url}", "label": "model"},
                {"binding": "scripted:platitude", "label": "platitude"}]
    cfg = write_config(root / "c.yaml", server.base_url, subjects=subjects, max_turns=2, min_turns=1, seeds=[0])
    assert _cli("run", "--config", str(cfg), "--out", str(root), "--run-id", "run", "--no-progress", "--no-cache",
                "--limit", "2").exit_code == 0
    panel = root / "panel.yaml"
    panel.write_text(yaml.safe_dump({"name": "batch", "judges": [
        {"binding": f"openai:fake-model@{server.base_url}", "label": "judge-b", "sampling": {"temperature": 0.0}}]}))
    direct = root / "direct"
    shutil.copytree(root / "run", direct)
    assert _cli("judge", str(direct), "--panel", str(panel), "--no-cache").exit_code == 0
    return root / "run", panel, direct / "panels" / "batch"


def _cli(*args: str) -> Any:
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert res.exit_code in (0, 2), res.output
    return res


def _records(folder: Path) -> list[str]:
    """The panel's records with what varies between two judgings of one run masked: the latencies,
    and whether the calls went in a batch (checked apart)."""
    rd = RunDir(folder)
    judgements = [j.model_dump() for j in read_records(rd.judgements, EpisodeJudgement)]
    for judgement in judgements:
        for call in judgement["calls"]:
            call["latency_s"], call["batched"] = 0, None
    calls = [c.model_copy(update={"latency_s": 0, "batched": None}).model_dump_json()
             for c in read_records(rd.pairwise_calls, PairwiseCall)]
    verdicts = [v.model_dump_json() for v in read_records(rd.pairwise_log, PairwiseVerdict)]
    return sorted(json.dumps(j, sort_keys=True) for j in judgements) + sorted(calls) + sorted(verdicts)


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


def test_batch_judging_fills_the_same_records_without_a_direct_call(
    server: FakeOpenAIServer, finished: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    run, panel, direct = finished
    target = _copy(run, tmp_path / "run")
    direct_calls, batches = len(server.state.requests), len(server.state.batches)
    res = _cli("judge", str(target), "--panel", str(panel), "--no-cache", "--batch", "--batch-poll", "0.05")
    assert res.exit_code == 0, res.output
    assert len(server.state.requests) == direct_calls  # every call went in a batch
    out = target / "panels" / "batch"
    assert _records(out) == _records(direct) and _records(out)
    calls = [c for j in read_records(RunDir(out).judgements, EpisodeJudgement) for c in j.calls]
    calls += read_records(RunDir(out).pairwise_calls, PairwiseCall)
    assert calls and all(c.batched for c in calls) and server.state.batch_answered >= len(calls)
    assert not any(c.batched for j in read_records(RunDir(direct).judgements, EpisodeJudgement) for c in j.calls)
    assert f"{len(calls)} of them in batches" in " ".join(res.output.split())  # the closing line says so
    made = len(server.state.batches) - batches
    assert made >= 1 and len((out / "batches.jsonl").read_text().splitlines()) == made


def test_more_requests_than_a_batch_takes_go_in_several_batches_with_the_same_records(
    server: FakeOpenAIServer, finished: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from emobench.endpoints import batch

    run, panel, direct = finished
    target = _copy(run, tmp_path / "run")
    monkeypatch.setattr(batch, "MAX_REQUESTS", 3)
    monkeypatch.setattr(server.state, "batch_max_requests", 3)  # a larger input file is refused
    batches = len(server.state.batches)
    res = _cli("judge", str(target), "--panel", str(panel), "--no-cache", "--batch", "--batch-poll", "0.05")
    assert res.exit_code == 0, res.output
    made = list(server.state.batches.values())[batches:]
    assert all(len(b["requests"]) <= 3 for b in made)
    assert len(made) > 2 and sum(len(b["requests"]) for b in made) > 3 * 2  # some wave needed several
    assert _records(target / "panels" / "batch") == _records(direct)


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 40), max_size=30), most=st.integers(1, 6), limit=st.integers(1, 60))
def test_split_keeps_every_line_in_order_in_as_few_files_as_the_limits_allow(sizes: list[int], most: int, limit: int) -> None:
    from emobench.endpoints import batch

    lines = {f"k{i}": b"x" * n for i, n in enumerate(sizes)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(batch, "MAX_REQUESTS", most)
        patch.setattr(batch, "MAX_BYTES", limit)
        parts = batch.split(lines)
    assert [k for part in parts for k in part] == list(lines)
    weight = [sum(len(line) + 1 for line in part.values()) for part in parts]
    for part, size in zip(parts, weight, strict=True):
        assert len(part) <= most and (size <= limit or len(part) == 1)  # a line past the limit goes alone
    for part, size, after in zip(parts, weight, parts[1:], strict=False):  # each file is as full as it may be
        first = next(iter(after.values()))
        assert len(part) == most or size + len(first) + 1 > limit


def test_a_killed_batch_judge_resumes_its_batch(server: FakeOpenAIServer, finished: tuple[Path, Path, Path],
                                                tmp_path: Path) -> None:
    run, panel, direct = finished
    target = _copy(run, tmp_path / "run")
    ledger = target / "panels" / "batch" / "batches.jsonl"
    server.state.batch_polls = 10**9  # the batch stays in progress until the command is killed
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    child = subprocess.Popen([sys.executable, "-m", "emobench", "judge", str(target), "--panel", str(panel), "--no-cache",
                              "--batch", "--batch-poll", "0.05"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (ledger.exists() and ledger.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ledger.exists(), child.stderr.read().decode() if child.poll() is not None else "no batch in 60 s"
    finally:
        child.kill()
        child.wait()
        server.state.batch_polls = 0
    sent = [json.loads(line)["batch"] for line in ledger.read_text().splitlines()]
    batches = len(server.state.batches)
    res = _cli("judge", str(target), "--panel", str(panel), "--no-cache", "--batch", "--batch-poll", "0.05")
    assert res.exit_code == 0, res.output
    resumed = [json.loads(line)["batch"] for line in ledger.read_text().splitlines()]
    assert resumed[: len(sent)] == sent and _records(target / "panels" / "batch") == _records(direct)
    # The requests of the killed command's batch were not sent again: only what came after them was.
    assert len(server.state.batches) - batches == len(resumed) - len(sent)


def test_an_expired_batch_sends_what_it_did_not_reach_again(
    server: FakeOpenAIServer, finished: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    run, panel, direct = finished
    target = _copy(run, tmp_path / "run")
    server.state.batch_expire_after = 5
    batches = len(server.state.batches)
    try:
        res = _cli("judge", str(target), "--panel", str(panel), "--no-cache", "--batch", "--batch-poll", "0.05")
    finally:
        server.state.batch_expire_after = None
    assert res.exit_code == 0, res.output
    out = target / "panels" / "batch"
    assert _records(out) == _records(direct)
    expired = RunDir(out).fault_counts().get("batch_expired", 0)
    assert expired > 0 and len(server.state.batches) - batches > 1  # what expired went in later batches


def test_batch_needs_an_openai_binding(server: FakeOpenAIServer, finished: tuple[Path, Path, Path], tmp_path: Path) -> None:
    run, _, _ = finished
    panel = tmp_path / "p.yaml"
    replicas = f"openai:fake-model@{server.base_url},{server.base_url}"  # the litellm Router: no Batch API behind it
    panel.write_text(yaml.safe_dump({"name": "lite", "judges": [{"binding": replicas, "label": "j"}]}))
    res = _cli("judge", str(_copy(run, tmp_path / "run")), "--panel", str(panel), "--no-cache", "--batch")
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "--batch" in res.output, res.output
