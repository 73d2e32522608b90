"""Simulator audit: constructed episodes that trigger each flag, and a clean one that triggers none."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.errors import InputError
from emobench.judging import audit
from emobench.judging.audit import audit_episode, echo_share, load_patterns
from emobench.records import Episode, Limits, Turn, TurnJudgement, UserMove
from emobench.registry import Case, Registry
from emobench.registry.models import HiddenNeed

LIMITS = Limits(max_turns=30, min_turns=12, leave_meter=20.0)

REPLIES = [
    "That is a lot to land on you at 2am. What did he say, exactly?",
    "Did it come out of nowhere, or had he been hinting at it for a while?",
    "You work nights and still notice all of that about him.",
    "No need to apologise. I'm still here if you want to keep going.",
    "What is the part that stays with you when you try to sleep?",
    "That sounds like it hurts more than the legal questions do.",
]


def make_episode(
    case: Case,
    moves: list[tuple[str, int, bool]],
    *,
    replies: list[str] | None = None,
    last_user: UserMove | None = None,
    stop_reason: str = "max_turns",
) -> Episode:
    """Turn 1 is the card's opening; each (message, meter_delta, leave) move is one more turn."""
    replies = replies or [REPLIES[i % len(REPLIES)] for i in range(len(moves) + 1)]
    all_moves = [UserMove(message=case.opening, meter_delta=0, inner="opening message")]
    all_moves += [UserMove(message=m, meter_delta=d, leave=leave) for m, d, leave in moves]
    meter = float(case.persona.meter_start)
    turns = []
    for index, (move, reply) in enumerate(zip(all_moves, replies, strict=True), 1):
        meter = max(0.0, min(100.0, meter + move.meter_delta))
        judgement = TurnJudgement(verdicts=[], valid=False)
        turns.append(Turn(index=index, user=move, reply=reply, judgement=judgement, epm=None, meter=meter))
    if last_user is not None:
        meter = max(0.0, min(100.0, meter + last_user.meter_delta))
    return Episode(
        key=f"subject-a|{case.id}|0", subject="subject-a", case_id=case.id, scenario_id=case.scenario.id,
        persona_id=case.persona.id, seed=0, split=case.split, p0=case.p0, turns=turns, last_user=last_user,
        final_meter=meter, stop_reason=stop_reason, status=None, success_turn=None, roles={}, templates={}, calls=[],
        registry_version="r", config_hash="c", emobench_version="0", started_at="t0", finished_at="t1",
    )


HIDDEN_NEED = (
    "To have someone sit with the grief and the fear that she is losing her son, without rushing to tell "
    "her it is normal or that she is a great mum."
)


@pytest.fixture
def case(registry: Registry) -> Case:
    # The rules read the persona's name, meter start and hidden need: pinned to those the messages below
    # were written for (Lucia Ferreira, whose son wants to move: edition 3's demo3-01), so that neither
    # a card edit nor demo4-01's own story (Zoe Nguyen, comic-deal) can move the rules' inputs.
    case = registry.cases("demo")[0]
    persona = case.persona.model_copy(update={"name": "Lucia Ferreira", "meter_start": 40})
    need = HiddenNeed(axis=case.dominant_axis, text=HIDDEN_NEED)
    return case.model_copy(update={"persona": persona, "case_need": need})


CLEAN = [
    ("honestly I just want the legal side. what age do judges start listening to kids here?", 1, False),
    ("he said it so calmly. like he'd been thinking about it for weeks", -1, False),
    ("idk. his dad has a garden and a dog in Porto. I have night shifts and a tiny flat lol", 3, False),
    ("sorry, ignore me, it's late", -2, False),
    ("it's just that when he said it I felt like I'm losing him a bit", 4, False),
    ("i *really* don't know why I'm telling a chatbot this haha", 2, False),
    ("my friend said I should talk to someone, as if that helps at 2am", -3, False),
]


def test_a_clean_episode_has_no_flags(case: Case) -> None:
    assert audit_episode(make_episode(case, CLEAN), case, LIMITS) == []


