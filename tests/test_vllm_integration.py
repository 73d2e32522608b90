"""Real episodes, judge checks, a replay and a GRPO step on a real vLLM server with the embedded
SmolLM2-135M-Instruct.

Slow (a server start is ~60-90 s on 2 CPU cores), so the tests share the run's one embedded
server (conftest's ``embedded_vllm``), and they live in this one module so that pytest-xdist runs
them on one worker (``--dist loadfile``); only the test of ``emobench run`` starting and stopping
a server of its own starts another.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pandas as pd
import pytest
from typer.testing import CliRunner

from emobench.cli import app
from emobench.config import validate_config
from emobench.endpoints.embedded import SERVED_NAME, URL_ENV, prepare_embedded_model, served_dtype
from emobench.registry import load_registry
from emobench.run.finalize import finalize_run
from emobench.run.runner import ROOT, run_benchmark
from emobench.rundir import RunDir
from emobench.validation.epitome.data import MECHANISMS

pytestmark = pytest.mark.vllm
ESCONV = ROOT / "tests" / "fixtures" / "esconv"
EPITOME = ROOT / "tests" / "data" / "epitome"


def _validate(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    """`emobench validate` as a user runs it, with a response cache of its own."""
    env = {**os.environ, "COLUMNS": "220", "EMOBENCH_RESPONSE_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "emobench", "validate", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=600)


def test_embedded_model_converted_in_the_dtype_it_is_served_in() -> None:
    # vLLM's "auto" would read this; emobench also passes --dtype, and the two must agree.
    dtype = served_dtype()
    config = json.loads((prepare_embedded_model(dtype) / "config.json").read_text())
    assert config.get("dtype", config.get("torch_dtype")) == dtype


def _config(url: str, **extra: object) -> dict[str, object]:
    binding = f"openai:{SERVED_NAME}@{url}"
    return {
        "subjects": [{"binding": binding, "label": "smollm2", "sampling": {"temperature": 0.7, "max_tokens": 48}}],
        "user": {"binding": binding, "sampling": {"temperature": 0.8, "max_tokens": 96}},
        "judges": [{"binding": binding, "label": "judge", "sampling": {"temperature": 0.0, "max_tokens": 320}}],
        "split": "demo",
        "limit_cases": 1,
        "max_turns": 2,
        "min_turns": 2,
        **extra,
    }


def test_a_real_episode_on_real_vllm(embedded_vllm: str, tmp_path: Path) -> None:
    config = validate_config(_config(embedded_vllm), "test")
    result = asyncio.run(run_benchmark(config, tmp_path / "run", show_progress=False))
    rd = RunDir(result.run_dir)
    [episode] = finalize_run(rd, load_registry(ROOT))
    assert 1 <= len(episode.turns) <= 2 and episode.stop_reason in {"max_turns", "user_left", "simulator_invalid"}
    for call in episode.calls:
        assert call.model == SERVED_NAME and call.endpoint == embedded_vllm
        assert call.prompt_tokens > 0 and call.completion_tokens > 0 and call.latency_s > 0
        assert call.template and call.seed >= 0 and not call.cached
    subject_calls = [c for c in episode.calls if c.role == "subject"]
    assert subject_calls and all(c.text.strip() for c in subject_calls)
    assert all(c.finish_reason in {"stop", "length"} for c in subject_calls)
    # Structured output: every judge answer parsed, or was retried and recorded invalid.
    for turn in episode.turns:
        for verdict in turn.judgement.verdicts:
            assert verdict.valid == (verdict.axes is not None)
            assert verdict.valid or verdict.error
    scores = pd.read_parquet(rd.scores)
    assert len(scores) == 1 and scores.loc[0, "n_turns"] == len(episode.turns)
    if scores.loc[0, "n_judged_turns"]:
        assert 0 <= scores.loc[0, "epmq"] <= 100


def test_a_chinese_case_completes_on_real_vllm(embedded_vllm: str, tmp_path: Path) -> None:
    """SmolLM2-135M has essentially no Chinese: this checks that the pipeline completes a
    Chinese case on a real server with the Chinese templates, not what the model says."""
    config = validate_config(_config(embedded_vllm, split="demo-zh"), "test")
    result = asyncio.run(run_benchmark(config, tmp_path / "run", show_progress=False))
    rd = RunDir(result.run_dir)
    [episode] = finalize_run(rd, load_registry(ROOT))
    assert episode.language == "zh" and episode.case_id.startswith("demozh-") and episode.turns
    assert {c.endpoint for c in episode.calls} == {embedded_vllm}
    manifest = rd.read_manifest()
    assert manifest["templates_language"]["prompts"] == "zh" and manifest["language"] == "zh"
    assert manifest["prompt_versions"]["simulator"].startswith("zh-")
    assert manifest["prompt_versions"]["judge"].startswith("zh-")
    scores = pd.read_parquet(rd.scores)
    assert list(scores["language"]) == ["zh"] and scores.loc[0, "trackers_absent"].startswith("trackers: not run for zh")
    assert scores["valence_path"].isna().all() and scores["final_meter"].notna().all()


def test_emobench_run_launches_and_stops_its_own_vllm_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its own server, not the shared one: the start and the stop are what it checks.
    monkeypatch.delenv(URL_ENV, raising=False)
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--max-turns",
            "2",
            "--min-turns",
            "2",
            "--limit",
            "1",
            "--out",
            str(tmp_path),
            "--run-id",
            "demo",
            "--no-progress",
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    rd = RunDir(tmp_path / "demo")
    manifest = rd.read_manifest()
    endpoint = manifest["roles"]["subjects"][0]["endpoint"]
    assert endpoint.startswith("vllm:embedded (http://127.0.0.1:")
    assert manifest["roles"]["subjects"][0]["served_dtype"] == served_dtype()
    port = urlparse(endpoint.split("(")[1].rstrip(")")).port
    with socket.socket() as sock:  # the server is gone: nothing listens on its port
        assert sock.connect_ex(("127.0.0.1", port)) != 0
    log = next(rd.logs.glob("vllm-*.log")).read_text()
    assert "Application startup complete" in log
    # The demo config plays its reference subject beside the model, in-process.
    episodes = {e.subject: e for e in rd.read_episodes()}
    assert set(episodes) == {"vllm:embedded", "scripted:platitude"} and rd.leaderboard.exists()
    assert {c.endpoint for c in episodes["scripted:platitude"].calls if c.role == "subject"} == {"in-process"}
    assert rd.read_report()["validity"]["reference_subjects"] == ["scripted:platitude"]
    assert "vllm:embedded" in result.output and "scripted:platitude" in result.output
    # The server reports its prefix-cache hits per call (--enable-prompt-tokens-details): the judge's
    # second turn begins as its first did.
    judge = [c for e in episodes.values() for c in e.calls if c.role == "judge"]
    assert any(c.cached_prompt_tokens > 0 for c in judge) and all(c.cached_prompt_tokens < c.prompt_tokens for c in judge)


def test_director_two_judge_panel_and_rescore_on_real_vllm(embedded_vllm: str, tmp_path: Path) -> None:
    binding = f"openai:{SERVED_NAME}@{embedded_vllm}"
    judges = [
        {"binding": binding, "label": "judge-greedy", "sampling": {"temperature": 0.0, "max_tokens": 320}},
        {"binding": binding, "label": "judge-sampled", "sampling": {"temperature": 0.8, "max_tokens": 320}},
    ]
    data = _config(embedded_vllm)
    data.pop("judges")
    data.update(
        subjects=[
            {"binding": binding, "label": "smol-warm", "sampling": {"temperature": 0.7, "max_tokens": 48}},
            {"binding": binding, "label": "smol-cool", "sampling": {"temperature": 0.2, "max_tokens": 48}},
        ],
        panel={"name": "pair", "judges": judges},
        director={"binding": binding, "label": "director", "sampling": {"temperature": 0.3, "max_tokens": 128}},
    )
    config = validate_config(data, "test")
    result = asyncio.run(run_benchmark(config, tmp_path / "run", show_progress=False))
    rd = RunDir(result.run_dir)
    episodes = finalize_run(rd, load_registry(ROOT))
    assert len(episodes) == 2
    for episode in episodes:
        roles = {c.role for c in episode.calls}
        assert {"subject", "judge", "director"} <= roles
        assert all(len(t.judgement.verdicts) == 2 for t in episode.turns)
        assert all(t.director is not None for t in episode.turns)
    report = rd.read_report()
    assert report["reliability"]["n_judges"] == 2 and "mdep.A.progress" in report["reliability"]["alpha"]
    assert rd.pairwise_log.exists()

    panel = tmp_path / "rescore.yaml"
    panel.write_text(json.dumps({"name": "greedy-only", "judges": judges[:1]}))
    rescored = CliRunner().invoke(app, ["judge", str(rd.path), "--panel", str(panel), "--no-cache"], env={"COLUMNS": "200"})
    assert rescored.exit_code == 0, rescored.output
    out = rd.path / "panels" / "greedy-only"
    assert len(pd.read_parquet(out / "scores.parquet")) == 2
    assert len(rd.read_episodes()) == 2  # no conversation was regenerated


def test_the_embedded_judge_checks_the_esconv_fixture_on_real_vllm(tmp_path: Path, embedded_vllm: str) -> None:
    out = tmp_path / "validity.json"
    result = _validate("--judge-check", "esconv", "--data", str(ESCONV / "original" / "FailedESConv.json"), "--limit", "1",
                       "--n-boot", "50", "-o", str(out), cache=tmp_path / "cache.sqlite")
    assert result.returncode == 0, result.stderr
    block = json.loads(out.read_text())["judge_check_esconv"]
    [(label, panel)] = block["panels"].items()
    assert label == "embedded" and panel["judges"][0]["model"] == "smollm2-135m-instruct"
    assert block["data"]["n_chats"] == {"FailedESConv": 1} and block["feedback_label"] == "failed chats only"
    turn = panel["all"]["per_turn"]
    assert turn["n"] == block["n_feedback_points"] >= 2 and 0 <= turn["n_valid"] <= turn["n"]
    assert panel["cost"]["n_calls"] >= 2 and panel["cost"]["completion_tokens"] > 0


def test_the_embedded_simulator_replays_the_esconv_fixture_on_real_vllm(tmp_path: Path, embedded_vllm: str) -> None:
    out = tmp_path / "validity.json"
    result = _validate("--fidelity-replay", "esconv", "--data", str(ESCONV / "original"), "--user", "vllm:embedded",
                       "--limit", "1", "--n-boot", "50", "-o", str(out), cache=tmp_path / "cache.sqlite")
    assert result.returncode == 0, result.stderr
    block = json.loads(out.read_text())["fidelity_replay"]
    assert block["user"]["model"] == "smollm2-135m-instruct" and block["cost"]["completion_tokens"] > 0
    pooled = block["figures"]["all"]
    assert pooled["n_chats"] == len(block["chats"]) >= 1 and pooled["n_turns"] >= 1
    assert pooled["invalid"]["k"] <= pooled["n_turns"]


def test_the_embedded_judge_checks_the_epitome_fixture_on_real_vllm(tmp_path: Path, embedded_vllm: str) -> None:
    out = tmp_path / "validity.json"
    result = _validate("--judge-check", "epitome", "--data", str(EPITOME), "--limit", "1", "--n-boot", "50", "-o", str(out),
                       cache=tmp_path / "cache.sqlite")
    assert result.returncode == 0, result.stderr
    block = json.loads(out.read_text())["judge_check"]
    [(label, panel)] = block["panels"].items()
    assert label == "embedded" and panel["judges"][0]["model"] == "smollm2-135m-instruct"
    assert block["limit"] == 1 and 1 <= block["n_rated_pairs"] <= 3
    for mechanism in MECHANISMS:
        row = panel["mechanisms"][mechanism]
        assert row["n"] == 1 and row["n_valid"] + round(row["invalid_share"]["value"]) == 1
    assert panel["cost"]["n_calls"] >= 2 * block["n_rated_pairs"] and panel["cost"]["completion_tokens"] > 0


def test_grpo_example_on_real_vllm(tmp_path: Path, embedded_vllm: str) -> None:
    """The README's training example, one step: simulator and judge on vLLM, the policy in process."""
    pytest.importorskip("trl")
    from emobench.env import train_example

    history = train_example.train(ROOT / "configs" / "train.yaml", tmp_path, steps=1, generations=2, max_new_tokens=24)
    logged = history[0]
    assert "rewards/episode_return/mean" in logged and "emobench/turns" in logged
    assert any(key.startswith("emobench/turn1/") for key in logged)  # per-turn rewards reached the log
    assert (tmp_path / "log_history.json").exists()
