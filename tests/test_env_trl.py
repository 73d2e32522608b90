"""TRL's GRPOTrainer on emobench episodes: one real training step, simulator and judge on the fake server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from emobench.env.trl import reward_funcs
from tests.conftest import Serve, write_config
from tests.test_env import varied

pytest.importorskip("trl")


@pytest.mark.train
def test_one_grpo_step_plays_whole_episodes_and_logs_per_turn_rewards(serve: Serve, tmp_path: Path) -> None:
    from emobench.env import train_example

    server = serve(varied)
    cfg = write_config(tmp_path / "train.yaml", server.base_url, probe=False, max_turns=3, min_turns=2,
                       reward={"meter": 0.5})
    history = train_example.train(cfg, tmp_path / "out", steps=1, generations=2, max_new_tokens=8)
    logged: dict[str, Any] = history[0]
    assert logged["rewards/episode_return/mean"] == pytest.approx(logged["reward"])
    for name in ("dense", "meter", "success", "epmq"):
        assert f"rewards/{name}/mean" in logged
    assert "emobench/turn1/reward" in logged and "emobench/turn1/dense" in logged
    assert 1 <= logged["emobench/turns"] <= 3
    # Every reply the subject made came from the policy: the fake server answered no subject call.
    kinds = [(r["body"].get("response_format") or {}).get("json_schema", {}).get("name") for r in server.state.requests]
    assert None not in kinds and "user_move" in kinds and "mdep_verdict" in kinds


def test_reward_functions_sum_steps_and_leave_missing_components_out() -> None:
    funcs, weights = reward_funcs()
    assert weights[0] == 1.0 and not any(weights[1:])
    none = {"reward": None, "dense": None, "meter": None, "audit_flags": 0}
    steps = [[{**none, "reward": 0.5, "dense": 0.5}, none], [none]]
    metrics: dict[str, float] = {}
    assert funcs[0](steps, log_metric=metrics.__setitem__) == [0.5, None]
    dense = next(f for f in funcs if f.__name__ == "dense")
    assert dense(steps) == [0.5, None]
    assert metrics["emobench/turn1/reward"] == 0.5 and "emobench/turn2/reward" not in metrics
