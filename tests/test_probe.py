"""Persona probe (docs/method.md §5.6): messages, parsing, retries against the fake server, scores, and
the spread across counterfactual sets."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from typing import Any

import pandas as pd
import pytest

from emobench.episode.loop import run_episode
from emobench.episode.probe import parse_probe, probe_messages, run_probe
from emobench.episode.roles import derive_seed
from emobench.prompts import load_template
from emobench.records import Limits, ProbeAnswer
from emobench.registry import Persona, Registry
from emobench.run.runner import ROOT
from emobench.scoring.probe import counterfactual_spread, probe_scores
from tests.conftest import PROVENANCE, fake_caller, fake_roles
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder

TEMPLATE = load_template(ROOT / "prompts" / "probe.j2")
RETRIES = 2
CONVERSATION = [
    {"role": "user", "content": "my son wants to live with his dad"},
    {"role": "assistant", "content": "That is a lot to hear from him. How did he say it?"},
]


def _answer(**override: Any) -> dict[str, Any]:
    return {
        "dominant_need": "A", "threshold": "low",
        "big_five": [{"trait": "neuroticism", "pole": "high"}, {"trait": "extraversion", "pole": "low"}],
        "rationale": "She kept apologising for her feelings.",
        **override,
    }


def _pole(trait: str, pole: str) -> dict[str, str]:
    return {"trait": trait, "pole": pole}


VALID = json.dumps(_answer())
BAD = {
    "malformed_json": ('{"dominant_need": "A", "threshold": ', "not JSON"),
    "wrong_enum": (json.dumps(_answer(dominant_need="B")), "dominant_need"),
    "truncated": (VALID[: len(VALID) // 2], "not JSON"),
}


def test_parse_probe_reads_the_answer() -> None:
    answer = parse_probe(VALID, "stop")
    assert answer == ProbeAnswer(
        dominant_need="A", threshold="low", big_five={"neuroticism": "high", "extraversion": "low"},
        rationale="She kept apologising for her feelings.",
    )


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (_answer(dominant_need="emotional"), "dominant_need"),
        (_answer(threshold="extreme"), "threshold"),
        (_answer(big_five=[{"trait": "openness", "pole": "high"}]), "big_five: not a list of exactly two"),
        (_answer(big_five=[{"trait": t, "pole": "high"} for t in ("openness", "extraversion", "neuroticism")]), "exactly two"),
        (_answer(big_five={"openness": "high", "extraversion": "low"}), "big_five: not a list"),
        (_answer(big_five=[_pole("openness", "high"), _pole("openness", "low")]), r"big_five\[1\]\.trait.*twice"),
        (_answer(big_five=[_pole("honesty", "high"), _pole("openness", "low")]), r"big_five\[0\]\.trait"),
        (_answer(big_five=[_pole("openness", "high"), _pole("extraversion", "mid")]), r"big_five\[1\]\.pole"),
        (_answer(big_five=["openness", "high"]), r"big_five\[0\]: not an object"),
        (_answer(rationale=["why"]), "rationale"),
    ],
)
def test_parse_probe_rejects_invalid_answers(data: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        parse_probe(json.dumps(data), "stop")


@pytest.mark.parametrize(("text", "field"), [("nope", "not JSON"), ("[]", "not a JSON object"), (VALID, "truncated")])
def test_parse_probe_rejects_non_objects_and_truncation(text: str, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        parse_probe(text, "length" if field == "truncated" else "stop")


def test_probe_messages_append_one_question_to_the_unchanged_conversation() -> None:
    messages = probe_messages(TEMPLATE, [{"role": "system", "content": "be kind"}, *CONVERSATION])
    assert messages[:3] == [{"role": "system", "content": "be kind"}, *CONVERSATION]
    assert len(messages) == 4 and messages[-1]["role"] == "user"
    assert "dominant_need" in messages[-1]["content"] and "not from the person" in messages[-1]["content"]
    with pytest.raises(ValueError, match="last reply"):
        probe_messages(TEMPLATE, CONVERSATION[:1])
    with pytest.raises(ValueError, match="last reply"):
        probe_messages(TEMPLATE, [])


def test_the_probe_extends_exactly_what_the_subject_saw(registry: Registry, prompts: Any) -> None:
    def respond(body: dict[str, Any]) -> str:
        name = (body.get("response_format") or {}).get("json_schema", {}).get("name")
        return VALID if name == "persona_probe" else default_responder(body)

    with FakeOpenAIServer(FakeState(responder=respond)) as server:
        case = registry.cases("demo")[0]
        with_probe = dataclasses.replace(prompts, probe=TEMPLATE)
        limits = Limits(max_turns=3, min_turns=3)
        episode = asyncio.run(run_episode(case, fake_roles(server.base_url), with_probe, 3, limits, PROVENANCE))
        bodies = [r["body"] for r in server.state.requests]

    subject_requests = [b["messages"] for b in bodies if "response_format" not in b]
    probe_requests = [b for b in bodies if b.get("response_format", {}).get("json_schema", {}).get("name") == "persona_probe"]
    assert len(probe_requests) == 1
    # The probe request is the subject's last request and its reply, byte for byte, then the
    # question: the prefix cache covers everything but the question.
    last_reply = {"role": "assistant", "content": episode.turns[-1].reply}
    assert probe_requests[0]["messages"][:-1] == [*subject_requests[-1], last_reply]
    assert probe_requests[0]["messages"][-1] == {"role": "user", "content": TEMPLATE.block("user")}
    assert episode.probe == parse_probe(VALID)
    probe_calls = [c for c in episode.calls if c.template == TEMPLATE.ref]
    assert len(probe_calls) == 1 and probe_calls[0].role == "subject" and probe_calls[0].error is None
    assert probe_requests[0]["seed"] == derive_seed(3, "probe", "subject-a", 0)


@pytest.mark.parametrize("fault", sorted(BAD))
def test_an_invalid_probe_answer_is_retried_then_recorded_missing(fault: str) -> None:
    bad, error = BAD[fault]
    with FakeOpenAIServer(FakeState(responder=lambda body: bad)) as server:
        subject = fake_caller(server.base_url, "subject", "subject-a")
        answer, calls = asyncio.run(run_probe(subject, TEMPLATE, CONVERSATION, 9, RETRIES))
        seeds = [r["body"]["seed"] for r in server.state.requests]
    assert answer is None
    assert len(calls) == RETRIES + 1 and all(c.error and re.search(error, c.error) for c in calls)
    assert seeds == [derive_seed(9, "probe", "subject-a", attempt) for attempt in range(RETRIES + 1)]
    assert [c.seed for c in calls] == seeds and len(set(seeds)) == RETRIES + 1


def _persona(registry: Registry, dominant: str, threshold: str, big_five: dict[str, str]) -> Persona:
    """A real card with the scored fields pinned, so the expected values are checked by hand."""
    from emobench.registry.models import Need, Needs

    needs = Needs(**{axis: Need(level="high" if axis == dominant else "low", why="w") for axis in "CAP"})
    persona = registry.cases("demo")[0].persona
    return persona.model_copy(update={"needs": needs, "threshold": threshold, "big_five": big_five})


ALL_HIGH = dict.fromkeys(("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism"), "high")
RESERVED = {"openness": "low", "conscientiousness": "high", "extraversion": "low", "agreeableness": "low", "neuroticism": "low"}


@pytest.mark.parametrize(
    ("card", "answer", "expected"),
    [
        # Feeling-with, easy to reach, every trait high: need and threshold right; neuroticism
        # high is right and extraversion low is wrong, so half the poles.
        (("A", "low", ALL_HIGH), _answer(), (True, True, 0, 0.5, (1 + 1 + 0.5) / 3)),
        # Reserved, hard to reach, understanding first: need wrong, threshold two steps off;
        # neuroticism high is wrong and extraversion low is right.
        (("C", "high", RESERVED), _answer(), (False, False, 2, 0.5, 0.5 / 3)),
        (
            ("C", "high", RESERVED),
            _answer(dominant_need="P", threshold="medium",
                    big_five=[{"trait": "conscientiousness", "pole": "high"}, {"trait": "openness", "pole": "low"}]),
            (False, False, 1, 1.0, 1 / 3),
        ),
        (("P", "medium", RESERVED), _answer(dominant_need="P", threshold="medium",
                                           big_five=[{"trait": "agreeableness", "pole": "high"},
                                                     {"trait": "neuroticism", "pole": "high"}]),
         (True, True, 0, 0.0, 2 / 3)),
    ],
)
def test_probe_scores_against_the_card(registry: Registry, card: tuple[str, str, dict[str, str]], answer: dict[str, Any],
                                       expected: tuple[Any, ...]) -> None:
    scores = probe_scores(parse_probe(json.dumps(answer)), _persona(registry, *card))
    keys = ("need_correct", "threshold_correct", "threshold_distance", "big_five_correct", "accuracy")
    assert list(scores) == list(keys)
    assert tuple(scores[k] for k in keys[:4]) == expected[:4]
    assert scores["accuracy"] == pytest.approx(expected[4])


def test_no_answer_scores_as_missing_not_as_wrong(registry: Registry) -> None:
    scores = probe_scores(None, _persona(registry, "A", "low", ALL_HIGH))
    assert scores == dict.fromkeys(("need_correct", "threshold_correct", "threshold_distance", "big_five_correct", "accuracy"))


def _row(subject: str, cset: str | None, persona: str, case: str, seed: int, success: bool, epmq: float | None) -> dict[str, Any]:
    return {"subject": subject, "scenario_id": cset or "solo", "persona_id": persona, "case_id": case, "seed": seed,
            "success": success, "epmq": epmq, "counterfactual_set": cset}


def test_counterfactual_spread_per_subject_and_set() -> None:
    df = pd.DataFrame([
        # s1 on set X: p1 played it in two cases; per case over seeds first, then over cases:
        # success (0.5 + 1) / 2 = 0.75 and EPM-Q (50 + 80) / 2 = 65 (a flat mean would give 0.67, 60).
        _row("s1", "x", "p1", "c1", 0, True, 60.0), _row("s1", "x", "p1", "c1", 1, False, 40.0),
        _row("s1", "x", "p1", "c1b", 0, True, 80.0),
        # p2 never succeeds; one EPM-Q is null and is left out of the mean.
        _row("s1", "x", "p2", "c2", 0, False, 20.0), _row("s1", "x", "p2", "c2", 1, False, None),
        _row("s1", "x", "p3", "c3", 0, True, 90.0),
        _row("s1", "y", "p4", "c4", 0, False, 30.0),
        _row("s1", None, "p9", "c9", 0, True, 100.0),  # in no counterfactual set: ignored
        _row("s2", "x", "p1", "c1", 0, True, 70.0), _row("s2", "x", "p2", "c2", 0, True, 70.0),
    ])
    out = counterfactual_spread(df)
    assert out.columns.tolist() == ["subject", "counterfactual_set", "n_personas", "success_min", "success_max",
                                    "success_range", "epmq_min", "epmq_max", "epmq_range"]
    got = {(r.subject, r.counterfactual_set): r for r in out.itertuples(index=False)}
    assert set(got) == {("s1", "x"), ("s1", "y"), ("s2", "x")}
    x = got[("s1", "x")]
    assert (x.n_personas, x.success_min, x.success_max, x.success_range) == (3, 0.0, 1.0, 1.0)
    assert (x.epmq_min, x.epmq_max, x.epmq_range) == (20.0, 90.0, 70.0)
    y = got[("s1", "y")]
    assert (y.n_personas, y.success_range, y.epmq_min, y.epmq_range) == (1, 0.0, 30.0, 0.0)
    s2 = got[("s2", "x")]
    assert (s2.n_personas, s2.success_min, s2.success_range, s2.epmq_max, s2.epmq_range) == (2, 1.0, 0.0, 70.0, 0.0)
    # The per-persona means behind the spread: p1's success 0.75 sits between the extremes.
    assert counterfactual_spread(df[df["persona_id"].isin(["p1", "p2"]) & (df["subject"] == "s1")]).iloc[0].success_max == 0.75


def test_counterfactual_spread_with_no_set_is_empty() -> None:
    out = counterfactual_spread(pd.DataFrame([_row("s1", None, "p1", "c1", 0, True, 50.0)]))
    assert out.empty and "epmq_range" in out.columns
