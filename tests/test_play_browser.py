"""`emobench play` end to end in headless Chromium (Debian's), against the fake OpenAI server.

Each seat: join with consent, pick a case, play three turns (setting the meter as the user),
send a hostile message that must stay text, leave; then the run directory is read by show,
report and leaderboard build like any other. A killed server resumes at the same address.
Screenshots of both seats go to /tmp/emobench-play-*.png.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cdp import Browser, Page
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer
from tests.play_support import PlayServer, emobench
from tests.test_html import chromium  # noqa: F401  (the fixture: skips, or fails in CI, without Chromium)

HOSTILE = ['<img src=x onerror="window.__pwned=1">', "<script>window.__pwned=2</script>"]
LI = "document.querySelectorAll('#conversation li').length"


@pytest.fixture
def browser(tmp_path: Path, chromium: Path) -> Iterator[Browser]:  # noqa: F811
    with Browser(chromium, tmp_path / "profile") as b:
        yield b


def _config(tmp_path: Path, fake: FakeOpenAIServer) -> Path:
    return write_config(tmp_path / "play.yaml", fake.base_url, max_turns=6, min_turns=5)


def join(page: Page, server: PlayServer, handle: str) -> str:
    """The start page: the consent box, a handle; returns the player's token from the address."""
    page.goto(server.url + "/")
    page.type_into("#handle", handle)
    page.click("#join")  # without consent: refused on the page
    assert "consent" in page.wait_for("document.querySelector('#error').textContent")
    page.click("#agree")
    page.click("#join")
    page.wait_for("location.pathname.startsWith('/p/') && document.querySelector('#case')"
                  " && document.querySelector('#case').options.length > 0")
    return str(page.eval("location.pathname.split('/')[2]"))


def send(page: Page, text: str, meter: int | None, expect: int) -> None:
    if meter is not None:
        page.type_into("#meter", str(meter))
    page.type_into("#message", text)
    page.click("#send")
    page.wait_for(f"{LI} >= {expect} && document.querySelector('#busy').classList.contains('hidden')")


def assert_text_only(page: Page) -> None:
    assert page.eval("window.__pwned === undefined")
    assert page.eval("document.querySelectorAll('#conversation img, #conversation script').length") == 0
    shown = page.eval("[...document.querySelectorAll('#conversation li p')].map(p => p.textContent)")
    assert all(h in shown for h in HOSTILE)


def episode_of(run: Path, handle: str) -> dict:
    episodes = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    return next(e for e in episodes if e["human"]["player"] == f"human:{handle}")


def readers_work(run: Path, tmp_path: Path) -> str:
    for args in (["show", str(run), "--no-pager"], ["report", str(run)]):
        done = emobench(*args)
        assert done.returncode == 0, done.stderr
    board = emobench("leaderboard", "build", str(run), "-o", str(tmp_path / "board"))
    assert board.returncode == 0, board.stderr
    return board.stdout


def test_user_seat_in_chromium(tmp_path: Path, fake: FakeOpenAIServer, browser: Browser) -> None:
    run = tmp_path / "people-as-user"
    server = PlayServer(_config(tmp_path, fake), "user", run)
    try:
        page = browser.new_page()
        join(page, server, "ana")
        page.eval("document.querySelector('#case').value = 'demo4-02'")
        page.click("#start")
        page.wait_for(f"{LI} == 2")  # the card's opening and the model's reply to it
        assert "WHO YOU ARE" in page.eval("document.querySelector('#card').textContent")
        assert page.eval("document.querySelector('#result').classList.contains('hidden')")  # no verdict yet
        assert page.eval("document.querySelector('#rating').classList.contains('hidden')")  # nothing to rate yet
        meters = [30, 35, 55]
        for i, (text, meter) in enumerate(zip([HOSTILE[0], HOSTILE[1], "ok, maybe."], meters, strict=True)):
            send(page, text, meter, 4 + 2 * i)
        assert_text_only(page)
        page.screenshot(Path("/tmp/emobench-play-user.png"))
        page.type_into("#meter", "62")
        page.click("#leave")
        # the person rates the model before the judges' verdicts are shown
        page.wait_for("!document.querySelector('#rating').classList.contains('hidden')")
        assert page.eval("document.querySelector('#result').classList.contains('hidden')")
        assert page.eval("document.querySelectorAll('#rating-fields select').length") == 5
        page.eval("document.querySelector('#rating-fields select[data-dimension=empathy]').value = '8'; "
                  "document.querySelector('#rating-fields select[data-dimension=overall]').value = '7'")
        page.click("#rate")
        page.wait_for("!document.querySelector('#result').classList.contains('hidden')")
        assert page.eval("document.querySelector('#rating').classList.contains('hidden')")
        assert page.eval("document.querySelectorAll('#verdicts tbody tr').length") == 4
    finally:
        server.stop()
    ratings = [json.loads(line) for line in (run / "ratings.jsonl").read_text().splitlines()]
    assert ratings[0]["episode"] == "subject-a|demo4-02|0|human:ana"
    assert ratings[0]["ratings"] == {"human:ana": {"empathy": 8, "overall": 7}}
    episode = episode_of(run, "ana")
    assert episode["key"] == "subject-a|demo4-02|0|human:ana"
    assert episode["human"]["seat"] == "user" and episode["roles"]["user"]["label"] == "human:ana"
    assert [t["meter"] for t in episode["turns"][1:]] == meters  # the meter as the person set it
    assert all(t["user"]["human"] and t["user"]["inner"] == "" for t in episode["turns"][1:])
    assert episode["final_meter"] == 62 and episode["stop_reason"] == "user_left"
    assert [t["user"]["message"] for t in episode["turns"][1:3]] == HOSTILE  # stored as written
    assert len(episode["human"]["turn_seconds"]) == 4
    assert "subject-a" in readers_work(run, tmp_path)


