"""`emobench run --batch`: the holistic and pairwise judging of a run goes through the Batch API
(the fake server's files and batches) after each wave, the per-turn judge stays direct, and the
records are those of a plain run but for the batched calls' flag and price; a run killed while
its batch runs resumes by polling that batch; an expired batch's unanswered requests go again;
the counted calls are the requests the server received."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from emobench.cli import app
from emobench.config import Price
from emobench.records import Episode, EpisodeJudgement, ModelCall, PairwiseCall, PairwiseVerdict
from emobench.rundir import RunDir, read_records
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState
from tests.test_cli_dry_run import cache_rows

ROOT = Path(__file__).resolve().parents[1]
PRICE = {"input_per_mtok": 2.0, "output_per_mtok": 8.0}


@pytest.fixture(scope="module")
def server() -> Any:
    with FakeOpenAIServer(FakeState()) as srv:
        yield srv


@pytest.fixture(scope="module")
def plain(server: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A config of two subjects (a model and the scripted platitude), its judge priced, and its run by direct calls."""
    root = tmp_path_factory.mktemp("batchrun")
    binding = f"openai:fake-model@{server.base_url}"
    cfg = write_config(root / "c.yaml", server.base_url, max_turns=2, min_turns=1, seeds=[0],
                       subjects=[{"binding": binding, "label": "model"}, {"binding": "scripted:platitude", "label": "platitude"}],
                       judges=[{"binding": binding, "label": "judge-0", "price": PRICE}])
    _run("--config", str(cfg), "--out", str(root), "--run-id", "plain")
    return cfg, root / "plain"


