"""The pure episode loop against the fake server: turns, judgements, EPM, stop rules."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from typing import Any

from emobench.episode.loop import run_episode
from emobench.records import Limits
from emobench.registry import Registry
from tests.conftest import PROVENANCE, fake_roles
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder


def _run(server: FakeOpenAIServer, registry: Registry, prompts: Any, limits: Limits, n_judges: int = 1, seed: int = 0) -> Any:
    case = registry.cases("demo")[0]
    return asyncio.run(run_episode(case, fake_roles(server.base_url, n_judges), prompts, seed, limits, PROVENANCE))


def test_episode_runs_to_max_turns_with_full_provenance(fake: FakeOpenAIServer, registry: Registry, prompts: Any) -> None:
    ep = _run(fake, registry, prompts, Limits(max_turns=4, min_turns=4))
    case = registry.cases("demo")[0]
    assert ep.stop_reason == "max_turns"
    assert [t.index for t in ep.turns] == [1, 2, 3, 4]
    assert ep.turns[0].user.message == case.scenario.opening  # turn 1 opens with the card's message
    assert ep.key == f"subject-a|{case.id}|0"
    # Judge verdict C: progress 1, A: progress 2, P: 0 -> v = (1, 3, 0) every turn.
    assert all(t.judgement.vector == (1.0, 3.0, 0.0) for t in ep.turns)
    p0 = case.p0
    assert ep.turns[-1].epm.p == (p0[0] + 4, p0[1] + 12, p0[2])
    # 3 simulator calls (turn 1 is the opening), 4 subject and 4 judge calls, then the persona
    # probe put to the subject; each with provenance.
    roles = [c.role for c in ep.calls]
    assert roles.count("user") == 3 and roles.count("subject") == 4 + 1 and roles.count("judge") == 4
    for call in ep.calls:
        assert call.model == "fake-model" and call.template != "" and call.sampling.max_tokens == 64
    assert {c.template.split("@")[0] for c in ep.calls} == {"simulator", "mdep", "none", "probe"}
    assert ep.probe is not None and ep.probe.dominant_need == "A"
    # The rule director reveals stage 1 after turn 3 (reveal_every=3); the simulator hears of it.
    assert [t.director.action for t in ep.turns] == ["wait", "wait", "reveal_stage", "wait"]
    # Meter: start + 2 per simulated turn.
    assert ep.final_meter == case.persona.meter_start + 2 * 3


def test_every_request_carries_a_seed_and_the_prefix_grows_byte_identically(
    fake: FakeOpenAIServer, registry: Registry, prompts: Any
) -> None:
    _run(fake, registry, prompts, Limits(max_turns=3, min_turns=3))
    bodies = [r["body"] for r in fake.state.requests]
    assert all(isinstance(b["seed"], int) for b in bodies)
    subject = [b["messages"] for b in bodies if "response_format" not in b]
    for before, after in itertools.pairwise(subject):
        assert after[: len(before)] == before  # each turn extends the last one's messages
    sims = [b["messages"] for b in bodies if b.get("response_format", {}).get("json_schema", {}).get("name") == "user_move"]
    # Only the last message carries the turn's private state; everything before it is stable.
    assert sims[1][: len(sims[0]) - 1] == sims[0][:-1]


def test_same_seed_same_requests_different_seed_different(registry: Registry, prompts: Any) -> None:
    def seeds(seed: int) -> list[int]:
        with FakeOpenAIServer(FakeState()) as server:
            _run(server, registry, prompts, Limits(max_turns=2, min_turns=2), seed=seed)
            return sorted(r["body"]["seed"] for r in server.state.requests)

    assert seeds(1) == seeds(1)
    assert seeds(1) != seeds(2)


def test_user_leaving_stops_the_episode(registry: Registry, prompts: Any) -> None:
    def responder(body: dict[str, Any]) -> str:
        if body.get("response_format", {}).get("json_schema", {}).get("name") == "user_move":
            return json.dumps({"message": "Forget it. Bye.", "meter_delta": -10, "inner": "done", "leave": True})
        return default_responder(body)

    with FakeOpenAIServer(FakeState(responder=responder)) as server:
        ep = _run(server, registry, prompts, Limits(max_turns=10, min_turns=5))
    # Each goodbye costs 10 meter points; leaving is honoured once the meter is at or below 20.
    start = registry.cases("demo")[0].persona.meter_start
    expected_turns = next(k for k in range(1, 11) if start - 10 * k <= 20)
    assert ep.stop_reason == "user_left"
    assert len(ep.turns) == expected_turns and ep.last_user is not None and ep.last_user.message == "Forget it. Bye."
    assert ep.final_meter <= 20


def test_invalid_judgements_are_retried_then_marked_invalid_not_zero(registry: Registry, prompts: Any) -> None:
    def responder(body: dict[str, Any]) -> str:
        if body.get("response_format", {}).get("json_schema", {}).get("name") == "mdep_verdict":
            return '{"C": {"progress": 7}'  # malformed every time
        return default_responder(body)

    with FakeOpenAIServer(FakeState(responder=responder)) as server:
        ep = _run(server, registry, prompts, Limits(max_turns=2, min_turns=2, judge_retries=2))
    for turn in ep.turns:
        assert turn.judgement.valid is False and turn.judgement.vector is None and turn.epm is None
        assert turn.judgement.verdicts[0].error
    judge_calls = [c for c in ep.calls if c.role == "judge"]
    assert len(judge_calls) == 2 * 3 and all(c.error for c in judge_calls)  # 1 try + 2 retries per turn


def test_panel_median_uses_valid_judges_only(registry: Registry, prompts: Any) -> None:
    state = FakeState()
    levels = iter([0, 2, 2] * 10)

    def responder(body: dict[str, Any]) -> str:
        if body.get("response_format", {}).get("json_schema", {}).get("name") == "mdep_verdict":
            lvl = next(levels)
            axis = {"progress": lvl, "regression": 0, "evidence": "x" if lvl else "", "reason": ""}
            return json.dumps({"C": axis, "A": axis, "P": axis})
        return default_responder(body)

    state.responder = responder
    with FakeOpenAIServer(state) as server:
        ep = _run(server, registry, prompts, Limits(max_turns=1, min_turns=1), n_judges=3)
    judgement = ep.turns[0].judgement
    assert sorted(v.axes["C"].progress for v in judgement.verdicts) == [0, 2, 2]
    assert judgement.progress == {"C": 2, "A": 2, "P": 2}
    assert judgement.vector == (3.0, 3.0, 3.0)


def test_epm_failure_stops_after_min_turns(registry: Registry, prompts: Any) -> None:
    def responder(body: dict[str, Any]) -> str:
        if body.get("response_format", {}).get("json_schema", {}).get("name") == "mdep_verdict":
            axis = {"progress": 0, "regression": 2, "evidence": "you should just", "reason": "blames"}
            return json.dumps({"C": axis, "A": axis, "P": axis})
        return default_responder(body)

    with FakeOpenAIServer(FakeState(responder=responder)) as server:
        ep = _run(server, registry, prompts, Limits(max_turns=20, min_turns=6))
    # Every turn moves away from the goal: collapse is due at turn 5 but may only fire from 6.
    assert ep.stop_reason == "epm_collapse" and ep.status == "collapse"
    assert len(ep.turns) == 6


def test_llm_director_guidance_reaches_only_the_simulator_and_can_end(registry: Registry, prompts: Any) -> None:
    from dataclasses import replace

    from emobench.prompts import load_template
    from emobench.run.runner import ROOT
    from tests.conftest import fake_caller

    case = registry.cases("demo")[0]
    stage = case.scenario.stages[0]
    actions = iter(
        [
            {"action": "reveal_stage", "target": 0, "guidance": "let it out slowly"},
            {"action": "end", "target": None, "guidance": ""},
        ]
    )

    def responder(body: dict[str, Any]) -> str:
        if body.get("response_format", {}).get("json_schema", {}).get("name") == "director_action":
            return json.dumps(next(actions))
        return default_responder(body)

    with FakeOpenAIServer(FakeState(responder=responder)) as server:
        roles = replace(fake_roles(server.base_url), director=fake_caller(server.base_url, "director", "director"))
        with_director = replace(prompts, director=load_template(ROOT / "prompts" / "director.j2"))
        ep = asyncio.run(run_episode(case, roles, with_director, 0, Limits(max_turns=10, min_turns=5), PROVENANCE))
        bodies = [r["body"] for r in server.state.requests]
    assert ep.stop_reason == "director_end" and len(ep.turns) == 2
    assert [t.director.action for t in ep.turns] == ["reveal_stage", "end"]
    kind = [(b.get("response_format") or {}).get("json_schema", {}).get("name", "subject") for b in bodies]
    texts = [json.dumps(b["messages"]) for b in bodies]
    sim_turn2 = next(t for k, t in zip(kind, texts, strict=True) if k == "user_move")
    assert json.dumps(stage)[1:-1] in sim_turn2 and "let it out slowly" in sim_turn2
    for k, t in zip(kind, texts, strict=True):
        if k in ("subject", "mdep_verdict"):
            assert "let it out slowly" not in t
    assert [c.role for c in ep.calls].count("director") == 2


def test_next_simulator_turn_runs_while_the_judges_read_this_one_before_min_turns(registry: Registry, prompts: Any) -> None:
    spans: dict[str, list[tuple[float, float]]] = {"user_move": [], "mdep_verdict": []}

    def slow(body: dict[str, Any]) -> str:
        started = time.monotonic()
        time.sleep(0.2)
        name = body.get("response_format", {}).get("json_schema", {}).get("name")
        if name in spans:
            spans[name].append((started, time.monotonic()))
        return default_responder(body)

    with FakeOpenAIServer(FakeState(responder=slow)) as server:
        ep = _run(server, registry, prompts, Limits(max_turns=5, min_turns=3))
    sims, judges = spans["user_move"], spans["mdep_verdict"]  # simulator turns 2-5, judges of turns 1-5
    assert len(sims) == 4 and len(judges) == 5
    for t in (1, 2):  # before min_turns no stop rule can fire: turn t+1's simulator starts at once
        assert sims[t - 1][0] < judges[t - 1][1]
    for t in (3, 4):  # from min_turns on the judgement may end the episode: it is awaited first
        assert sims[t - 1][0] >= judges[t - 1][1]
    # The record keeps the protocol's order whatever overlapped.
    per_turn = ["user", "subject", "judge"]
    assert [c.role for c in ep.calls] == ["subject", "judge", *per_turn * 4, "subject"]
