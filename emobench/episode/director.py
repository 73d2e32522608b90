"""The director (docs/method.md §4, step 6): after each turn it picks one action that shapes the story.

Two directors share one action record. The rule director reveals the next hidden stage every N
turns. The LLM director sees the hidden stages and memories, what is already revealed, the
tracker state and the transcript, and returns one action as structured output; an output that
stays invalid after its retries falls back to the rule director's choice.

Either way, the director's guidance reaches only the simulator (`simulator_guidance`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Final, get_args

from emobench.endpoints.structured import load_json_object
from emobench.episode.guidance import guidance_words
from emobench.episode.roles import RoleCaller, derive_seed
from emobench.prompts import PromptTemplate
from emobench.records import DirectorAction, Limits, ModelCall
from emobench.registry import Case

ACTIONS: Final[tuple[str, ...]] = get_args(DirectorAction.model_fields["action"].annotation)
MAX_RESISTANCE: Final = 2  # resistance runs from -2 (open) through 0 (the persona as written) to +2

DIRECTOR_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "director_action",
        "strict": True,
        "schema": {
            "type": "object",
            # "reason" first: the model states why before it commits to an action.
            "properties": {
                "reason": {"type": "string"},
                "action": {"type": "string", "enum": list(ACTIONS)},
                "target": {"type": ["integer", "null"]},
                "guidance": {"type": "string"},
            },
            "required": ["reason", "action", "target", "guidance"],
            "additionalProperties": False,
        },
    },
}

def rule_director(case: Case, turn: int, reveal_every: int) -> DirectorAction:
    """Stage k (0-based) becomes sayable after turn (k + 1) * reveal_every.

    It adds no guidance line: simulator_guidance tells the simulator what is revealed.
    """
    if reveal_every > 0 and turn % reveal_every == 0:
        index = turn // reveal_every - 1
        if index < len(case.scenario.stages):
            return DirectorAction(action="reveal_stage", target=index)
    return DirectorAction(action="wait")


@dataclass(frozen=True)
class DirectorState:
    """What the director knows after a turn. The loop fills the tracker fields; apply_action
    moves the revealed sets and the resistance.

    p and energy come from the last valid EPM point; last_vector and last_delta_e are None when
    the last turn got no valid judgement.
    """

    turn: int
    max_turns: int
    meter: float
    p: tuple[float, float, float] | None = None
    energy: float | None = None
    last_vector: tuple[float, float, float] | None = None
    last_delta_e: float | None = None
    revealed_stages: tuple[int, ...] = ()
    revealed_memories: tuple[int, ...] = ()
    resistance: int = 0

    def __post_init__(self) -> None:
        if (self.p is None) != (self.energy is None):
            raise ValueError("DirectorState: p and energy are set together")
        if (self.last_vector is None) != (self.last_delta_e is None):
            raise ValueError("DirectorState: last_vector and last_delta_e are set together")
        if abs(self.resistance) > MAX_RESISTANCE:
            raise ValueError(f"DirectorState: resistance {self.resistance} is beyond ±{MAX_RESISTANCE}")


def _next_stage(case: Case, state: DirectorState) -> int | None:
    return next((i for i in range(len(case.scenario.stages)) if i not in state.revealed_stages), None)


def _hidden_memories(case: Case, state: DirectorState) -> list[int]:
    return [i for i in range(len(case.scenario.memories)) if i not in state.revealed_memories]


def director_messages(
    template: PromptTemplate, case: Case, state: DirectorState, transcript: list[dict[str, str]]
) -> list[dict[str, str]]:
    """System: the case only (fixed per episode). User: transcript, then this turn's state.

    transcript holds {"speaker", "text"} lines, as the MDEP judge gets them.
    """
    context = {"persona": case.persona, "scenario": case.scenario}
    user = template.block(
        "user", transcript=transcript, state=state, p0=case.p0, p0_norm=case.p0_norm,
        next_stage=_next_stage(case, state), hidden_memories=_hidden_memories(case, state), **context,
    )
    return [{"role": "system", "content": template.case_system(case)}, {"role": "user", "content": user}]


def apply_action(case: Case, state: DirectorState, action: DirectorAction) -> DirectorState:
    """The state after the action; ValueError when the action does not fit the state.

    reveal_stage reveals the next hidden stage; its target must be that stage, or None for "the
    next one". reveal_memory needs the index of a hidden memory.
    """
    kind = action.action
    if kind == "reveal_stage":
        stage = _next_stage(case, state)
        if stage is None:
            raise ValueError("reveal_stage: every stage is already revealed")
        if action.target not in (None, stage):
            raise ValueError(f"reveal_stage.target: {action.target} is not the next hidden stage, {stage}")
        return replace(state, revealed_stages=(*state.revealed_stages, stage))
    if kind == "reveal_memory":
        n = len(case.scenario.memories)
        if action.target is None or not 0 <= action.target < n:
            raise ValueError(f"reveal_memory.target: {action.target!r} is not a memory index 0..{n - 1}")
        if action.target in state.revealed_memories:
            raise ValueError(f"reveal_memory.target: memory {action.target} is already revealed")
        return replace(state, revealed_memories=(*state.revealed_memories, action.target))
    if kind in ("raise_resistance", "lower_resistance"):
        resistance = state.resistance + (1 if kind == "raise_resistance" else -1)
        if abs(resistance) > MAX_RESISTANCE:
            raise ValueError(f"{kind}: resistance is already {state.resistance:+d}, the limit")
        return replace(state, resistance=resistance)
    return state


def simulator_guidance(case: Case, state: DirectorState, action: DirectorAction) -> str:
    """The guidance text the simulator gets for its next message; "" when there is none.

    state is the state AFTER apply_action: everything revealed so far stays sayable, the
    resistance holds until the director moves it, and the action adds its one-line note.
    """
    revealed = state.revealed_memories if action.action == "reveal_memory" else state.revealed_stages
    if action.action.startswith("reveal_") and action.target is not None and action.target not in revealed:
        raise ValueError("simulator_guidance: pass the state after apply_action")
    words = guidance_words(case.language)  # in the case's language, like its templates
    parts = []
    if state.revealed_stages:
        stages = words.separator.join(case.scenario.stages[i] for i in state.revealed_stages)
        parts.append(words.stages.format(stages=stages))
    if state.revealed_memories:
        memories = words.separator.join(
            words.memory.format(period=words.periods[memory.period], text=memory.text)
            for memory in (case.scenario.memories[i] for i in state.revealed_memories)
        )
        parts.append(words.memories.format(memories=memories))
    if state.resistance:
        parts.append(words.resistance[state.resistance])  # type: ignore[index]
    if action.guidance:
        parts.append(action.guidance)
    return words.join.join(parts)


def parse_director(text: str, finish_reason: str | None, case: Case, state: DirectorState) -> DirectorAction:
    """Validate the director's JSON against the schema and the state, or raise ValueError.

    Decision: reveal_stage always targets the next hidden stage, whatever "target" says.
    Stages are ordered, so the action has one meaning, and a miscounted index is not worth a
    retry. It is still invalid once every stage is out. Targets of other actions are dropped.
    """
    data = load_json_object(text, finish_reason)
    kind = data.get("action")
    if kind not in ACTIONS:
        raise ValueError(f"action: {kind!r} is not one of {', '.join(ACTIONS)}")
    target = data.get("target")
    if target is not None and (isinstance(target, bool) or not isinstance(target, int)):
        raise ValueError(f"target: {target!r} is not an integer or null")
    guidance = data.get("guidance", "")
    if not isinstance(guidance, str):
        raise ValueError("guidance: not a string")
    if kind == "reveal_stage":
        target = _next_stage(case, state)
    elif kind != "reveal_memory":
        target = None
    # One line: the guidance is spliced into the simulator's private state line.
    action = DirectorAction(action=kind, guidance=" ".join(guidance.split()), target=target)
    apply_action(case, state, action)  # raises when the action does not fit the state
    return action


def _fallback(case: Case, state: DirectorState, reveal_every: int) -> DirectorAction:
    """The rule director's choice, placed on the current state: an LLM director may have revealed
    stages at other turns, so a rule reveal turn reveals the next hidden stage, if any is left."""
    if rule_director(case, state.turn, reveal_every).action == "reveal_stage":
        stage = _next_stage(case, state)
        if stage is not None:
            return DirectorAction(action="reveal_stage", target=stage)
    return DirectorAction(action="wait")


async def llm_director(
    director: RoleCaller,
    template: PromptTemplate,
    case: Case,
    state: DirectorState,
    transcript: list[dict[str, str]],
    seed: int,
    retries: int,
    reveal_every: int = Limits.reveal_every,
) -> tuple[DirectorAction, list[ModelCall]]:
    """One action for the turn in state, and every call made.

    An output still invalid after the retries yields the rule director's action (see _fallback).
    The caller can tell a fallback by calls[-1].error being set; every failed attempt is
    recorded with its error.
    """
    messages = director_messages(template, case, state, transcript)
    action, calls, _ = await director.ask_valid(
        messages, lambda attempt: derive_seed(seed, "director", state.turn, attempt), template, DIRECTOR_FORMAT,
        lambda call: parse_director(call.text, call.finish_reason, case, state), retries,
    )
    if action is None:
        return _fallback(case, state, reveal_every), calls
    return action, calls