def _run(*args: str) -> Any:
    res = CliRunner().invoke(app, ["run", "--no-progress", "--no-cache", "--limit", "2", *args], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return res


def _calls(folder: Path) -> list[ModelCall]:
    rd = RunDir(folder)
    return ([c for e in rd.read_episodes() for c in e.calls] + [c for j in read_records(rd.judgements, EpisodeJudgement)
                                                                for c in j.calls]
            + list(read_records(rd.pairwise_calls, PairwiseCall)))


def _records(folder: Path) -> list[str]:
    """Episodes, judgements and pairwise records, with the clock's readings and the batched flag masked."""
    rd = RunDir(folder)

    def masked(record: Episode | EpisodeJudgement | PairwiseCall) -> str:
        data = record.model_dump(mode="json")
        data.pop("started_at", None), data.pop("finished_at", None)
        for call in data.get("calls", [data]):
            call["latency_s"], call["batched"] = 0, None
        return json.dumps(data, sort_keys=True)

    episodes = [masked(e) for e in rd.read_episodes()]
    judgements = [masked(j) for j in read_records(rd.judgements, EpisodeJudgement)]
    calls = [masked(c) for c in read_records(rd.pairwise_calls, PairwiseCall)]
    verdicts = [v.model_dump_json() for v in read_records(rd.pairwise_log, PairwiseVerdict)]
    return sorted(episodes) + sorted(judgements) + sorted(calls) + sorted(verdicts)


def test_a_batch_run_fills_a_plain_runs_records_at_half_the_judging_price(
    server: FakeOpenAIServer, plain: tuple[Path, Path], tmp_path: Path
) -> None:
    cfg, direct = plain
    requests, answered, made = len(server.state.requests), server.state.batch_answered, len(server.state.batches)
    res = _run("--config", str(cfg), "--out", str(tmp_path), "--run-id", "b", "--batch", "--batch-poll", "0.05")
    out = tmp_path / "b"
    assert _records(out) == _records(direct) and _records(out)
    judged = [c for j in read_records(RunDir(out).judgements, EpisodeJudgement) for c in j.calls]
    pairwise = list(read_records(RunDir(out).pairwise_calls, PairwiseCall))
    per_turn = [c for e in RunDir(out).read_episodes() for c in e.calls if c.role == "judge"]
    assert judged and pairwise and per_turn  # holistic and pairwise batched, the per-turn judge direct
    assert all(c.batched for c in judged + pairwise) and not any(c.batched for c in per_turn)
    # Every live call counted is a request the server received, directly or in a batch.
    live = [c for c in _calls(out) if not c.model.startswith("scripted:")]
    received = len(server.state.requests) - requests + server.state.batch_answered - answered
    assert len(live) == received and server.state.batch_answered - answered == len(judged + pairwise)
    assert f"{len(judged + pairwise)} of them in batches" in " ".join(res.output.split())
    assert len(server.state.batches) - made == len((out / "batches.jsonl").read_text().splitlines()) == 1
    # The judge's cost: its batched calls at half price, the rest as in the plain run.
    price = Price(**PRICE)
    cost = {folder: RunDir(folder).read_report()["accounting"]["judge:fake-model"]["cost_usd"] for folder in (out, direct)}
    halved = sum(price.cost_usd(c.prompt_tokens, c.completion_tokens) for c in judged + pairwise) / 2
    assert cost[out] == pytest.approx(cost[direct] - halved, abs=2e-6) and halved > 0


def test_an_adaptive_batch_run_judges_each_wave_in_its_own_batch_and_counts_it(
    server: FakeOpenAIServer, plain: tuple[Path, Path], tmp_path: Path
) -> None:
    cfg, direct = plain
    requests, answered = len(server.state.requests), server.state.batch_answered
    _run("--config", str(cfg), "--out", str(tmp_path), "--run-id", "a", "--batch", "--batch-poll", "0.05",
         "--stop-when", "calls<=100000", "--stop-when", "cost<=1000", "--wave", "1")
    out = tmp_path / "a"
    assert _records(out) == _records(direct)  # both cases played: the grid's records
    ledger = [json.loads(line) for line in (out / "batches.jsonl").read_text().splitlines()]
    assert len(ledger) == 2  # one batch a wave, sent before the stop was decided
    block = RunDir(out).read_manifest()["adaptive"]
    received = len(server.state.requests) - requests + server.state.batch_answered - answered
    assert block["cases_played"] == 2 and block["calls"] == received
    price = Price(**PRICE)
    judge = [c for c in _calls(out) if c.role == "judge" or isinstance(c, PairwiseCall)]
    assert block["cost_usd"] == pytest.approx(sum(price.cost_usd(c.prompt_tokens, c.completion_tokens, batched=c.batched)
                                                  for c in judge), abs=1e-6)


def test_a_killed_batch_run_resumes_its_batch(server: FakeOpenAIServer, plain: tuple[Path, Path], tmp_path: Path) -> None:
    cfg, direct = plain
    out, ledger = tmp_path / "k", tmp_path / "k" / "batches.jsonl"
    server.state.batch_polls = 10**9  # the batch stays in progress until the run is killed
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    child = subprocess.Popen([sys.executable, "-m", "emobench", "run", "--config", str(cfg), "--out", str(tmp_path),
                              "--run-id", "k", "--no-progress", "--no-cache", "--limit", "2", "--batch", "--batch-poll",
                              "0.05"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 90
        while not (ledger.exists() and ledger.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ledger.exists(), child.stderr.read().decode() if child.poll() is not None else "no batch in 90 s"
    finally:
        child.kill()
        child.wait()
        server.state.batch_polls = 0
    sent = [json.loads(line)["batch"] for line in ledger.read_text().splitlines()]
    # Resumed without --batch, the batches in flight would be paid again: refused, in one line.
    refused = CliRunner().invoke(app, ["run", "--resume", str(out), "--no-progress", "--no-cache"])
    assert refused.exit_code == 2 and refused.output.count("\n") == 1 and "resume it with --batch" in refused.output
    requests, made = len(server.state.requests), len(server.state.batches)
    _run("--resume", str(out), "--batch", "--batch-poll", "0.05")
    assert _records(out) == _records(direct)
    resumed = [json.loads(line)["batch"] for line in ledger.read_text().splitlines()]
    # Every episode had ended before the kill, and the killed run's batch was polled, not sent again.
    assert resumed == sent and len(server.state.batches) == made and len(server.state.requests) == requests
    _run("--resume", str(out))  # every episode judged: nothing left to pay twice, so --batch is not needed
    assert len(server.state.requests) == requests and _records(out) == _records(direct)


def test_an_expired_batch_sends_what_it_did_not_reach_again(
    server: FakeOpenAIServer, plain: tuple[Path, Path], tmp_path: Path
) -> None:
    cfg, direct = plain
    server.state.batch_expire_after = 2
    made = len(server.state.batches)
    try:
        _run("--config", str(cfg), "--out", str(tmp_path), "--run-id", "e", "--batch", "--batch-poll", "0.05")
    finally:
        server.state.batch_expire_after = None
    out = tmp_path / "e"
    assert _records(out) == _records(direct)
    assert RunDir(out).fault_counts().get("batch_expired", 0) > 0 and len(server.state.batches) - made > 1


def test_batch_needs_an_openai_judge(server: FakeOpenAIServer, plain: tuple[Path, Path], tmp_path: Path) -> None:
    replicas = f"openai:fake-model@{server.base_url},{server.base_url}"  # the litellm Router: no Batch API behind it
    cfg = write_config(tmp_path / "c.yaml", server.base_url, judges=[{"binding": replicas, "label": "j"}])
    for extra in ([], ["--dry-run"]):
        res = CliRunner().invoke(app, ["run", "--config", str(cfg), "--out", str(tmp_path), "--batch", *extra])
        assert res.exit_code == 2 and res.output.count("\n") == 1 and "--batch" in res.output, res.output
    res = CliRunner().invoke(app, ["run", "--config", str(plain[0]), "--out", str(tmp_path), "--batch", "--ray", "local"])
    assert res.exit_code == 2 and res.output.startswith("error: --batch: not with --ray"), res.output
    assert not any(tmp_path.glob("*/manifest.json"))  # refused before anything was written


def test_the_dry_run_counts_the_batched_calls_and_prices_them_at_half(server: FakeOpenAIServer, tmp_path: Path) -> None:
    """No retries, so the dry run's most is what a run makes: its batched calls are the run's, and
    with only output tokens priced, the batch figure is the cached one less half of theirs."""
    binding = f"openai:fake-model@{server.base_url}"
    judge = {"binding": binding, "label": "judge-0", "price": {"input_per_mtok": 0, "output_per_mtok": 8},
             "sampling": {"max_tokens": 200, "temperature": 0.0}}
    cfg = write_config(tmp_path / "c.yaml", server.base_url, max_turns=2, min_turns=1, seeds=[0], judge_retries=0,
                       subjects=[{"binding": binding, "label": "model"}, {"binding": "scripted:platitude", "label": "platitude"}],
                       judges=[judge])
    dry = CliRunner().invoke(app, ["run", "--config", str(cfg), "--limit", "2", "--dry-run"], env={"COLUMNS": "200"})
    assert dry.exit_code == 0, dry.output
    text = " ".join(dry.output.split())
    found = re.search(r"With --batch: ([\d,]+) of the calls .*?, \$([\d.]+) with the prompt cache;", text)
    assert found, text
    batched, dollars = int(found[1].replace(",", "")), float(found[2])
    assert dollars == pytest.approx(float(cache_rows(dry.output)["total"][2]) - batched * 200 * 8e-6 / 2, abs=1e-4)
    assert f"${dollars / 2:.4f} with the prompt cache and --batch" in text  # the adaptive figure: half the cases
    _run("--config", str(cfg), "--out", str(tmp_path), "--run-id", "r", "--batch", "--batch-poll", "0.05")
    assert batched == sum(c.batched for c in _calls(tmp_path / "r")) > 0
