"""Holistic rubric (docs/method.md §5.4): parsing, retries against the fake server, mean over valid judges."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from emobench.episode.loop import run_episode
from emobench.episode.roles import derive_seed
from emobench.judging.holistic import holistic_messages, judge_holistic, parse_holistic
from emobench.prompts import load_template
from emobench.records import HOLISTIC_DIMENSIONS, DimScore, HolisticVerdict, Limits, UserMove, mean_scores
from emobench.registry import Registry
from emobench.run.runner import ROOT
from tests.conftest import PROVENANCE, fake_caller, fake_roles
from tests.fake_openai import FakeOpenAIServer, FakeState
from tests.test_audit import make_episode

TEMPLATE = load_template(ROOT / "judges" / "holistic.j2")
RETRIES = 2


def _verdict(scores: tuple[int, int, int, int] = (7, 6, 5, 8), **override: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        dim: {"evidence": "what part weighs on you most", "reason": "asks, does not assume", "score": score}
        for dim, score in zip(HOLISTIC_DIMENSIONS, scores, strict=True)
    }
    data.update(override)
    return data


def _valid_text(scores: tuple[int, int, int, int] = (7, 6, 5, 8)) -> str:
    return json.dumps(_verdict(scores))


# One entry per way a judge can fail validation (issue 4 "Must be shown").
BAD = {
    "malformed_json": ('{"empathy": {"score": 7, "evidence": "x"', "not JSON"),
    "out_of_range": (json.dumps(_verdict((7, 11, 5, 8))), r"humanlikeness\.score"),
    "missing_evidence": (json.dumps(_verdict(coherence={"evidence": "", "reason": "r", "score": 6})), r"coherence\.evidence"),
    "truncated": (_valid_text()[: len(_valid_text()) // 2], "not JSON"),
}


def test_parse_holistic_reads_every_dimension() -> None:
    scores = parse_holistic(_valid_text(), "stop")
    assert list(scores) == list(HOLISTIC_DIMENSIONS)
    expected = DimScore(score=5, evidence="what part weighs on you most", reason="asks, does not assume")
    assert scores["persona_adaptation"] == expected


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("not json at all", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({k: v for k, v in _verdict().items() if k != "coherence"}), "coherence: missing"),
        (json.dumps(_verdict((0, 6, 5, 8))), r"empathy\.score"),
        (json.dumps(_verdict((7, 6, 5, 11))), r"coherence\.score"),
        (json.dumps(_verdict(empathy={"evidence": "x", "reason": "r", "score": "7"})), r"empathy\.score"),
        (json.dumps(_verdict(empathy={"evidence": "x", "reason": "r", "score": True})), r"empathy\.score"),
        (json.dumps(_verdict(empathy={"evidence": "x", "reason": "r", "score": 7.5})), r"empathy\.score"),
        (json.dumps(_verdict(humanlikeness={"reason": "r", "score": 4})), r"humanlikeness\.evidence"),
        (json.dumps(_verdict(humanlikeness={"evidence": "   ", "reason": "r", "score": 4})), r"humanlikeness\.evidence"),
        (json.dumps(_verdict(coherence={"evidence": "x", "reason": 3, "score": 4})), r"coherence\.reason"),
    ],
)
def test_parse_holistic_rejects_invalid_output(text: str, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        parse_holistic(text, "stop")


def test_parse_holistic_rejects_a_truncated_response_even_if_it_parses() -> None:
    with pytest.raises(ValueError, match="truncated"):
        parse_holistic(_valid_text(), "length")


def test_messages_hold_the_card_in_system_and_the_whole_transcript_in_user(
    fake: FakeOpenAIServer, registry: Registry, prompts: Any
) -> None:
    case = registry.cases("demo")[0]
    episode = asyncio.run(run_episode(case, fake_roles(fake.base_url), prompts, 0, Limits(max_turns=3, min_turns=3), PROVENANCE))
    episode = episode.model_copy(update={"last_user": UserMove(message="forget it, bye", meter_delta=-8, leave=True)})
    system, user = holistic_messages(TEMPLATE, case, episode)
    assert system["role"] == "system" and case.persona.name in system["content"]
    assert case.hidden_need in system["content"]
    assert "transcript" not in system["content"] and episode.turns[0].reply not in system["content"]
    text = user["content"]
    positions: list[int] = []
    for turn in episode.turns:  # user then assistant, turn by turn, in order
        positions += [text.index(f"{case.persona.name}: {turn.user.message}", positions[-1] if positions else 0)]
        positions += [text.index(f"Assistant: {turn.reply}", positions[-1])]
    assert positions == sorted(positions)
    assert text.index("forget it, bye") > positions[-1]
    # The system block does not depend on the episode, so the judge's prefix cache is shared.
    other = episode.model_copy(update={"turns": episode.turns[:1], "last_user": None})
    assert holistic_messages(TEMPLATE, case, other)[0] == system


def _scripted(answers: dict[int, str]) -> Any:
    """A responder that answers holistic requests by seed: each judge attempt has its own."""
    def respond(body: dict[str, Any]) -> str:
        assert body["response_format"]["json_schema"]["name"] == "holistic_verdict"
        return answers[int(body["seed"])]

    return respond


def _seeds(label: str, seed: int = 5) -> list[int]:
    return [derive_seed(seed, "holistic", label, attempt) for attempt in range(RETRIES + 1)]


def _judge_with(answers: dict[str, list[str]], registry: Registry) -> tuple[list[HolisticVerdict], list[Any], Any]:
    by_seed = {seed: text for label, texts in answers.items() for seed, text in zip(_seeds(label), texts, strict=True)}
    with FakeOpenAIServer(FakeState(responder=_scripted(by_seed))) as server:
        judges = tuple(fake_caller(server.base_url, "judge", label) for label in answers)
        case = registry.cases("demo")[0]
        episode = make_episode(case, [("it's a lot", 2, False)])
        verdicts, calls = asyncio.run(judge_holistic(judges, TEMPLATE, case, episode, 5, RETRIES))
        return verdicts, calls, server.state.requests


@pytest.mark.parametrize("fault", sorted(BAD))
def test_an_invalid_judge_is_retried_then_recorded_invalid_never_zero(fault: str, registry: Registry) -> None:
    bad, error = BAD[fault]
    verdicts, calls, requests = _judge_with({"judge-0": [_valid_text((8, 8, 6, 9))] * 3, "judge-1": [bad] * 3}, registry)
    good, broken = verdicts
    assert good.valid and good.scores is not None and good.scores["empathy"].score == 8
    assert not broken.valid and broken.scores is None and broken.error is not None
    assert re.search(error, broken.error)
    # Every attempt is recorded, each with its own seed and the validation error.
    failed = [c for c in calls if c.seed in _seeds("judge-1")]
    assert len(failed) == RETRIES + 1 and all(c.error for c in failed)
    assert sorted(c.seed for c in failed) == sorted(_seeds("judge-1"))
    assert next(c for c in calls if c.seed in _seeds("judge-0")).error is None
    assert len(requests) == 1 + RETRIES + 1
    assert all(c.role == "judge" and c.template == TEMPLATE.ref for c in calls)
    # The invalid judge is left out of the mean: it does not pull any dimension towards 0.
    assert mean_scores(verdicts) == {"empathy": 8.0, "humanlikeness": 8.0, "persona_adaptation": 6.0, "coherence": 9.0}


def test_a_judge_that_recovers_on_retry_is_valid_and_keeps_the_failed_attempt(registry: Registry) -> None:
    verdicts, calls, _ = _judge_with({"judge-0": ["{oops", _valid_text(), "unused"]}, registry)
    assert verdicts[0].valid
    assert [c.error is not None for c in calls] == [True, False]
    assert calls[0].error is not None and calls[0].error.startswith("not JSON")


def test_mean_scores_over_valid_judges_only() -> None:
    def valid(label: str, scores: tuple[int, int, int, int]) -> HolisticVerdict:
        return HolisticVerdict(judge=label, valid=True, scores=parse_holistic(_valid_text(scores), "stop"))

    verdicts = [valid("a", (6, 4, 7, 9)), HolisticVerdict(judge="b", valid=False, error="not JSON"), valid("c", (9, 5, 8, 10))]
    assert mean_scores(verdicts) == {"empathy": 7.5, "humanlikeness": 4.5, "persona_adaptation": 7.5, "coherence": 9.5}
    assert mean_scores([verdicts[1]]) == dict.fromkeys(HOLISTIC_DIMENSIONS)
    assert mean_scores([]) == dict.fromkeys(HOLISTIC_DIMENSIONS)