def test_the_authored_opening_is_not_audited(case: Case) -> None:
    # Turn 1 is the card's own text, not simulator output: even a card opening that would trip
    # every check is left alone.
    odd = case.model_copy(update={"opening_override": "User: *sighs* as an AI"})
    assert audit_episode(make_episode(odd, CLEAN[:2]), odd, LIMITS) == []


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("As an AI, I don't really have a son, but I understand.", "assistant voice"),
        ("I'm here to support you through this, Lucia.", "assistant voice"),
        ("ok. how can I help you today?", "assistant voice"),
        ("that's a language model answer if I ever saw one", "assistant voice"),
        ("*sighs* yeah I guess", "stage direction"),
        ("(long pause) ok fine", "stage direction"),
        ("[laughs nervously] sorry", "stage direction"),
        ("User: I don't know anymore", "role prefix"),
        ("ok\nAssistant: I hear you", "role prefix"),
        ("Lucia: it's late, sorry", "role prefix"),
        ("Lucia Ferreira: never mind", "role prefix"),
    ],
)
def test_out_of_character_lines_are_flagged_with_their_turn(case: Case, message: str, kind: str) -> None:
    moves = [*CLEAN[:2], (message, 1, False), *CLEAN[2:4]]
    flags = audit_episode(make_episode(case, moves), case, LIMITS)
    assert [(f.kind, f.turn) for f in flags] == [("out_of_character", 4)]  # turn 1 is the opening
    assert flags[0].detail.startswith(kind)


def test_a_message_mostly_copied_from_the_previous_reply_is_out_of_character(case: Case) -> None:
    reply = "It sounds like the hardest part is not knowing whether the court will listen to what he wants."
    copied = "yeah the hardest part is not knowing whether the court will listen to what he wants"
    own = "yes, not knowing is awful. will a judge really care what a nine year old wants over me?"
    assert echo_share(copied, reply) == pytest.approx(15 / 16)  # every word but "yeah" sits in a shared 4-word run
    assert echo_share(own, reply) == 0.0
    replies = ["What happened?", reply, "Mm."]
    flags = audit_episode(make_episode(case, [CLEAN[0], (copied, 2, False)], replies=replies), case, LIMITS)
    assert [(f.kind, f.turn) for f in flags] == [("out_of_character", 3)]
    assert "echoes" in flags[0].detail
    assert audit_episode(make_episode(case, [CLEAN[0], (own, 2, False)], replies=replies), case, LIMITS) == []


def test_the_hidden_need_leaked_verbatim_or_near_verbatim(case: Case) -> None:
    # Content words of HIDDEN_NEED: someone sit grief fear losing son without rushing tell normal great mum.
    verbatim = "I just need someone to sit with the grief and the fear that I'm losing my son, without rushing"
    shuffled = "don't tell me I'm a great mum or that it's normal. I'm losing my son. the fear, the grief. sit with it, " \
        "without rushing"
    moves = [CLEAN[0], (verbatim, 2, False), CLEAN[1], (shuffled, 1, False), CLEAN[4]]
    flags = audit_episode(make_episode(case, moves), case, LIMITS)
    assert [(f.kind, f.turn) for f in flags] == [("hidden_need_leak", 3), ("hidden_need_leak", 5)]
    assert "run of 8" in flags[0].detail  # someone sit grief fear losing son without rushing
    assert "92%" in flags[1].detail  # 11 of the 12 content words; no long run
    # A message that touches the need ("losing him", "normal") without stating it is fine.
    hint = "everyone keeps telling me it's normal, kids change their minds"
    assert audit_episode(make_episode(case, [CLEAN[4], (hint, 1, False)]), case, LIMITS) == []


def test_a_meter_that_only_climbs_far_is_over_cooperative(case: Case) -> None:
    moves = [(text, 10, False) for text, _, _ in CLEAN[:5]]  # 40 -> 50, 60, 70, 80, 90
    flags = audit_episode(make_episode(case, moves), case, LIMITS)
    assert [(f.kind, f.turn) for f in flags] == [("over_cooperative", 5)]  # turn 5 reaches 80 = 40 + 40
    assert flags[0].detail == "meter rose on 5/5 simulated turns, 40 → 90 (+50)"


