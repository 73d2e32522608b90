"""The play server's parts without a server: the body parser, the request window, the replay
store and journal repair, with hypothesis where the input space is large."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.play.guards import parse_body
from emobench.play.journal import JournalHead, JournalResume, JournalStop, JournalTurn, append, read_journal, repair_journal
from emobench.play.limits import Replays, Window
from emobench.play.store import PlayError
from emobench.records import UserMove

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3), max_leaves=8)


@given(st.binary(max_size=200) | JSON.map(lambda v: json.dumps(v).encode()))
def test_a_body_is_a_flat_object_or_one_clear_refusal(raw: bytes) -> None:
    try:
        data = parse_body(raw)
    except PlayError as exc:
        assert exc.status == 400 and "\n" not in str(exc)
        return
    assert isinstance(data, dict) and not any(isinstance(v, dict | list) for v in data.values())


@pytest.mark.parametrize("raw", [b'{"message": "\\ud800"}', b'{"m": "\\udfff x"}', b"[" * 30_000 + b"]" * 30_000,
                                 b'{"a": {"b": 1}}', b'"text"', b'{"a": "\xff"}'])
def test_hostile_bodies_are_400(raw: bytes) -> None:
    with pytest.raises(PlayError) as caught:
        parse_body(raw)
    assert caught.value.status == 400


@given(st.lists(st.floats(min_value=0, max_value=300), max_size=80), st.integers(1, 10))
def test_a_window_never_lets_more_than_its_limit_through_in_any_minute(times: list[float], limit: int) -> None:
    clock = iter(sorted(times))
    now = [0.0]

    def tick() -> float:
        return now[0]

    window = Window(limit, 60.0, clock=tick)
    allowed = []
    for at in clock:
        now[0] = at
        if window.allow("k"):
            allowed.append(at)
    assert all(sum(a - 60 < b <= a for b in allowed) <= limit for a in allowed)
    if times:
        assert allowed  # the first request always passes


def test_a_replay_waits_for_the_first_and_gets_its_answer() -> None:
    async def scenario() -> tuple[object, object, object]:
        replays = Replays(size=2)
        assert replays.claim("k") is None
        waiting = replays.claim("k")
        assert isinstance(waiting, asyncio.Future)
        replays.settle("k", (200, b"{}"))
        for key in ("a", "b"):  # the oldest answers are forgotten beyond `size`
            replays.claim(key)
            replays.settle(key, (201, b""))
        assert replays.claim("x") is None
        replays.drop("x")  # the first went away without an answer: a replay runs anew
        return await waiting, replays.claim("k"), replays.claim("x")

    first, forgotten, anew = asyncio.run(scenario())
    assert first == (200, b"{}") and forgotten is None and anew is None


def _journal(path: Path) -> None:
    head = JournalHead(episode_id="0123456789abcdef", token_sha256="t", player="human:x", seat="user", case_id="c",
                       subject="s", seed=0, key="s|c|0|human:x", page_version="v", consented_at="a", started_at="b",
                       config_hash="h", request="start-1")
    append(path, head)
    append(path, JournalTurn(index=1, human_s=0.0, model_s=0.1, calls=[], request="t-1"))
    append(path, JournalResume(at="c"))
    append(path, JournalTurn(index=2, move=UserMove(message="words", meter_delta=3, human=True), human_s=1.0, model_s=0.1,
                             calls=[], request="t-2"))
    append(path, JournalStop(reason="user_left", move=UserMove(message="bye now", meter_delta=0, leave=True, human=True)))


def test_a_journal_reads_its_requests_and_the_persons_words(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    _journal(path)
    read = read_journal(path)
    assert read.requests == {"start-1", "t-1", "t-2"} and read.resumed == 1
    assert read.texts() == ["words", "bye now"]


@settings(max_examples=60)
@given(st.data())
def test_repair_keeps_the_whole_lines_before_any_damage(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    path = tmp_path_factory.mktemp("j") / "j.jsonl"
    _journal(path)
    whole = path.read_bytes()
    cut = data.draw(st.integers(0, len(whole)))
    junk = data.draw(st.sampled_from([b"", b"{not json}\n", b'{"kind": "turn"}\n', b"\x00\xff\n"]))
    path.write_bytes(whole[:cut] + junk)
    read, note = repair_journal(path)
    kept = path.read_bytes()
    assert (whole.startswith(kept) and kept.endswith(b"\n")) or kept == b""
    assert (note is None) == (kept == whole[:cut] + junk)
    lines = kept.count(b"\n")
    assert (read is None) == (lines == 0)
    if read is not None:
        assert len(read.turns) == sum(orjson.loads(line)["kind"] == "turn" for line in kept.splitlines())


def test_the_play_section_is_not_part_of_the_config_hash() -> None:
    from emobench.config import PanelConfig, PlayConfig, RoleConfig, RunConfig

    role = RoleConfig(binding="vllm:x")
    plain = RunConfig(subjects=[role], user=role, panel=PanelConfig(judges=[role]))
    limited = plain.model_copy(update={"play": PlayConfig(open_per_player=1, allowed_origins=["https://a.example"])})
    assert plain.config_hash() == limited.config_hash()
    with pytest.raises(ValueError):
        PlayConfig(allowed_origins=["https://a.example/path"])  # an origin has no path
