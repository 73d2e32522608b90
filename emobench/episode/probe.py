"""The persona probe (docs/method.md §5.6): after the episode the subject is asked, out of character,
what it inferred about the user: dominant need, empathy threshold and two Big-Five poles.

The question is appended to the subject's own conversation, byte for byte as it saw it, so
the server's prefix cache covers everything but the question.
"""

from __future__ import annotations

from typing import Any

from emobench.endpoints.structured import load_json_object
from emobench.episode.roles import RoleCaller, derive_seed
from emobench.prompts import PromptTemplate
from emobench.records import ModelCall, ProbeAnswer
from emobench.registry.models import AXES, THRESHOLDS, TRAITS

POLES = ("high", "low")

PROBE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "persona_probe",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "dominant_need": {"type": "string", "enum": list(AXES)},
                "threshold": {"type": "string", "enum": list(THRESHOLDS)},
                # An array, not an object: a schema cannot say "exactly two of these five keys".
                "big_five": {
                    "type": "array",
                    "minItems": 2,
                    "maxItems": 2,
                    "items": {
                        "type": "object",
                        "properties": {
                            "trait": {"type": "string", "enum": list(TRAITS)},
                            "pole": {"type": "string", "enum": list(POLES)},
                        },
                        "required": ["trait", "pole"],
                        "additionalProperties": False,
                    },
                },
                "rationale": {"type": "string"},
            },
            "required": ["dominant_need", "threshold", "big_five", "rationale"],
            "additionalProperties": False,
        },
    },
}


def probe_messages(template: PromptTemplate, subject_messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The subject's conversation unchanged, then the out-of-character question."""
    if not subject_messages or subject_messages[-1].get("role") != "assistant":
        # Two user messages in a row break many chat templates; the caller passes the wrong list.
        raise ValueError("the subject's conversation must end with its own last reply")
    return [*subject_messages, {"role": "user", "content": template.block("user")}]


def parse_probe(text: str, finish_reason: str | None = None) -> ProbeAnswer:
    """Parse the subject's answer or raise ValueError naming what is wrong."""
    data = load_json_object(text, finish_reason)
    need = data.get("dominant_need")
    if need not in AXES:
        raise ValueError(f"dominant_need: {need!r} is not one of C, A, P")
    threshold = data.get("threshold")
    if threshold not in THRESHOLDS:
        raise ValueError(f"threshold: {threshold!r} is not one of low, medium, high")
    items = data.get("big_five")
    if not isinstance(items, list) or len(items) != 2:
        raise ValueError("big_five: not a list of exactly two items")
    big_five: dict[str, str] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"big_five[{i}]: not an object")
        trait, pole = item.get("trait"), item.get("pole")
        if trait not in TRAITS:
            raise ValueError(f"big_five[{i}].trait: {trait!r} is not a Big Five trait")
        if pole not in POLES:
            raise ValueError(f"big_five[{i}].pole: {pole!r} is not high or low")
        if trait in big_five:
            raise ValueError(f"big_five[{i}].trait: {trait!r} named twice")
        big_five[trait] = pole
    rationale = data.get("rationale", "")
    if not isinstance(rationale, str):
        raise ValueError("rationale: not a string")
    return ProbeAnswer(dominant_need=need, threshold=threshold, big_five=big_five, rationale=rationale.strip())  # type: ignore[arg-type]


async def run_probe(
    subject: RoleCaller, template: PromptTemplate, subject_messages: list[dict[str, str]], seed: int, retries: int
) -> tuple[ProbeAnswer | None, list[ModelCall]]:
    """Ask the subject; retry an invalid answer with a new seed. None when no attempt was valid."""
    messages = probe_messages(template, subject_messages)
    answer, calls, _ = await subject.ask_valid(
        messages, lambda attempt: derive_seed(seed, "probe", subject.info.label, attempt), template, PROBE_FORMAT,
        lambda call: parse_probe(call.text, call.finish_reason), retries,
    )
    return answer, calls
