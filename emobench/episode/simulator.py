"""The simulated user: build its messages and parse its structured reply."""

from __future__ import annotations

from typing import Any

from emobench.endpoints.structured import load_json_object
from emobench.prompts import PromptTemplate
from emobench.records import UserMove
from emobench.registry import Case

USER_MOVE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "user_move",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "message": {"type": "string", "minLength": 1},
                "meter_delta": {"type": "integer", "minimum": -10, "maximum": 10},
                "inner": {"type": "string"},
                "leave": {"type": "boolean"},
            },
            "required": ["message", "meter_delta", "inner", "leave"],
            "additionalProperties": False,
        },
    },
}


def simulator_messages(
    template: PromptTemplate, case: Case, history: list[tuple[str, str]], meter: float, guidance: str
) -> list[dict[str, str]]:
    """The simulator speaks as "assistant"; the subject's replies are its "user" turns.

    history holds (user_message, subject_reply) pairs; only the last message carries the
    turn's private state, so everything before it is byte-identical from turn to turn.
    """
    messages = [{"role": "system", "content": template.case_system(case)}]
    for said, reply in history:
        messages.append({"role": "assistant", "content": said})
        messages.append({"role": "user", "content": reply})
    state = template.block("turn", persona=case.persona, meter=round(meter), guidance=guidance)
    messages[-1] = {"role": "user", "content": f"{messages[-1]['content']}\n\n{state}"}
    return messages


def parse_user_move(text: str) -> UserMove:
    """Validate the simulator's JSON; the meter delta is clamped to [-10, 10] as docs/method.md says."""
    # No finish_reason: a simulator reply cut at max_tokens that still parses is accepted, as it always was.
    data = load_json_object(text, None)
    message = data.get("message")
    if not isinstance(message, str) or not message.strip():
        raise ValueError("message: missing or empty")
    delta = data.get("meter_delta")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)):
        raise ValueError("meter_delta: not a number")
    leave = data.get("leave", False)
    if not isinstance(leave, bool):
        raise ValueError("leave: not a boolean")
    inner = data.get("inner", "")
    return UserMove(
        message=message.strip(),
        meter_delta=max(-10, min(10, round(delta))),
        inner=inner if isinstance(inner, str) else "",
        leave=leave,
    )
