"""Structured-output forms: the bounded schema for servers emobench launches, the portable one
elsewhere, and the record of which was sent."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.endpoints.client import OpenAICompatClient
from emobench.endpoints.structured import VLLM_BOUNDED_SERVER_ARGS, BoundedEndpoint, bounded_format
from emobench.episode.director import DIRECTOR_FORMAT
from emobench.episode.loop import run_episode
from emobench.episode.probe import PROBE_FORMAT
from emobench.episode.roles import EpisodeRoles
from emobench.episode.simulator import USER_MOVE_FORMAT
from emobench.judging.holistic import HOLISTIC_FORMAT
from emobench.judging.iedr import IEDR_FORMAT
from emobench.judging.mdep import MDEP_FORMAT, judge_turn
from emobench.judging.pairwise import PAIRWISE_FORMAT
from emobench.records import Limits, RoleInfo, Sampling
from emobench.registry import Registry
from emobench.run.runner import _caller
from tests.conftest import FAST_RETRY, PROVENANCE, fake_caller
from tests.fake_openai import FakeOpenAIServer

FORMATS = [USER_MOVE_FORMAT, MDEP_FORMAT, HOLISTIC_FORMAT, PAIRWISE_FORMAT, IEDR_FORMAT, DIRECTOR_FORMAT, PROBE_FORMAT]


def _strings(schema: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every string-typed sub-schema with its property path."""
    found = []
    if isinstance(schema, dict):
        if schema.get("type") == "string":
            found.append((path, schema))
        for prop, sub in schema.get("properties", {}).items():
            found += _strings(sub, f"{path}.{prop}")
        if "items" in schema:
            found += _strings(schema["items"], f"{path}[]")
    return found


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f["json_schema"]["name"])
def test_every_free_text_field_is_bounded_and_enums_are_not(fmt: dict[str, Any]) -> None:
    bounded = bounded_format(fmt)
    free = [(p, s) for p, s in _strings(bounded["json_schema"]["schema"]) if "enum" not in s]
    assert all(0 < s["maxLength"] <= 400 for _, s in free), free
    assert all("maxLength" not in s for _, s in _strings(bounded["json_schema"]["schema"]) if "enum" in s)
    # The portable form is left as written: hosted APIs get the strict schema they accept.
    assert all("maxLength" not in s for _, s in _strings(fmt["json_schema"]["schema"]))
    jsonschema.Draft202012Validator.check_schema(bounded["json_schema"]["schema"])


def test_field_bounds_come_from_the_data_file() -> None:
    schema = bounded_format(USER_MOVE_FORMAT)["json_schema"]["schema"]
    assert schema["properties"]["message"]["maxLength"] == 300
    assert schema["properties"]["inner"]["maxLength"] == 100
    assert schema["properties"]["message"]["minLength"] == 1  # what the schema had stays
    mdep = bounded_format(MDEP_FORMAT)["json_schema"]["schema"]["properties"]
    assert all(mdep[axis]["properties"]["evidence"]["minLength"] == 1 for axis in "CAP")
    assert "minLength" not in mdep["C"]["properties"]["reason"]


_text = st.text(max_size=400)


@settings(max_examples=60, deadline=None)
@given(message=_text, inner=_text, delta=st.integers(-10, 10), leave=st.booleans())
def test_bounded_accepts_exactly_the_portable_objects_within_the_bounds(
    message: str, inner: str, delta: int, leave: bool
) -> None:
    obj = {"message": message, "meter_delta": delta, "inner": inner, "leave": leave}
    portable = jsonschema.Draft202012Validator(USER_MOVE_FORMAT["json_schema"]["schema"])
    bounded = jsonschema.Draft202012Validator(bounded_format(USER_MOVE_FORMAT)["json_schema"]["schema"])
    within = len(message) <= 300 and len(inner) <= 100
    assert bounded.is_valid(obj) == (portable.is_valid(obj) and within)


