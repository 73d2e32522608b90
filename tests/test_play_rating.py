"""`emobench play`'s rating: the person who played the user rates the supporter on the holistic rubric once
the episode has ended; the rating goes to ratings.jsonl, `emobench anchor` reads it, a delete takes it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState
from tests.play_support import LocalPlay

CASE = "demo4-01"
OPEN = {"player_per_minute": 100_000, "server_per_minute": 100_000, "anonymous_per_minute": 100_000}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeState()) as server:
        yield server


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory, fake: FakeOpenAIServer) -> Path:
    return write_config(tmp_path_factory.mktemp("cfg") / "play.yaml", fake.base_url, max_turns=4, min_turns=3)


@pytest.fixture(scope="module")
def server(config: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlay]:
    play = LocalPlay(config, "user", tmp_path_factory.mktemp("rate") / "run", handles_per_address=1000,
                     open_per_address=1000, **OPEN)
    yield play
    play.stop()


def played(server: LocalPlay, token: str, end: bool = True, case: str = CASE) -> tuple[str, dict[str, Any]]:
    status, view = server.call("POST", f"/api/p/{token}/episodes", {"case": case})
    assert status == 200, view
    path = f"/api/p/{token}/episodes/{view['id']}"
    status, view = server.call("POST", path + "/turn", {"message": "It has been a long week.", "meter": 40})
    assert status == 200, view
    if end:
        status, view = server.call("POST", path + "/leave", {"message": "I should go.", "meter": 45})
        assert status == 200 and view["done"], view
    return path, view


def rating_lines(server: LocalPlay) -> list[dict[str, Any]]:
    file = server.hub.store.rd.ratings
    return [json.loads(line) for line in file.read_text().splitlines()] if file.exists() else []


def test_the_player_rates_an_ended_episode_once_and_bad_ratings_are_one_line(server: LocalPlay) -> None:
    token = server.join("rater1")
    path, view = played(server, token)
    assert view["rating"] == {"given": False, "dimensions": ["empathy", "humanlikeness", "persona_adaptation",
                                                              "coherence", "overall"], "scale": [1, 10]}
    for body, says in [({"warmth": 5}, "unknown dimension"), ({"empathy": 11}, "empathy: a whole number"),
                       ({"empathy": True}, "empathy: a whole number"), ({"empathy": 6.5}, "empathy: a whole number"),
                       ({"empathy": "7"}, "empathy: a whole number"), ({}, "one or more of"),
                       ({"ratings": {"empathy": 7}}, "nests too deep")]:
        status, answer = server.call("POST", path + "/rating", body)
        assert status == 400 and says in answer["error"] and "\n" not in answer["error"], (body, answer)
    other = server.join("rater2")
    status, _ = server.call("POST", path.replace(token, other) + "/rating", {"empathy": 7})
    assert status == 404
    open_path, _ = played(server, other, end=False)
    status, answer = server.call("POST", open_path + "/rating", {"empathy": 7})
    assert status == 409 and "ended" in answer["error"]
    status, view = server.call("POST", path + "/rating", {"empathy": 7, "overall": 6})
    assert status == 200 and view["rating"]["given"] is True and view["result"]["stop_reason"]
    status, answer = server.call("POST", path + "/rating", {"empathy": 2})
    assert status == 409 and "rated already" in answer["error"]
    mine = [line for line in rating_lines(server) if line["episode"].endswith("|human:rater1")]
    assert len(mine) == 1 and mine[0]["ratings"] == {"human:rater1": {"empathy": 7, "overall": 6}} and mine[0]["rated_at"]


def test_anchor_reads_the_ratings_and_a_delete_takes_them(server: LocalPlay, tmp_path: Path) -> None:
    from emobench.play.store import PlayStore
    from tests.gate_support import emobench

    store: PlayStore = server.hub.store
    token = server.join("rater3")
    paths = [played(server, token, case=case)[0] for case in ("demo4-01", "demo4-02", "demo4-02", "demo4-01")]
    for path, score in zip(paths[:3], (8, 5, 6), strict=True):
        status, answer = server.call("POST", path + "/rating", {"empathy": score, "humanlikeness": score})
        assert status == 200, answer
    keys = {store.heads[p.rsplit("/", 1)[1]].key for p in paths}
    deadline = time.monotonic() + 60
    while not all(store.judged(k) for k in keys) and time.monotonic() < deadline:  # judged in the background
        time.sleep(0.2)
    run = store.rd.path
    code, _, err = emobench("anchor", str(run), "--ratings", str(store.rd.ratings), "--json", str(tmp_path / "a.json"))
    assert code == 0, err
    found = json.loads((tmp_path / "a.json").read_text())
    empathy = next(e for e in found["estimates"] if e["dimension"] == "empathy")
    given = [score for line in rating_lines(server) for rater in line["ratings"].values() for d, score in rater.items()
             if d == "empathy"]
    assert empathy["n_rated"] == len(given) >= 3 and empathy["people"]["mean"] == pytest.approx(sum(given) / len(given))
    assert 0 <= empathy["anchored"]["weight"] <= 1 and empathy["n_episodes"] == len(store.done_keys())
    rated = paths[0]
    key = store.heads[rated.rsplit("/", 1)[1]].key
    assert store.rated(key)
    status, _ = server.call("DELETE", rated)
    assert status == 200
    assert not store.rated(key) and all(line["episode"] != key for line in rating_lines(server))
    assert key.encode() not in store.rd.ratings.read_bytes()
    status, _ = server.call("POST", rated + "/rating", {"empathy": 3})
    assert status == 410


def test_the_supporter_seat_is_not_asked_to_rate(config: Path, tmp_path: Path) -> None:
    play = LocalPlay(config, "supporter", tmp_path / "run", **OPEN)
    try:
        token = play.join("helper1")
        status, view = play.call("POST", f"/api/p/{token}/episodes", {"case": CASE})
        path = f"/api/p/{token}/episodes/{view['id']}"
        status, view = play.call("POST", path + "/leave", {"message": ""})
        assert status == 200 and view["done"] and "rating" not in view, view
        status, answer = play.call("POST", path + "/rating", {"empathy": 7})
        assert status == 409 and "user's seat" in answer["error"]
    finally:
        play.stop()
