"""`emobench verify --spot-check N --subject BINDING`: the subject's cells played again against the
loopback fake server, where two fake "models" answer differently and the fake judges see it."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.board.replay import Noise, decide, pooled_noise
from tests.fake_openai import DISMISSIVE, FakeOpenAIServer, FakeState, default_responder
from tests.gate_support import emobench

CASES = ["test4-01", "test4-02"]
SEEDS = [0, 1, 2]
NAMED = "subject-model"


def _models(named_dismissive: bool) -> Any:
    """A server on which the model NAMED answers dismissively (as it really does) or warmly (a
    better model served under its name); the judges rate what they read, one level more on odd seeds."""
    def respond(body: dict[str, Any]) -> str:
        fmt = (body.get("response_format") or {}).get("json_schema", {}).get("name")
        if fmt is None and body.get("model") == NAMED and named_dismissive:
            return DISMISSIVE
        if fmt == "mdep_verdict":
            odd = int(body.get("seed") or 0) % 2
            cold = DISMISSIVE in body["messages"][-1]["content"]
            axis = {"progress": 0 if cold else 1 + odd, "regression": 1 + odd if cold else 0,
                    "evidence": DISMISSIVE if cold else "that sounds hard", "reason": "as read"}
            return json.dumps({a: axis for a in ("C", "A", "P")})
        return default_responder(body)
    return respond


def _submission(root: Path, name: str, named_dismissive: bool) -> Path:
    with FakeOpenAIServer(FakeState(responder=_models(named_dismissive))) as server:
        def role(model: str, label: str) -> dict[str, str]:
            return {"binding": f"openai:{model}@{server.base_url}", "label": label}
        config = {"subjects": [role(NAMED, "subject-0")], "user": role("user-model", "user"),
                  "judges": [role("judge-model-0", "judge-0")], "split": "test", "cases": CASES, "seeds": SEEDS,
                  "max_turns": 3, "min_turns": 2}
        (root / f"{name}.yaml").write_text(yaml.safe_dump(config))
        code, _, err = emobench("run", "--config", str(root / f"{name}.yaml"), "--out", str(root / "runs"),
                                "--run-id", name, "--no-progress")
        assert code == 0, err
    code, _, err = emobench("submit", str(root / "runs" / name), "--out", str(root / name), "--protocol",
                            str(root / "protocol.yaml"), "--model-name", "Subject", "--provider", "self-hosted")
    assert code == 0, err
    return root / name


@pytest.fixture(scope="module")
def submissions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("replay")
    (root / "protocol.yaml").write_text(yaml.safe_dump(
        {"version": 1, "split": "test", "cases": CASES, "seeds": SEEDS, "max_turns": 3, "min_turns": 2,
         "scoring_profile": "emobench", "min_judges": 1, "spot_check_alpha": 0.01}))
    return {"protocol": root / "protocol.yaml", "honest": _submission(root, "honest", True),
            "better model": _submission(root, "better", False)}


def _verify(submissions: dict[str, Path], which: str, url: str, *extra: str) -> tuple[int, str, str]:
    return emobench("verify", str(submissions[which]), "--protocol", str(submissions["protocol"]),
                    "--spot-check", "4", "--user", f"openai:user-model@{url}", "--judge", f"openai:judge-model-0@{url}",
                    *extra)


def test_an_honest_replay_passes_and_a_better_model_under_the_name_is_refused(submissions: dict[str, Path]) -> None:
    with FakeOpenAIServer(FakeState(responder=_models(True))) as server:  # the named model, as it answers
        subject = ("--subject", f"openai:{NAMED}@{server.base_url}")
        code, out, err = _verify(submissions, "honest", server.base_url, *subject)
        assert code == 0, err
        assert "4 cell(s) of subject-0 (subject-model) played again" in out and "+0.00 points" in out
        assert "false-alarm rate 0.01" in out
        # Every record of the better model's run is consistent: only the replay sees the difference.
        code, _, err = emobench("verify", str(submissions["better model"]), "--protocol", str(submissions["protocol"]))
        assert code == 0, err
        code, out, err = _verify(submissions, "better model", server.base_url, *subject)
        assert code == 1 and "[spot-check] scores.parquet: epmq: the submitted scores are +" in err, (out, err)
        assert "above 4 replay(s) of 'subject-model'" in err and "false-alarm rate of 0.01" in err
        asked = [r["body"]["model"] for r in server.state.requests]
        assert NAMED in asked and "user-model" in asked and "judge-model-0" in asked


def test_a_subject_or_user_other_than_the_recorded_model_is_one_line_and_exit_2(submissions: dict[str, Path]) -> None:
    url = "http://127.0.0.1:9/v1"  # never reached: the model ids are checked first
    code, _, err = _verify(submissions, "honest", url, "--subject", f"openai:other-model@{url}")
    assert code == 2 and "--subject" in err and "'other-model' is not a recorded subject model (subject-model)" in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = emobench("verify", str(submissions["honest"]), "--protocol", str(submissions["protocol"]),
                            "--spot-check", "1", "--subject", f"openai:{NAMED}@{url}", "--user", f"openai:sim@{url}")
    assert code == 2 and "'sim' is not the recorded user model 'user-model'" in err
    code, _, err = emobench("verify", str(submissions["honest"]), "--protocol", str(submissions["protocol"]),
                            "--subject", f"openai:{NAMED}@{url}")
    assert code == 2 and "a replay needs --spot-check N" in err


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(0, 100), min_size=1, max_size=4), min_size=1, max_size=6).filter(
    lambda cases: any(len(c) > 1 for c in cases)), st.lists(st.floats(-50, 50), min_size=6, max_size=6))
def test_the_pooled_spread_is_each_cases_ddof1_variance_pooled_and_ignores_case_shifts(
        cases: list[list[float]], shifts: list[float]) -> None:
    noise = pooled_noise((str(i), x) for i, xs in enumerate(cases) for x in xs)
    assert noise.df == sum(len(xs) - 1 for xs in cases)
    pooled = sum(np.var(xs, ddof=1) * (len(xs) - 1) for xs in cases if len(xs) > 1) / noise.df
    assert math.isclose(noise.sd ** 2, pooled, rel_tol=1e-9, abs_tol=1e-9)
    moved = pooled_noise((str(i), x + shifts[i]) for i, xs in enumerate(cases) for x in xs)
    assert math.isclose(moved.sd, noise.sd, rel_tol=1e-6, abs_tol=1e-6)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0, 100)), min_size=1, max_size=30),
       st.floats(0.1, 30), st.integers(1, 200), st.floats(0.001, 0.2), st.floats(0, 100))
def test_the_decision_moves_with_the_scores_and_its_threshold_with_n_and_alpha(
        pairs: list[tuple[float, float]], sd: float, df: int, alpha: float, lift: float) -> None:
    submitted, replayed = [a for a, _ in pairs], [b for _, b in pairs]
    noise = Noise(sd, df)
    base = decide(submitted, replayed, noise, alpha)
    inflated = decide([a + lift for a in submitted], replayed, noise, alpha)
    assert math.isclose(inflated.mean_diff - base.mean_diff, lift, abs_tol=1e-9)
    assert inflated.threshold == base.threshold > 0
    assert inflated.refused or not base.refused  # inflating never turns a refusal into a pass
    assert decide(submitted * 2, replayed * 2, noise, alpha).threshold < base.threshold
    assert decide(submitted, replayed, noise, alpha / 2).threshold > base.threshold


def test_honest_replays_under_normal_noise_are_refused_at_about_alpha() -> None:
    rng, alpha, refused = random.Random(0), 0.05, 0
    for _ in range(4000):
        truth = [rng.uniform(20, 80) for _ in range(10)]
        seeds = [[m + rng.gauss(0, 8) for _ in range(3)] for m in truth]
        noise = pooled_noise((str(i), x) for i, xs in enumerate(seeds) for x in xs)
        cells = rng.sample(range(10), 5)
        test = decide([seeds[c][0] for c in cells], [truth[c] + rng.gauss(0, 8) for c in cells], noise, alpha)
        refused += test.refused
    assert 0.035 < refused / 4000 < 0.065
