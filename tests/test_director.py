"""The director: rule reveals, LLM action parsing and validation, state updates, the guidance the
simulator receives, and the LLM director's fallback to the rule action."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest

from emobench.episode.director import (
    ACTIONS,
    DIRECTOR_FORMAT,
    DirectorState,
    apply_action,
    director_messages,
    llm_director,
    parse_director,
    rule_director,
    simulator_guidance,
)
from emobench.episode.roles import derive_seed
from emobench.prompts import load_template
from emobench.records import DirectorAction
from emobench.registry import Case, Registry
from emobench.run.runner import ROOT
from tests.conftest import Serve, fake_caller
from tests.fake_openai import FakeOpenAIServer

TEMPLATE = load_template(ROOT / "prompts" / "director.j2")
START = DirectorState(turn=3, max_turns=30, meter=45.0)
TRANSCRIPT = [
    {"speaker": "Zoe", "text": "It's about the contract, really."},
    {"speaker": "Assistant", "text": "Tell me more."},
]




@pytest.fixture(scope="module")
def case(registry: Registry) -> Case:
    return registry.cases("demo")[0]


def _out(action: str, target: int | None = None, guidance: str = "") -> str:
    return json.dumps({"reason": "why", "action": action, "target": target, "guidance": guidance})


def test_the_schema_offers_exactly_the_record_actions() -> None:
    schema = DIRECTOR_FORMAT["json_schema"]["schema"]
    assert tuple(schema["properties"]["action"]["enum"]) == ACTIONS
    assert set(ACTIONS) == {"reveal_stage", "reveal_memory", "raise_resistance", "lower_resistance", "wait", "end"}
    assert set(schema["required"]) == set(schema["properties"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_out("reveal_stage", 0, "Hint at it."), DirectorAction(action="reveal_stage", target=0, guidance="Hint at it.")),
        # Stages are ordered: a wrong or missing target still reveals the next hidden stage.
        (_out("reveal_stage", 3), DirectorAction(action="reveal_stage", target=0)),
        (_out("reveal_stage"), DirectorAction(action="reveal_stage", target=0)),
        (_out("reveal_memory", 2, "Let the\n drawing come\tback."),
         DirectorAction(action="reveal_memory", target=2, guidance="Let the drawing come back.")),
        (_out("raise_resistance", 1), DirectorAction(action="raise_resistance")),  # a stray target is dropped
        (_out("lower_resistance"), DirectorAction(action="lower_resistance")),
        (_out("wait", guidance="Stay short."), DirectorAction(action="wait", guidance="Stay short.")),
        (_out("end"), DirectorAction(action="end")),
    ],
)
def test_each_action_parses(case: Case, text: str, expected: DirectorAction) -> None:
    assert parse_director(text, "stop", case, START) == expected


@pytest.mark.parametrize(
    ("text", "state", "message"),
    [
        ("reveal the next stage", START, "not JSON"),
        (_out("reveal_stage")[:30], START, "not JSON"),
        ('["wait"]', START, "not a JSON object"),
        (_out("comfort"), START, "action: 'comfort'"),
        (json.dumps({"target": None, "guidance": ""}), START, "action: None"),
        (_out("reveal_memory"), START, r"reveal_memory\.target: None"),
        (_out("reveal_memory", 4), START, r"reveal_memory\.target: 4"),
        (_out("reveal_memory", -1), START, r"reveal_memory\.target: -1"),
        (_out("reveal_memory", 1), replace(START, revealed_memories=(1,)), "already revealed"),
        (_out("reveal_stage"), replace(START, revealed_stages=(0, 1, 2, 3)), "every stage"),
        (_out("raise_resistance"), replace(START, resistance=2), "raise_resistance: resistance is already \\+2"),
        (_out("lower_resistance"), replace(START, resistance=-2), "lower_resistance: resistance is already -2"),
        (json.dumps({"action": "reveal_memory", "target": "2", "guidance": ""}), START, "target: '2'"),
        (json.dumps({"action": "reveal_memory", "target": True, "guidance": ""}), START, "target: True"),
        (json.dumps({"action": "wait", "target": None, "guidance": ["a"]}), START, "guidance: not a string"),
    ],
)
def test_invalid_outputs_are_rejected_naming_the_field(case: Case, text: str, state: DirectorState, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_director(text, "stop", case, state)


def test_truncated_output_is_rejected(case: Case) -> None:
    with pytest.raises(ValueError, match="truncated"):
        parse_director(_out("wait"), "length", case, START)


def test_state_checks_its_invariants() -> None:
    with pytest.raises(ValueError, match="resistance"):
        DirectorState(turn=1, max_turns=5, meter=40.0, resistance=3)
    with pytest.raises(ValueError, match="p and energy"):
        DirectorState(turn=1, max_turns=5, meter=40.0, p=(-1.0, -2.0, -3.0))
    with pytest.raises(ValueError, match="last_vector"):
        DirectorState(turn=1, max_turns=5, meter=40.0, last_delta_e=1.0)


def test_apply_action_and_simulator_guidance(case: Case) -> None:
    stages, memories = case.scenario.stages, case.scenario.memories
    wait = DirectorAction(action="wait")
    assert apply_action(case, START, wait) is START and simulator_guidance(case, START, wait) == ""

    # The rule director's reveal carries no target: the next hidden stage comes out.
    state = apply_action(case, START, DirectorAction(action="reveal_stage"))
    state = apply_action(case, state, DirectorAction(action="reveal_stage", target=1))
    assert state.revealed_stages == (0, 1) and START.revealed_stages == ()  # pure: the input is untouched
    with pytest.raises(ValueError, match="not the next hidden stage"):
        apply_action(case, state, DirectorAction(action="reveal_stage", target=3))

    memory = DirectorAction(action="reveal_memory", target=2, guidance="Bring up the drawing only if asked.")
    state = apply_action(case, state, memory)
    text = simulator_guidance(case, state, memory)
    assert stages[0] in text and stages[1] in text and stages[2] not in text
    assert memories[2].text in text and memories[0].text not in text
    assert text.endswith("Bring up the drawing only if asked.")
    with pytest.raises(ValueError, match="after apply_action"):
        simulator_guidance(case, START, memory)  # handed the state before the action

    raised = apply_action(case, state, DirectorAction(action="raise_resistance"))
    assert raised.resistance == 1 and "Test them a little more" in simulator_guidance(case, raised, wait)
    assert apply_action(case, raised, DirectorAction(action="raise_resistance")).resistance == 2
    lowered = apply_action(case, state, DirectorAction(action="lower_resistance"))
    assert lowered.resistance == -1 and "soften a little" in simulator_guidance(case, lowered, wait)
    # Resistance and revealed content persist while the director waits.
    assert memories[2].text in simulator_guidance(case, lowered, wait)
    assert apply_action(case, lowered, DirectorAction(action="end")) is lowered


def test_messages_keep_the_system_prefix_fixed_and_show_the_state(case: Case) -> None:
    later = DirectorState(
        turn=7, max_turns=30, meter=58.4, p=(-3.0, -10.0, -12.0), energy=9.5, last_vector=(1.0, 3.0, 0.0),
        last_delta_e=2.25, revealed_stages=(0, 1), revealed_memories=(3,), resistance=-1,
    )
    first = director_messages(TEMPLATE, case, START, TRANSCRIPT[:1])
    second = director_messages(TEMPLATE, case, later, TRANSCRIPT)
    assert first[0] == second[0] and first[0]["role"] == "system"
    system = first[0]["content"]
    assert case.hidden_need in system
    assert all(s in system for s in case.scenario.stages) and all(m.text in system for m in case.scenario.memories)
    user = second[1]["content"]
    assert user.index(TRANSCRIPT[1]["text"]) < user.index("STATE AFTER TURN 7 OF 30")  # transcript first: longer shared prefix
    for shown in ("meter: 58", "(-3.0, -10.0, -12.0)", "E: 9.5", "dE +2.2", "stages revealed: 0, 1", "next hidden stage: [2]",
                  "memories revealed: 3", "still hidden: 0, 1, 2", "resistance: -1"):
        assert shown in user, shown
    assert "not measured yet" in first[1]["content"] and "stages revealed: none" in first[1]["content"]


def _director(server: FakeOpenAIServer, case: Case, state: DirectorState, retries: int = 2) -> Any:
    caller = fake_caller(server.base_url, "director", "director")
    return asyncio.run(llm_director(caller, TEMPLATE, case, state, TRANSCRIPT, seed=5, retries=retries, reveal_every=3))


def test_llm_director_returns_the_parsed_action(serve: Serve, case: Case) -> None:
    server = serve(lambda body: _out("reveal_memory", 1, "Let it slip."))
    action, calls = _director(server, case, START)
    body = server.state.requests[0]["body"]
    assert action == DirectorAction(action="reveal_memory", target=1, guidance="Let it slip.")
    assert len(calls) == 1 and calls[0].error is None and calls[0].role == "director"
    assert calls[0].template == TEMPLATE.ref and body["seed"] == derive_seed(5, "director", START.turn, 0)
    assert body["response_format"] == DIRECTOR_FORMAT


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (START, DirectorAction(action="reveal_stage", target=0)),  # turn 3 is a rule reveal turn
        # The rule would reveal stage 0 at turn 3; stage 0 is out already, so the next one comes.
        (replace(START, revealed_stages=(0,)), DirectorAction(action="reveal_stage", target=1)),
        (replace(START, revealed_stages=(0, 1, 2, 3)), DirectorAction(action="wait")),
        (replace(START, turn=4), DirectorAction(action="wait")),
    ],
)
def test_llm_director_falls_back_to_the_rule_action(
    serve: Serve, case: Case, state: DirectorState, expected: DirectorAction
) -> None:
    server = serve(lambda body: _out("console"))
    action, calls = _director(server, case, state, retries=2)
    seeds = [r["body"]["seed"] for r in server.state.requests]
    assert action == expected
    assert len(calls) == 3 and all(c.error and "console" in c.error for c in calls)  # every attempt is recorded
    assert seeds == [derive_seed(5, "director", state.turn, attempt) for attempt in range(3)]
    assert apply_action(case, state, action) is not None  # the fallback always fits the state


def test_rule_director_reveals_every_n_turns_and_the_guidance_says_so_once(case: Case) -> None:
    stages = case.scenario.stages
    assert rule_director(case, 1, 3) == DirectorAction(action="wait")
    assert rule_director(case, 6, 0) == DirectorAction(action="wait")
    assert rule_director(case, 3 * (len(stages) + 1), 3).action == "wait"  # nothing left to reveal
    state = START
    for turn in range(1, 7):
        action = rule_director(case, turn, 3)
        state = apply_action(case, replace(state, turn=turn), action)
    assert action == DirectorAction(action="reveal_stage", target=1) and state.revealed_stages == (0, 1)
    text = simulator_guidance(case, state, action)
    assert text == f"If you feel heard enough, you may now let these parts of your story come out: {stages[0]} / {stages[1]}"