@pytest.mark.vllm  # imports vLLM itself (about 10 s)
def test_vllm_accepts_the_server_options() -> None:
    # vLLM's own config class validates the option (a backend that enforces no whitespace).
    from vllm.config.structured_outputs import StructuredOutputsConfig

    flag, value = VLLM_BOUNDED_SERVER_ARGS
    assert flag == "--structured-outputs-config"
    config = StructuredOutputsConfig(**json.loads(value))
    assert config.disable_any_whitespace and config.backend == "guidance"


def test_bounded_requests_reach_the_server_and_the_record_says_so(
    fake: FakeOpenAIServer, registry: Registry, prompts: Any
) -> None:
    client = BoundedEndpoint(OpenAICompatClient(fake.base_url, "fake-model", retry=FAST_RETRY))
    info = RoleInfo(
        label="sim", model="fake-model", endpoint=fake.base_url, sampling=Sampling(max_tokens=64), structured_output="bounded"
    )
    roles = EpisodeRoles(
        subject=fake_caller(fake.base_url, "subject", "subject-a"),
        user=_caller("user", client, info),
        judges=(fake_caller(fake.base_url, "judge", "judge-0"),),
        judge_turn=judge_turn,
    )
    case = registry.cases("demo")[0]
    episode = asyncio.run(run_episode(case, roles, prompts, 0, Limits(max_turns=2, min_turns=2), PROVENANCE))

    sent = {r["body"]["response_format"]["json_schema"]["name"]: r["body"]["response_format"]
            for r in fake.state.requests if r["body"].get("response_format")}
    assert sent["user_move"]["json_schema"]["schema"]["properties"]["message"]["maxLength"] == 300
    assert "maxLength" not in json.dumps(sent["mdep_verdict"])  # the judge's endpoint is portable
    forms = {(c.role, c.structured_output) for c in episode.calls}
    assert ("user", "bounded") in forms and ("judge", "portable") in forms
    assert ("subject", None) in forms  # free text: no schema sent, no form recorded


def _worst_case_tokens(fmt: dict[str, Any]) -> int:
    """A generous token count for the longest object the bounded schema allows.

    Prose at 3 characters a token (English runs nearer 4), JSON punctuation and keys at 2.5 (the
    embedded tokenizer packs `{"dominant_need":"` into 6 tokens).
    """
    prose = 0

    def fill(schema: dict[str, Any]) -> Any:
        nonlocal prose
        if "enum" in schema:
            return max(schema["enum"], key=lambda v: len(json.dumps(v)))
        kind = schema.get("type")
        if kind == "object":
            return {k: fill(v) for k, v in schema["properties"].items()}
        if kind == "array":
            return [fill(schema["items"]) for _ in range(schema.get("maxItems", schema.get("minItems", 1)))]
        if kind == "string":
            prose += schema["maxLength"]
            return ""
        return 10 if kind == "integer" else True

    skeleton = json.dumps(fill(bounded_format(fmt)["json_schema"]["schema"]), separators=(",", ":"))
    return int(prose / 3 + len(skeleton) / 2.5)


def test_demo_budgets_cover_a_whole_object_at_the_bounds() -> None:
    import yaml

    from emobench.run.runner import ROOT

    config = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())
    panel = yaml.safe_load((ROOT / config["panel"]).read_text())
    budgets = {
        "subject": (config["subjects"][0]["sampling"]["max_tokens"], [PROBE_FORMAT]),
        "user": (config["user"]["sampling"]["max_tokens"], [USER_MOVE_FORMAT]),
        "judge": (panel["judges"][0]["sampling"]["max_tokens"], [MDEP_FORMAT, HOLISTIC_FORMAT, PAIRWISE_FORMAT]),
    }
    for role, (max_tokens, formats) in budgets.items():
        for fmt in formats:
            need = _worst_case_tokens(fmt)
            assert max_tokens >= need, f"{role}: max_tokens {max_tokens} < {need} for {fmt['json_schema']['name']}"
