"""Anthropic models through litellm: the prompt-cache breakpoints and the parameters they lack.

Anthropic caches a prompt only up to a block marked ``cache_control`` (at most four per request),
and reads back the longest marked prefix written before (looking back about 20 blocks from each
mark). Every emobench prompt puts what is fixed first: the system message (fixed per episode),
then the conversation, which each turn extends. So two marks: the system message, and the
message before the last, the end of what the next turn's prompt will repeat (the last message
carries the turn's own text or state). Anthropic writes nothing below its minimum (1,024 tokens
for most models), so a short prompt costs the same marked or not.
"""

from __future__ import annotations

from typing import Any

EPHEMERAL: dict[str, str] = {"type": "ephemeral"}


def is_anthropic(model: str) -> bool:
    """A litellm model name that reaches Anthropic's Messages API."""
    provider, _, name = model.partition("/")
    return provider == "anthropic" or (not name and model.startswith("claude"))


def _marked(message: dict[str, Any]) -> dict[str, Any]:
    content = message["content"]
    blocks: list[dict[str, Any]] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else [dict(b) for b in content]
    )
    blocks[-1]["cache_control"] = EPHEMERAL
    return {**message, "content": blocks}


def with_breakpoints(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with the system message and the one before the last marked for caching."""
    marks = {i for i, m in enumerate(messages) if m["role"] == "system"}
    if len(messages) >= 3:
        marks.add(len(messages) - 2)
    return [_marked(m) if i in marks and m.get("content") else m for i, m in enumerate(messages)]


# Anthropic has no request seed, and litellm refuses a call that sends one: it is left out. The seed stays
# in every record: it is what emobench asked for, and it names the call in the response cache.
DROPPED = ("seed",)
