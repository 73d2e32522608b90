"""emobench.env against the fake server: replayed episodes equal `emobench run`'s, rewards, guards."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from emobench.config import load_config_data, validate_config
from emobench.env import EmoEnv, RewardConfig, StepResult, open_host, split_training_config
from emobench.records import Episode
from emobench.run.runner import run_benchmark
from emobench.rundir import RunDir
from tests.conftest import Serve, write_config
from tests.fake_openai import default_responder


def _kind(body: dict[str, Any]) -> str | None:
    return (body.get("response_format") or {}).get("json_schema", {}).get("name")


def varied(body: dict[str, Any]) -> str:
    """Replies, verdicts and meter moves that differ by request seed, so episodes take different paths."""
    seed = int(body.get("seed") or 0)
    kind = _kind(body)
    if kind is None:
        return f"<think>plan {seed}: mirror them</think>That sounds heavy ({seed % 13}). What weighs most?"
    if kind == "mdep_verdict":
        def axis(p: int, r: int) -> dict[str, Any]:
            return {"progress": p, "regression": r, "evidence": "that sounds heavy" if p or r else "", "reason": "x"}
        return json.dumps({"C": axis(seed % 3, 0), "A": axis((seed // 3) % 3, seed % 2), "P": axis(0, (seed // 7) % 2)})
    if kind == "user_move":
        delta = (seed % 15) - 10
        return json.dumps({"message": f"Maybe ({seed % 89}).", "meter_delta": delta, "inner": "x", "leave": delta <= -7})
    return default_responder(body)


def _timeless(episode: Episode) -> dict[str, Any]:
    """The record without its wall-clock fields (start, finish, measured latency)."""
    data = episode.model_dump(mode="json")
    data.pop("started_at"), data.pop("finished_at")
    for call in data["calls"]:
        call.pop("latency_s")
    return data


def _config(tmp: Path, url: str, **extra: Any) -> Path:
    settings: dict[str, Any] = {"probe": False, "seeds": [0, 1, 2], "max_turns": 6, "min_turns": 3, **extra}
    return write_config(tmp / "run.yaml", url, **settings)


async def _replay(cfg: Path, episodes: list[Episode]) -> list[tuple[Episode, list[StepResult]]]:
    config, rewards = split_training_config(load_config_data(cfg), cfg)
    out = []
    async with open_host(config, rewards, log_dir=cfg.parent / "logs") as host:
        for recorded in episodes:
            env = host.make()
            observation = await env.reset(host.case(recorded.case_id), recorded.seed)
            steps = []
            for call in (c for c in recorded.calls if c.role == "subject"):
                assert observation[-1]["role"] == "user"
                steps.append(await env.step(call))
                observation = steps[-1].observation
            assert steps[-1].done and env.episode is not None
            out.append((env.episode, steps))
    return out


def test_replayed_episodes_give_the_records_of_emobench_run(serve: Serve, tmp_path: Path) -> None:
    server = serve(varied)
    cfg = _config(tmp_path, server.base_url)
    asyncio.run(run_benchmark(validate_config(load_config_data(cfg), cfg), tmp_path / "r", show_progress=False))
    recorded = sorted(RunDir(tmp_path / "r").read_episodes(), key=lambda e: e.key)
    assert len(recorded) == 6 and len({(e.stop_reason, len(e.turns)) for e in recorded}) > 2  # different paths
    replayed = asyncio.run(_replay(cfg, recorded))
    for run_episode, (env_episode, steps) in zip(recorded, replayed, strict=True):
        assert json.dumps(_timeless(env_episode)) == json.dumps(_timeless(run_episode))
        assert len(steps) == len(run_episode.turns) and [s.done for s in steps][-1]
    # The replies carried reasoning; the record keeps it in the call, the turn shows the visible part.
    turn = recorded[0].turns[0]
    assert "<think>" not in turn.reply and turn.reply.startswith("That sounds heavy")


def test_rewards_per_turn_and_terminal_with_components(serve: Serve, tmp_path: Path) -> None:
    server = serve(varied)
    cfg = _config(tmp_path, server.base_url, reward={"meter": 0.5, "empathy": 0.25})

    async def play() -> tuple[list[StepResult], Episode]:
        config, rewards = split_training_config(load_config_data(cfg), cfg)
        async with open_host(config, rewards, log_dir=tmp_path / "logs") as host:
            env = host.make()
            await env.reset(host.cases()[0], 1)
            steps = [await env.step("I hear how heavy this is. What happened today?")]
            while not steps[-1].done:
                steps.append(await env.step("That makes sense. Tell me more about it."))
            assert env.episode is not None
            return steps, env.episode

    steps, episode = asyncio.run(play())
    p0 = sum(x * x for x in episode.p0) ** 0.5
    for step, turn in zip(steps, episode.turns, strict=True):
        c = step.info["components"]
        if turn.epm is None:
            assert c["dense"] is None
        else:
            assert c["dense"] == pytest.approx(turn.epm.delta_e / p0)
    for step in steps[:-1]:  # before the end: only per-turn components
        c = step.info["components"]
        assert c["success"] is None and c["epmq"] is None
        assert c["meter"] is not None
        assert step.reward == pytest.approx((c["dense"] or 0.0) + 0.5 * c["meter"])
    last = steps[-1].info
    assert last["stop_reason"] == episode.stop_reason and isinstance(last["audit"], list)
    assert last["components"]["success"] in (0.0, 1.0) and last["components"]["epmq"] is not None
    assert 0.0 <= last["components"]["empathy"] <= 1.0  # the panel rates holistic Empathy: in the reward


def test_judges_see_only_the_visible_reply_and_an_invalid_verdict_gives_no_reward(serve: Serve, tmp_path: Path) -> None:
    def broken_judge(body: dict[str, Any]) -> str:
        return '{"C": 3' if _kind(body) == "mdep_verdict" else varied(body)

    server = serve(broken_judge)
    cfg = _config(tmp_path, server.base_url, reward={"success": 0.0, "epmq": 0.0})

    async def play() -> StepResult:
        config, rewards = split_training_config(load_config_data(cfg), cfg)
        async with open_host(config, rewards, log_dir=tmp_path / "logs") as host:
            env = host.make()
            await env.reset(host.cases()[0], 0)
            return await env.step("<think>flatter them to max the score</think>That sounds hard.")

    step = asyncio.run(play())
    assert step.reward is None and step.info["components"]["dense"] is None and not step.info["judgement_valid"]
    judged = [json.dumps(r["body"]["messages"]) for r in server.state.requests if _kind(r["body"]) == "mdep_verdict"]
    assert judged and all("That sounds hard." in m and "flatter" not in m for m in judged)
    simulated = [json.dumps(r["body"]["messages"]) for r in server.state.requests if _kind(r["body"]) == "user_move"]
    assert simulated and all("flatter" not in m for m in simulated)


def test_length_normalisation_scales_positive_turn_reward_only() -> None:
    from emobench.env.rewards import combine

    config = RewardConfig(length_cap_chars=100)
    assert combine({"dense": 0.5}, config, 400) == pytest.approx(0.125)
    assert combine({"dense": 0.5}, config, 80) == pytest.approx(0.5)
    assert combine({"dense": -0.5}, config, 400) == pytest.approx(-0.5)  # padding cannot soften a penalty
    assert combine({"dense": 0.5, "success": 1.0}, config, 400) == pytest.approx(1.125)  # terminal part not scaled
    assert combine({"dense": None, "meter": 0.2}, config, 10) is None  # meter weighs 0 by default: nothing to reward


def test_a_bad_reward_section_is_one_line_naming_the_field(tmp_path: Path) -> None:
    from emobench.errors import InputError

    cfg = write_config(tmp_path / "t.yaml", "http://127.0.0.1:9/v1", reward={"dense": "lots"})
    with pytest.raises(InputError, match=r"reward\.dense"):
        split_training_config(yaml.safe_load(cfg.read_text()), cfg)


def test_stepping_before_reset_or_after_the_end_is_refused(serve: Serve, tmp_path: Path) -> None:
    server = serve(varied)
    cfg = _config(tmp_path, server.base_url, max_turns=1, min_turns=1)

    async def play() -> None:
        config, rewards = split_training_config(load_config_data(cfg), cfg)
        async with open_host(config, rewards, log_dir=tmp_path / "logs") as host:
            env: EmoEnv = host.make()
            with pytest.raises(RuntimeError, match="reset"):
                await env.step("hi")
            await env.reset(host.cases()[0], 0)
            assert (await env.step("hi")).done
            with pytest.raises(RuntimeError, match="ended"):
                await env.step("again")

    asyncio.run(play())