@pytest.mark.parametrize(
    "deltas",
    [
        [10, 10, 10, 10, 10, -1, -1],  # ends +48 but rose on only 5/7 turns: the user pushed back
        [10, 10, 10, 5, 4],  # rose every turn but ended +39
        [10, 10, 10],  # +30 in three moves: too few moves to call a pattern
    ],
)
def test_a_rising_meter_that_tests_back_or_stops_short_is_not_over_cooperative(case: Case, deltas: list[int]) -> None:
    moves = [(CLEAN[i % len(CLEAN)][0], d, False) for i, d in enumerate(deltas)]
    assert audit_episode(make_episode(case, moves), case, LIMITS) == []


def test_a_leave_flag_above_the_leave_meter_is_premature(case: Case) -> None:
    moves = [CLEAN[0], ("whatever, I'm going to bed. bye", -3, True), *CLEAN[1:3]]
    flags = audit_episode(make_episode(case, moves), case, LIMITS)
    assert [(f.kind, f.turn) for f in flags] == [("premature_leave", 3)]
    assert "meter 38" in flags[0].detail


def test_leaving_before_min_turns_is_premature(case: Case) -> None:
    moves = [(CLEAN[0][0], -10, False), (CLEAN[6][0], -8, False)]  # 40 -> 30 -> 22
    last = UserMove(message="forget it. goodnight", meter_delta=-5, leave=True)  # 17, below leave_meter
    episode = make_episode(case, moves, last_user=last, stop_reason="user_left")
    flags = audit_episode(episode, case, LIMITS)
    assert [(f.kind, f.turn) for f in flags] == [("premature_leave", 4)]
    assert flags[0].detail == "left at turn 4, before min_turns 12"
    # The same exit at turn 4 is in order when min_turns allows it.
    assert audit_episode(episode, case, Limits(min_turns=4)) == []


def test_the_last_message_is_audited_too(case: Case) -> None:
    last = UserMove(message="*closes laptop*", meter_delta=-10, leave=True)
    episode = make_episode(case, [(CLEAN[0][0], -10, False)] * 12, last_user=last, stop_reason="user_left")
    # 12 simulated turns after the opening, then the last message at turn 14.
    flags = audit_episode(episode, case, LIMITS)
    assert [(f.kind, f.turn) for f in flags] == [("out_of_character", 14)]


@pytest.fixture
def fresh_patterns() -> Iterator[None]:
    load_patterns.cache_clear()
    audit._compiled.cache_clear()
    yield
    load_patterns.cache_clear()
    audit._compiled.cache_clear()


def test_patterns_are_versioned_data(fresh_patterns: None) -> None:
    patterns = load_patterns()
    assert len(patterns.version) == 10 and set(patterns.patterns) == {"assistant_voice", "stage_direction", "role_prefix"}
    assert "the" in patterns.stopwords and "not" not in patterns.stopwords  # negation is content


def test_a_bad_pattern_file_is_one_error_naming_the_field(
    fresh_patterns: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "audit_patterns.yaml"
    bad.write_text(
        "out_of_character:\n  assistant_voice: ['(unclosed']\n  stage_direction: []\n  role_prefix: []\nstopwords: []\n"
    )
    monkeypatch.setattr(audit, "PATTERNS_PATH", bad)
    with pytest.raises(InputError, match=r"out_of_character\.assistant_voice: bad regular expression"):
        load_patterns()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from("abc"), max_size=10), st.lists(st.sampled_from("abc"), max_size=10))
def test_the_longest_common_run_is_the_longest_shared_slice(a: list[str], b: list[str]) -> None:
    # Every slice of a that occurs in b: what the leak rule's run means, by brute force.
    best = max((k for i in range(len(a)) for k in range(1, len(a) - i + 1)
                if any(b[j : j + k] == a[i : i + k] for j in range(len(b) - k + 1))), default=0)
    assert audit._longest_common_run(a, b) == best
