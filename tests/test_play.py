"""`emobench play` without a browser: safety, deletion, a dead endpoint, a kill mid-turn, the records."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from emobench.records import UserMove
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer
from tests.play_support import PlayServer

SECRET = "sk-emobench-test-secret-0123456789"


def test_a_human_move_sets_the_meter_freely_a_simulated_one_does_not() -> None:
    assert UserMove(message="x", meter_delta=-60, human=True).meter_delta == -60
    with pytest.raises(ValidationError):
        UserMove(message="x", meter_delta=-60)
    with pytest.raises(ValidationError):
        UserMove(message="x", meter_delta=101, human=True)


@pytest.fixture
def served(tmp_path: Path, fake: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PLAY_TEST_KEY", SECRET)
    roles = {"binding": f"openai:fake-model@{fake.base_url}", "api_key_env": "PLAY_TEST_KEY"}
    config = write_config(tmp_path / "play.yaml", fake.base_url, max_turns=6, min_turns=5,
                          subjects=[{**roles, "label": "subject-a"}], judges=[{**roles, "label": "judge-0"}])
    server = PlayServer(config, "user", tmp_path / "run")
    yield server, fake, config, tmp_path / "run"
    server.stop()


def test_no_key_or_address_reaches_the_page(served) -> None:  # type: ignore[no-untyped-def]
    server, fake, _, _ = served
    token = server.join("eve")
    pages = [server.text("/"), server.text(f"/p/{token}"), server.text("/static/play.js")]
    _, view = server.call("POST", f"/api/p/{token}/episodes", {"case": "demo4-01"})
    pages.append(json.dumps(view))
    _, view = server.call("POST", f"/api/p/{token}/episodes/{view['id']}/turn", {"message": "hm", "meter": 50})
    pages.append(json.dumps(view))
    _, view = server.call("POST", f"/api/p/{token}/episodes/{view['id']}/leave", {"meter": 50})
    pages += [json.dumps(view), json.dumps(server.call("GET", f"/api/p/{token}")[1])]
    address = fake.base_url.split("//")[1].split("/")[0]
    for text in pages:
        assert SECRET not in text and address not in text and "fake-model" not in text and "PLAY_TEST_KEY" not in text
    assert view["done"] and view["result"]["turns"]  # the verdicts, now that it has ended


def test_requests_are_checked(served) -> None:  # type: ignore[no-untyped-def]
    server, _, _, _ = served
    assert server.call("POST", "/api/join", {"handle": "fay", "consent": False})[0] == 400  # no consent, no player
    assert server.call("POST", "/api/join", {"handle": "<b>", "consent": True})[0] == 400
    token = server.join("fay")
    assert server.call("POST", "/api/join", {"handle": "fay", "consent": True})[0] == 400  # taken
    assert server.call("GET", "/api/p/not-a-token")[0] == 404
    status, body = server.call("POST", f"/api/p/{token}/episodes", raw=b'{"case": "' + b"x" * 100_000 + b'"}')
    assert status == 413 and "KiB" in body["error"]
    status, view = server.call("POST", f"/api/p/{token}/episodes", {"case": "demo4-01"})
    other = server.join("gus")
    assert server.call("GET", f"/api/p/{other}/episodes/{view['id']}")[0] == 404  # not theirs
    assert server.call("POST", f"/api/p/{token}/episodes/{view['id']}/turn", {"message": "x", "meter": 140})[0] == 400


def test_a_dead_endpoint_is_one_line_and_the_conversation_is_kept(served) -> None:  # type: ignore[no-untyped-def]
    server, fake, _, _ = served
    token = server.join("hal")
    _, view = server.call("POST", f"/api/p/{token}/episodes", {"case": "demo4-01"})
    path = f"/api/p/{token}/episodes/{view['id']}"
    fake.state.dead = True
    status, body = server.call("POST", path + "/turn", {"message": "are you there", "meter": 40})
    assert status == 502 and "\n" not in body["error"] and "kept" in body["error"]
    assert "127.0.0.1" not in body["error"] and SECRET not in body["error"]
    status, view = server.call("GET", path)
    assert status == 200 and len(view["messages"]) == 2 and view["your_turn"]  # nothing lost, nothing doubled
    fake.state.dead = False
    status, view = server.call("POST", path + "/turn", {"message": "are you there", "meter": 40})
    assert status == 200 and len(view["messages"]) == 4 and view["error"] is None


def test_deleting_an_episode_removes_every_trace(served) -> None:  # type: ignore[no-untyped-def]
    server, _, _, run = served
    token = server.join("ivy")
    _, view = server.call("POST", f"/api/p/{token}/episodes", {"case": "demo4-01"})
    server.call("POST", f"/api/p/{token}/episodes/{view['id']}/leave", {"message": "bye", "meter": 30})
    key = "subject-a|demo4-01|0|human:ivy"
    assert key in (run / "episodes.jsonl").read_text() and key in (run / "judgements.jsonl").read_text()
    assert server.call("DELETE", f"/api/p/{server.join('jon')}/episodes/{view['id']}")[0] == 404
    assert server.call("DELETE", f"/api/p/{token}/episodes/{view['id']}")[0] == 200
    assert key not in (run / "episodes.jsonl").read_text() and key not in (run / "judgements.jsonl").read_text()
    assert not (run / "play" / "journal" / f"{view['id']}.jsonl").exists()
    assert server.call("GET", f"/api/p/{token}")[0] == 404  # their last episode: the handle goes too
    assert "ivy" not in (run / "play" / "players.jsonl").read_text()
    deadline = time.monotonic() + 60  # scoring runs again after a delete: the episode leaves the scores
    while (run / "scores.parquet").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (run / "scores.parquet").exists()


def test_a_kill_mid_turn_loses_that_turn_only(served) -> None:  # type: ignore[no-untyped-def]
    server, fake, config, run = served
    token = server.join("kim")
    _, view = server.call("POST", f"/api/p/{token}/episodes", {"case": "demo4-01"})
    path = f"/api/p/{token}/episodes/{view['id']}"
    server.call("POST", path + "/turn", {"message": "kept", "meter": 40})
    fake.state.latency_s = 3.0

    def in_flight() -> None:
        with contextlib.suppress(OSError):  # the server dies under it
            server.call("POST", path + "/turn", {"message": "in flight", "meter": 45})

    threading.Thread(target=in_flight, daemon=True).start()
    time.sleep(1.0)
    server.kill()
    fake.state.latency_s = 0.0
    again = PlayServer(config, "user", run)
    try:
        status, view = again.call("GET", path)
        assert status == 200
        said = [m["text"] for m in view["messages"] if m["who"] == "user"]
        assert said[1:] == ["kept"] and view["your_turn"] and view["meter"] == 40
    finally:
        again.stop()
