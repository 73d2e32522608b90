"""A case's own opening (counterfactual sets: one per persona) is what the subject reads first."""

from __future__ import annotations

import asyncio
from typing import Any

from emobench.episode.loop import run_episode
from emobench.judging.iedr import iedr_messages
from emobench.prompts import load_template
from emobench.records import Limits
from emobench.registry import Registry
from emobench.run.runner import ROOT
from tests.conftest import PROVENANCE, fake_roles
from tests.fake_openai import FakeOpenAIServer

OWN = "ok so. my son wants to live with his dad. in porto. i'm fine!! just tell me the legal side"


def test_the_episode_opens_with_the_case_opening(fake: FakeOpenAIServer, registry: Registry, prompts: Any) -> None:
    case = registry.cases("demo")[0].model_copy(update={"opening_override": OWN})
    episode = asyncio.run(run_episode(case, fake_roles(fake.base_url), prompts, 0, Limits(max_turns=2, min_turns=2),
                                      PROVENANCE))
    assert episode.turns[0].user.message == OWN != case.scenario.opening
    first_subject_request = next(r["body"] for r in fake.state.requests if "response_format" not in r["body"])
    assert first_subject_request["messages"][-1]["content"] == OWN


def test_the_iedr_judge_reads_the_case_opening(registry: Registry) -> None:
    template = load_template(ROOT / "judges" / "iedr.j2")
    case = next(c for c in registry.cases("test") if c.opening_override)
    text = iedr_messages(template, case)[1]["content"]
    assert f"Their first message: {case.opening_override}" in text
    assert case.scenario.opening not in text
