"""Record.trusted: the episode loop's own records built without validation are the records
validation builds, and a record missing a field is refused, not filled with a shared default."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from emobench.episode.roles import RoleCaller
from emobench.records import AxisLevel, EPMPoint, ModelCall, RoleInfo, Sampling

CALL: dict[str, Any] = dict(
    role="judge", label="judge", model="m", endpoint="http://127.0.0.1/v1", sampling=Sampling(), seed=7,
    template="mdep@1", prompt_tokens=10, completion_tokens=3, latency_s=0.25, attempts=1, cached=False,
    finish_reason="stop", text="hello", error=None, structured_output="portable",
)


@pytest.mark.parametrize(("record", "values"), [
    (ModelCall, CALL),
    (AxisLevel, {"progress": 1, "regression": 0, "evidence": "that", "reason": "why"}),
    (EPMPoint, {"p": (1.0, -2.0, 0.5), "delta_e": 2.52, "cos": 0.79, "energy": 5.0}),
])
def test_a_trusted_record_is_the_validated_one(record: Any, values: dict[str, Any]) -> None:
    trusted, validated = record.trusted(**values), record(**values)
    assert trusted == validated and trusted.model_dump_json() == validated.model_dump_json()
    assert trusted.model_copy(update={next(iter(values)): values[next(iter(values))]}) == validated


def test_a_trusted_record_needs_every_field() -> None:
    with pytest.raises(TypeError, match="every field"):
        ModelCall.trusted(**{k: v for k, v in CALL.items() if k != "error"})


def test_an_answer_that_is_not_text_is_still_refused() -> None:
    async def call(messages: Any, seed: int, response_format: Any) -> Any:
        return SimpleNamespace(text=5, finish_reason="stop", template=None, prompt_tokens=1, completion_tokens=1,
                               latency_s=0, cached=False, attempts=1)

    info = RoleInfo(label="s", model="m", endpoint="e", sampling=Sampling())
    with pytest.raises(ValidationError):
        asyncio.run(RoleCaller("subject", info, call).ask([], 1, None))
