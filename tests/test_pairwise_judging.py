"""Pairwise judging against the fake server: both orders, anonymity, mapping back to subject
labels, position bias, invalid verdicts, pair planning and the pairwise.parquet table."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

from emobench.episode.roles import derive_seed
from emobench.judging.pairwise import (
    DIMENSIONS,
    PAIRWISE_SCHEMA,
    compare_pair,
    judge_pairs,
    pairwise_messages,
    pairwise_table,
    parse_pairwise,
    plan_pairs,
    verdicts_frame,
)
from emobench.prompts import load_template
from emobench.records import Episode, PairwiseVerdict, Turn, TurnJudgement, UserMove
from emobench.registry import Case, Registry
from emobench.run.runner import ROOT
from emobench.scoring.pairwise import bradley_terry_ci
from emobench.scoring.reliability import FLIP_COLUMNS, position_flip_rate
from tests.conftest import Serve, fake_caller
from tests.fake_openai import FakeOpenAIServer, Responder

TEMPLATE = load_template(ROOT / "judges" / "pairwise.j2")
# Labels that occur nowhere in the cards, so finding one in a request means it leaked.
STRONG, WEAK, OTHER = "vllm:strong-qx7", "openai:weak-zk3", "litellm:other-jv2"
GOOD_MARK = "I hear how much this is costing you."
QUALITY = {STRONG: 2, OTHER: 1, WEAK: 0}  # how many times each subject's replies say GOOD_MARK




def _episode(case: Case, subject: str, seed: int = 0, *, left: bool = False) -> Episode:
    good = " ".join([GOOD_MARK] * QUALITY.get(subject, 0))
    turns = [
        Turn(
            index=i, user=UserMove(message=f"user line {i}", meter_delta=0),
            reply=f"{good} Have you tried making a list? ({i})".strip(),
            judgement=TurnJudgement(verdicts=[], valid=False), epm=None, meter=40.0,
        )
        for i in (1, 2)
    ]
    return Episode(
        key=f"{subject}|{case.id}|{seed}", subject=subject, case_id=case.id, scenario_id=case.scenario.id,
        persona_id=case.persona.id, seed=seed, split="demo", p0=case.p0, turns=turns,
        last_user=UserMove(message="Forget it.", meter_delta=-10, leave=True) if left else None,
        final_meter=40.0, stop_reason="user_left" if left else "max_turns", status=None, success_turn=None,
        roles={}, templates={}, calls=[], registry_version="r", config_hash="c", emobench_version="0",
        started_at="", finished_at="",
    )


def _verdict(winners: dict[str, str]) -> str:
    return json.dumps({dim: {"reason": "because", "winner": winners[dim]} for dim in DIMENSIONS})


def _conversations(body: dict[str, Any]) -> tuple[str, str]:
    first, second = re.findall(r"<<<CONVERSATION\n(.*?)CONVERSATION>>>", body["messages"][1]["content"], re.S)
    return first, second


def always(position: str) -> Callable[[dict[str, Any]], str]:
    return lambda body: _verdict(dict.fromkeys(DIMENSIONS, position))


def prefers_good(body: dict[str, Any]) -> str:
    """A consistent judge: the conversation with more good lines wins, wherever it is shown."""
    first, second = _conversations(body)
    return _verdict(dict.fromkeys(DIMENSIONS, "1" if first.count(GOOD_MARK) > second.count(GOOD_MARK) else "2"))


def _compare(server: FakeOpenAIServer, case: Case, x: Episode, y: Episode, retries: int = 1) -> Any:
    judge = fake_caller(server.base_url, "judge", "judge-0")
    return asyncio.run(compare_pair(judge, TEMPLATE, case, x, y, seed=11, retries=retries))


def test_both_orders_are_asked_anonymised_and_winners_map_back(serve: Serve, registry: Registry) -> None:
    case = registry.cases("demo")[0]
    weak, strong = _episode(case, WEAK), _episode(case, STRONG, left=True)
    mixed = {"empathy": "1", "humanlikeness": "2", "persona_adaptation": "1", "coherence": "2"}
    server = serve(lambda body: _verdict(mixed))
    verdicts, calls = _compare(server, case, weak, strong)  # given out of label order on purpose
    bodies = [r["body"] for r in server.state.requests]

    assert len(bodies) == 2 and len(calls) == 2 and all(c.error is None for c in calls)
    for body in bodies:
        text = json.dumps(body)
        assert STRONG not in text and WEAK not in text and "strong" not in text and "weak" not in text
        assert body["response_format"]["json_schema"]["name"] == "pairwise_verdict"
        assert case.hidden_need in body["messages"][0]["content"]  # the hidden card is shown to the judge
        assert all(dim in body["messages"][-1]["content"] for dim in DIMENSIONS)  # the task follows the conversations
    # subject_a is the lexically first label: "openai:weak..." < "vllm:strong...".
    shown_first = {("ab" if GOOD_MARK not in _conversations(b)[0] else "ba"): b for b in bodies}
    assert set(shown_first) == {"ab", "ba"}
    assert f"[{case.persona.name} left the chat here.]" in _conversations(shown_first["ba"])[0]
    assert {b["seed"] for b in bodies} == {derive_seed(11, "pairwise", "judge-0", WEAK, STRONG, o, 0) for o in ("ab", "ba")}

    assert len(verdicts) == 8 and all(v.subject_a == WEAK and v.subject_b == STRONG for v in verdicts)
    by = {(v.order, v.dimension): v.winner for v in verdicts}
    for dim, position in mixed.items():
        # "1" is whoever was shown first: subject_a in order ab, subject_b in order ba.
        assert by[("ab", dim)] == (WEAK if position == "1" else STRONG)
        assert by[("ba", dim)] == (STRONG if position == "1" else WEAK)


def test_messages_hold_both_transcripts_in_the_order_given(registry: Registry) -> None:
    case = registry.cases("demo")[0]
    a, b = _episode(case, WEAK), _episode(case, STRONG)
    system, user = pairwise_messages(TEMPLATE, case, a, b)
    assert system["role"] == "system" and user["role"] == "user"
    # Both fenced in the order given, the dimensions between them; the task after them names the first Conversation 1.
    first, second = re.findall(r"<<<CONVERSATION\n(.*?)CONVERSATION>>>", user["content"], re.S)
    assert "Have you tried" in first and GOOD_MARK in second and GOOD_MARK not in first
    content = user["content"]
    assert content.index("Have you tried") < content.index("WHOLE-CONVERSATION DIMENSIONS") < content.index(GOOD_MARK)
    assert content.index(GOOD_MARK) < content.index("the one before the dimensions is Conversation 1")
    assert f"{case.persona.name}: user line 1" in user["content"] and "Assistant: Have you tried" in user["content"]
    # The system prompt depends on the case only, so it is the same for every pair of the case.
    assert pairwise_messages(TEMPLATE, case, b, a)[0] == system


@pytest.mark.parametrize(("responder", "flip"), [(always("1"), 1.0), (always("2"), 1.0), (prefers_good, 0.0)])
def test_flip_rate_of_a_position_biased_and_a_consistent_judge(
    serve: Serve, registry: Registry, responder: Responder, flip: float
) -> None:
    cases = registry.cases("demo")
    episodes = [_episode(c, s, seed) for c in cases for s in (STRONG, WEAK, OTHER) for seed in (0, 1)]
    pairs = plan_pairs(episodes, None)
    server = serve(responder)
    judges = [fake_caller(server.base_url, "judge", f"judge-{i}") for i in range(2)]
    verdicts, calls = asyncio.run(judge_pairs(judges, TEMPLATE, {c.id: c for c in cases}, pairs, 3, 1, concurrency=4))
    assert len(pairs) == len(cases) * 2 * 3
    assert len(calls) == len(pairs) * 2 * 2 and len(verdicts) == len(calls) * len(DIMENSIONS)
    # Results come in (pair, judge) order whatever the completion order.
    assert [(v.case_id, v.seed, v.judge) for v in verdicts[:: 2 * len(DIMENSIONS)]] == [
        (x.case_id, x.seed, j.info.label) for x, _ in pairs for j in judges
    ]
    frame = verdicts_frame(verdicts)
    assert list(frame.columns) == list(FLIP_COLUMNS) and frame.attrs["n_invalid"] == 0
    assert position_flip_rate(frame) == flip
    ratings = bradley_terry_ci(frame, n_boot=50, seed=0)
    assert set(ratings["subject"]) == {STRONG, WEAK, OTHER}
    if responder is prefers_good:
        with_strong = frame["subject_a"].eq(STRONG) | frame["subject_b"].eq(STRONG)
        assert ratings.iloc[0]["subject"] == STRONG and (frame.loc[with_strong, "winner"] == STRONG).all()


BAD_OUTPUTS = {
    "not_json": "The first one is better.",
    "half_object": _verdict(dict.fromkeys(DIMENSIONS, "1"))[:40],
    "tie": _verdict({**dict.fromkeys(DIMENSIONS, "1"), "coherence": "tie"}),
    "both": _verdict({**dict.fromkeys(DIMENSIONS, "2"), "empathy": "both"}),
    "integer_winner": json.dumps({dim: {"reason": "r", "winner": 1} for dim in DIMENSIONS}),
    "missing_dimension": json.dumps({dim: {"reason": "r", "winner": "1"} for dim in DIMENSIONS[:3]}),
    "not_an_object": json.dumps(["1", "2", "1", "2"]),
}


@pytest.mark.parametrize("kind", list(BAD_OUTPUTS))
def test_invalid_verdicts_are_retried_then_recorded_never_won(serve: Serve, registry: Registry, kind: str) -> None:
    case = registry.cases("demo")[0]
    server = serve(lambda body: BAD_OUTPUTS[kind])
    verdicts, calls = _compare(server, case, _episode(case, STRONG), _episode(case, WEAK), retries=2)
    seeds = [r["body"]["seed"] for r in server.state.requests]
    assert len(calls) == 6 and all(c.error for c in calls) and len(set(seeds)) == 6  # a new seed per attempt
    assert len(verdicts) == 8 and all(v.winner is None and v.error == calls[-1].error for v in verdicts)
    frame = verdicts_frame(verdicts)
    assert frame.empty and frame.attrs == {"n_invalid": 8, "invalid_by_judge": {"judge-0": 8}}
    assert math.isnan(position_flip_rate(frame))


def test_a_retry_that_succeeds_is_scored_and_the_failed_attempt_kept(serve: Serve, registry: Registry) -> None:
    case = registry.cases("demo")[0]
    seen: Counter[str] = Counter()

    def flaky(body: dict[str, Any]) -> str:
        first, _ = _conversations(body)
        seen[first] += 1
        return "{" if seen[first] == 1 else _verdict(dict.fromkeys(DIMENSIONS, "2"))

    server = serve(flaky)
    verdicts, calls = _compare(server, case, _episode(case, STRONG), _episode(case, WEAK), retries=1)
    assert [c.error is not None for c in calls] == [True, False, True, False]  # per order: bad, then good
    assert calls[0].seed != calls[1].seed
    assert all(v.winner is not None and v.error is None for v in verdicts)
    assert position_flip_rate(verdicts_frame(verdicts)) == 1.0  # always "2" flips


def test_parse_pairwise_rejects_truncation_and_returns_positions() -> None:
    good = _verdict({"empathy": "1", "humanlikeness": "2", "persona_adaptation": "2", "coherence": "1"})
    assert parse_pairwise(good, "stop") == {"empathy": "1", "humanlikeness": "2", "persona_adaptation": "2", "coherence": "1"}
    with pytest.raises(ValueError, match="truncated"):
        parse_pairwise(good, "length")
    with pytest.raises(ValueError, match=r"coherence\.winner"):
        parse_pairwise(BAD_OUTPUTS["tie"])
    with pytest.raises(ValueError, match="coherence: missing"):
        parse_pairwise(BAD_OUTPUTS["missing_dimension"])


def test_plan_pairs_with_and_without_reference_subjects(registry: Registry) -> None:
    cases = registry.cases("demo")
    episodes = [_episode(c, s, seed) for c in cases for s in ("ref", "cand-1", "cand-2") for seed in (0, 1)]
    episodes.append(_episode(cases[0], "cand-1", seed=7))  # alone on its seed: no partner
    every = plan_pairs(episodes, None)
    assert len(every) == len(cases) * 2 * 3 and plan_pairs(episodes, []) == every
    for x, y in every:
        assert (x.case_id, x.seed) == (y.case_id, y.seed) and x.subject < y.subject
    against_ref = plan_pairs(episodes, ["ref"])
    assert len(against_ref) == len(cases) * 2 * 2
    assert all("ref" in (x.subject, y.subject) for x, y in against_ref)
    assert {(x.subject, y.subject) for x, y in against_ref} == {("cand-1", "ref"), ("cand-2", "ref")}
    with pytest.raises(ValueError, match="more than one episode"):
        plan_pairs([*episodes, _episode(cases[0], "ref", 0)], None)


def test_compare_pair_and_judge_pairs_refuse_bad_input_before_calling(serve: Serve, registry: Registry) -> None:
    fake = serve(always("1"))
    case, other = registry.cases("demo")[:2]
    judge = fake_caller(fake.base_url, "judge", "judge-0")
    for x, y in [
        (_episode(case, STRONG), _episode(case, STRONG)),
        (_episode(case, STRONG), _episode(case, WEAK, seed=1)),
        (_episode(case, STRONG), _episode(other, WEAK)),
    ]:
        with pytest.raises(ValueError):
            asyncio.run(compare_pair(judge, TEMPLATE, case, x, y, 0, 0))
    pairs = [(_episode(other, STRONG), _episode(other, WEAK))]
    with pytest.raises(ValueError, match="no case card"):
        asyncio.run(judge_pairs([judge], TEMPLATE, {case.id: case}, pairs, 0, 0, 2))
    assert fake.state.requests == []


def test_pairwise_table_keeps_invalid_rows_with_their_error() -> None:
    ab = PairwiseVerdict(case_id="c", seed=3, judge="j", dimension="empathy", subject_a="a", subject_b="b", order="ab",
                         winner="a")
    verdicts = [ab, ab.model_copy(update={"order": "ba", "winner": None, "error": "not JSON"})]
    table = pairwise_table(verdicts)
    assert table.schema == PAIRWISE_SCHEMA
    assert table.column("winner").to_pylist() == ["a", None] and table.column("error").to_pylist() == [None, "not JSON"]
    frame = verdicts_frame(verdicts)
    assert len(frame) == 1 and frame.attrs["n_invalid"] == 1
    pd.testing.assert_frame_equal(frame, table.to_pandas().dropna(subset=["winner"])[list(FLIP_COLUMNS)])


@pytest.mark.parametrize(("language", "dimensions", "task"), [("", "WHOLE-CONVERSATION DIMENSIONS", "TASK:"),
                                                        ("zh", "整场对话的四个维度", "任务：")])
@pytest.mark.parametrize("left", [False, True])
def test_holistic_and_pairwise_prompts_begin_as_the_last_per_turn_prompt(
    registry: Registry, left: bool, language: str, dimensions: str, task: str
) -> None:
    """All judge templates share the system block and render the conversation alike, so a provider's
    prefix cache holds an episode's holistic and pairwise prompts up to its last reply (docs/cost.md)."""
    from emobench.judging.holistic import holistic_messages
    from emobench.judging.mdep import judge_messages

    case = registry.cases("demo")[0]
    episode, other = _episode(case, WEAK, left=left), _episode(case, STRONG)
    transcript = [line for t in episode.turns[:-1] for line in
                  ({"speaker": case.persona.name, "text": t.user.message}, {"speaker": "Assistant", "text": t.reply})]
    transcript.append({"speaker": case.persona.name, "text": episode.turns[-1].user.message})
    judges = ROOT / "judges" / language
    last = judge_messages(load_template(judges / "mdep.j2"), case, transcript, episode.turns[-1].reply)
    prefix = last[1]["content"].split("\nCONVERSATION>>>")[0]
    assert prefix.endswith(episode.turns[-1].reply)
    # Nothing fixed after what varies: the per-turn task is the system block's, and the prompt ends with the conversation.
    assert last[1]["content"].rstrip().endswith("CONVERSATION>>>")
    holistic = holistic_messages(load_template(judges / "holistic.j2"), case, episode)
    pairwise = pairwise_messages(load_template(judges / "pairwise.j2"), case, episode, other)
    for messages in (holistic, pairwise):
        assert messages[0] == last[0]
        assert messages[1]["content"].startswith(prefix)
    if not left:  # rated on the same dimensions, word for word: a comparison begins as its first one's holistic prompt
        through = holistic[1]["content"].split(task)[0]
        assert dimensions in through and pairwise[1]["content"].startswith(through)