def test_supporter_seat_in_chromium(tmp_path: Path, fake: FakeOpenAIServer, browser: Browser) -> None:
    run = tmp_path / "people-as-supporter"
    server = PlayServer(_config(tmp_path, fake), "supporter", run)
    try:
        page = browser.new_page()
        join(page, server, "ben")
        page.click("#any")  # "give me one"
        page.wait_for(f"{LI} == 1")  # the simulated user's opening
        assert page.eval("document.querySelector('#card')") is None  # a supporter sees no card
        for i, text in enumerate([HOSTILE[0], HOSTILE[1], "That sounds like a lot to carry."]):
            send(page, text, None, 3 + 2 * i)
        assert_text_only(page)
        page.screenshot(Path("/tmp/emobench-play-supporter.png"))
        page.click("#leave")
        page.wait_for("!document.querySelector('#result').classList.contains('hidden')")
        # A second person plays the same case through the API: the leaderboard pools them as "people".
        token = server.join("cleo")
        status, view = server.call("POST", f"/api/p/{token}/episodes", {"case": "demo4-01"})
        assert status == 200, view
        status, view = server.call("POST", f"/api/p/{token}/episodes/{view['id']}/turn", {"message": "I hear you."})
        status, view = server.call("POST", f"/api/p/{token}/episodes/{view['id']}/leave", {})
        assert status == 200 and view["done"], view
    finally:
        server.stop()
    episode = episode_of(run, "ben")
    assert episode["subject"] == "human:ben" and episode["human"]["seat"] == "subject"
    assert episode["key"] == "human:ben|demo4-01|0|human:ben" and len(episode["turns"]) == 3
    assert episode["stop_reason"] == "supporter_left"
    assert [t["reply"] for t in episode["turns"][:2]] == HOSTILE
    board = readers_work(run, tmp_path)
    assert "human:ben" in board and "human:cleo" in board and "people" in board


def test_killed_server_resumes_at_the_same_address(tmp_path: Path, fake: FakeOpenAIServer, browser: Browser) -> None:
    run, config = tmp_path / "resumed", _config(tmp_path, fake)
    server = PlayServer(config, "user", run)
    page = browser.new_page()
    try:
        token = join(page, server, "dora")
        page.click("#start")
        page.wait_for(f"{LI} == 2")
        send(page, "first thing I said", 40, 4)
        address = page.eval("location.pathname + location.hash")
    finally:
        server.kill()
    server = PlayServer(config, "user", run)  # same run directory, a new port
    try:
        page.goto(server.url + address)
        page.wait_for(f"{LI} == 4")
        assert "first thing I said" in page.eval("document.querySelector('#conversation').textContent")
        send(page, "after the restart", 45, 6)
        page.click("#leave")
        page.wait_for("!document.querySelector('#rating').classList.contains('hidden')")
        page.click("#rate-skip")  # no rating: the verdicts are shown all the same
        page.wait_for("!document.querySelector('#result').classList.contains('hidden')")
    finally:
        server.stop()
    episode = episode_of(run, "dora")
    assert [t["user"]["message"] for t in episode["turns"][1:]] == ["first thing I said", "after the restart"]
    assert episode["human"]["resumed"] == 1 and token


def test_a_supporters_unsent_reply_is_kept_or_dropped_on_purpose(tmp_path: Path, fake: FakeOpenAIServer,
                                                                  browser: Browser) -> None:
    """"End the conversation" with a reply typed but not sent asks first: Cancel keeps the text to send."""
    run = tmp_path / "unsent"
    server = PlayServer(_config(tmp_path, fake), "supporter", run)
    try:
        page = browser.new_page()
        join(page, server, "uma")
        page.click("#any")
        page.wait_for(f"{LI} == 1")
        page.type_into("#message", "typed, not yet sent")
        page.eval("window.asked = 0; window.confirm = () => { window.asked += 1; return false; }")  # Cancel
        page.click("#leave")
        page.wait_for("window.asked === 1")
        assert page.eval("document.querySelector('#message').value") == "typed, not yet sent"
        assert page.eval("document.querySelector('#result').classList.contains('hidden')")  # not ended
        page.click("#send")
        page.wait_for(f"{LI} >= 3 && document.querySelector('#busy').classList.contains('hidden')")
        page.type_into("#message", "dropped on purpose")
        page.eval("window.confirm = () => true")  # OK: end without it
        page.click("#leave")
        page.wait_for("!document.querySelector('#result').classList.contains('hidden')")
    finally:
        server.stop()
    episode = episode_of(run, "uma")
    assert [t["reply"] for t in episode["turns"]] == ["typed, not yet sent"]
    assert episode["stop_reason"] == "supporter_left"
