"""`emobench play` under careless and hostile players, over HTTP: each problem of the audit
reproduced against a real server process and the fake OpenAI server, now answered properly.

Overlapping requests come from threads (two clients on one episode); kills are SIGKILL.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, default_responder
from tests.play_support import PlayServer, emobench

# Hostile players and kills of the play server, each against a server of its own: the soak tier.
pytestmark = pytest.mark.soak

CASE = "demo4-01"


def _kind(body: dict[str, Any]) -> str:
    return str((body.get("response_format") or {}).get("json_schema", {}).get("name", "text"))


def slow(kind: str, seconds: float) -> Callable[[dict[str, Any]], str]:
    """The default answers, one kind of call delayed (the fake serves each request in its own thread)."""

    def respond(body: dict[str, Any]) -> str:
        if _kind(body) == kind:
            time.sleep(seconds)
        return default_responder(body)

    return respond


def quoting(body: dict[str, Any]) -> str:
    """Judges that quote the conversation in their evidence and reasons, as real ones do: the end of
    the (last) conversation, which the task follows."""
    answer = default_responder(body)
    if _kind(body) in ("holistic_verdict", "pairwise_verdict"):
        data = json.loads(answer)
        quote = body["messages"][-1]["content"].rsplit("CONVERSATION>>>", 1)[0][-600:]
        for dim in data.values():
            dim["evidence" if "evidence" in dim else "reason"] = quote
        answer = json.dumps(data)
    return answer


def files_holding(run: Path, words: list[str]) -> list[str]:
    """Every file of the run directory in which any of the words appears, as written or JSON-escaped."""
    forms = {w.encode() for w in words} | {json.dumps(w)[1:-1].encode() for w in words}
    return sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file() and any(f in p.read_bytes() for f in forms))


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(call()), daemon=True)
    thread.start()
    return thread, out


def quietly(call: Callable[[], Any]) -> Any:
    """A request the test kills the server under."""
    with contextlib.suppress(OSError):
        return call()
    return None


@pytest.fixture
def config(tmp_path: Path, fake: FakeOpenAIServer) -> Path:
    return write_config(tmp_path / "play.yaml", fake.base_url, max_turns=8, min_turns=7)


@pytest.fixture
def user_server(config: Path, tmp_path: Path) -> Iterator[PlayServer]:
    server = PlayServer(config, "user", tmp_path / "run", "--open-per-player", "2", "--player-per-minute", "40")
    yield server
    server.stop()


def test_1_a_delete_during_a_turn_stays_deleted(user_server: PlayServer, fake: FakeOpenAIServer, config: Path,
                                                 tmp_path: Path) -> None:
    """Turn A running, DELETE, then a queued turn C (a second client): the delete wins, nothing comes back."""
    server, run = user_server, tmp_path / "run"
    token = server.join("ada")
    _, view = server.call("POST", f"/api/p/{token}/episodes", {"case": CASE})
    path = f"/api/p/{token}/episodes/{view['id']}"
    assert server.call("POST", path + "/turn", {"message": "the first thing ada wrote", "meter": 40})[0] == 200
    fake.state.latency_s = 1.5
    turn_a, a = in_thread(lambda: server.call("POST", path + "/turn", {"message": "ada's words in flight", "meter": 45}))
    time.sleep(0.5)
    delete, d = in_thread(lambda: server.call("DELETE", path))
    time.sleep(0.2)
    turn_c, c = in_thread(lambda: server.call("POST", path + "/turn", {"message": "ada from the other tab", "meter": 50}))
    for thread in (turn_a, delete, turn_c):
        thread.join(60)
    fake.state.latency_s = 0.0
    assert d[0][0] == 200 and d[0][1]["player_forgotten"]
    assert a[0][0] == 410 and c[0][0] in (404, 410), (a, c)  # C finds the player gone with their last episode
    assert server.call("GET", path)[0] in (404, 410)
    words = ["the first thing ada wrote", "ada's words in flight", "ada from the other tab", "human:ada"]
    assert files_holding(run, words) == [] and '"ada"' not in (run / "play" / "players.jsonl").read_text()
    assert not list((run / "play" / "journal").iterdir())
    server.kill()
    again = PlayServer(config, "user", run)  # the server starts on what the delete left
    again.stop()
    assert files_holding(run, words) == []


def test_1_two_clients_on_one_episode_play_one_turn_each(user_server: PlayServer, fake: FakeOpenAIServer,
                                                         tmp_path: Path) -> None:
    server = user_server
    token = server.join("bo")
    _, view = server.call("POST", f"/api/p/{token}/episodes", {"case": CASE})
    path = f"/api/p/{token}/episodes/{view['id']}"
    fake.state.latency_s = 0.5
    first, one = in_thread(lambda: server.call("POST", path + "/turn", {"message": "from tab one", "meter": 40}))
    second, two = in_thread(lambda: server.call("POST", path + "/turn", {"message": "from tab two", "meter": 42}))
    first.join(60), second.join(60)
    fake.state.latency_s = 0.0
    assert one[0][0] == 200 and two[0][0] == 200
    _, view = server.call("GET", path)
    said = [m["text"] for m in view["messages"] if m["who"] == "user"][1:]
    assert sorted(said) == ["from tab one", "from tab two"] and len(view["messages"]) == 6  # serialised, none lost
    turns = [line for line in lines(tmp_path / "run" / "play" / "journal" / f"{view['id']}.jsonl") if line["kind"] == "turn"]
    assert [t["index"] for t in turns] == [1, 2, 3]


def test_2_a_lone_surrogate_is_refused_and_the_episode_goes_on(user_server: PlayServer) -> None:
    server = user_server
    token = server.join("cy")
    _, view = server.call("POST", f"/api/p/{token}/episodes", {"case": CASE})
    path = f"/api/p/{token}/episodes/{view['id']}"
    status, body = server.call("POST", path + "/turn", raw=b'{"message": "hi \\ud800", "meter": 40}')
    assert status == 400 and "JSON" in body["error"]
    status, view = server.call("POST", path + "/turn", {"message": "plain words", "meter": 40})
    assert status == 200 and len(view["messages"]) == 4 and view["error"] is None
    status, headers, raw = server.exchange("POST", path + "/turn", raw=b"[" * 30_000 + b"]" * 30_000)
    assert status == 400 and "Content-Security-Policy" in headers and b"Traceback" not in raw
    status, _, raw = server.exchange("POST", path + "/turn", raw=b'{"message": {"deep": ["x"]}, "meter": 40}')
    assert status == 400 and b"nests" in raw


def test_2_a_supporter_leaving_with_a_surrogate_then_properly(config: Path, tmp_path: Path) -> None:
    run = tmp_path / "sup"
    server = PlayServer(config, "supporter", run)
    try:
        token = server.join("di")
        _, view = server.call("POST", f"/api/p/{token}/episodes", {"case": CASE})
        path = f"/api/p/{token}/episodes/{view['id']}"
        assert server.call("POST", path + "/turn", {"message": "I am listening."})[0] == 200
        assert server.call("POST", path + "/leave", raw=b'{"message": "\\udfff"}')[0] == 400
        # Problem 5: typed but not sent, then "End the conversation": kept, not dropped.
        status, body = server.call("POST", path + "/leave", {"message": "a reply not yet sent"})
        assert status == 409 and "not sent" in body["error"]
        assert not server.call("GET", path)[1]["done"]
        status, view = server.call("POST", path + "/leave", {"message": ""})
        assert status == 200 and view["done"]
    finally:
        server.stop()
    (episode,) = lines(run / "episodes.jsonl")
    assert episode["stop_reason"] == "supporter_left" and [t["reply"] for t in episode["turns"]] == ["I am listening."]


def test_3_killed_between_record_and_judgement(config: Path, fake: FakeOpenAIServer, tmp_path: Path) -> None:
    """The record is written, the judges are slow, the server dies: the next start judges it, once."""
    run = tmp_path / "run"
    server = PlayServer(config, "user", run)
    token = server.join("eli")
    _, view = server.call("POST", f"/api/p/{token}/episodes", {"case": CASE})
    path = f"/api/p/{token}/episodes/{view['id']}"
    fake.state.responder = slow("holistic_verdict", 30)
    leaving, _ = in_thread(lambda: quietly(lambda: server.call("POST", path + "/leave", {"message": "bye", "meter": 30})))
    deadline = time.monotonic() + 30
    while not (run / "episodes.jsonl").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)
    server.kill()
    fake.state.responder = default_responder
    assert len(lines(run / "episodes.jsonl")) == 1 and lines(run / "judgements.jsonl") == []
    again = PlayServer(config, "user", run)  # nobody opens the episode: the background judges it
    try:
        deadline = time.monotonic() + 90
        while not (run / "report.json").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        again.stop()
    assert [j["key"] for j in lines(run / "judgements.jsonl")] == ["subject-a|demo4-01|0|human:eli"]
    report = json.loads((run / "report.json").read_text())
    scores = pd.read_parquet(run / "scores.parquet")
    assert report["episodes"] == 1 and report["unscored_episodes"] == int(scores["epmq"].isna().sum())
    built = emobench("leaderboard", "build", str(run), "-o", str(tmp_path / "board"))
    assert built.returncode == 0, built.stderr
    leaving.join(5)


def test_4_a_failed_opening_survives_a_restart_with_a_retry(config: Path, fake: FakeOpenAIServer, tmp_path: Path) -> None:
    run = tmp_path / "run"
    server = PlayServer(config, "user", run)
    token = server.join("fay")
    fake.state.dead = True
    status, view = server.call("POST", f"/api/p/{token}/episodes", {"case": CASE})
    assert status == 200 and view["error"] and "send again" in view["error"] and len(view["messages"]) == 0
    server.kill()
    fake.state.dead = False
    again = PlayServer(config, "user", run)
    try:
        path = f"/api/p/{token}/episodes/{view['id']}"
        status, view = again.call("GET", path)
        assert status == 200 and not view["your_turn"] and "send again" in view["error"]  # the page enables Send
        status, view = again.call("POST", path + "/turn", {"message": "", "meter": 50})
        assert status == 200 and len(view["messages"]) == 2 and view["your_turn"] and view["error"] is None
    finally:
        again.stop()


def test_6_quotas_and_idempotency(user_server: PlayServer, fake: FakeOpenAIServer, config: Path, tmp_path: Path) -> None:
    server, run = user_server, tmp_path / "run"
    token = server.join("gil")
    key = {"Idempotency-Key": "start-1"}
    status, first = server.call("POST", f"/api/p/{token}/episodes", {"case": CASE}, headers=key)
    status_again, again = server.call("POST", f"/api/p/{token}/episodes", {"case": CASE}, headers=key)
    assert status == status_again == 200 and first["id"] == again["id"]  # one episode, not two
    path = f"/api/p/{token}/episodes/{first['id']}"
    fake.state.latency_s = 0.5
    send = {"message": "sent twice by a double click", "meter": 40}
    threads = [in_thread(lambda: server.call("POST", path + "/turn", send, headers={"Idempotency-Key": "turn-1"}))
               for _ in range(2)]
    for thread, _ in threads:
        thread.join(60)
    fake.state.latency_s = 0.0
    (one, two) = [out[0] for _, out in threads]
    assert one[0] == two[0] == 200 and one[1]["messages"] == two[1]["messages"]
    journal = run / "play" / "journal" / f"{first['id']}.jsonl"
    assert sum(line["kind"] == "turn" for line in lines(journal)) == 2  # the opening and one turn, not two
    assert server.call("POST", f"/api/p/{token}/episodes", {"case": CASE})[0] == 200
    status, body = server.call("POST", f"/api/p/{token}/episodes", {"case": CASE})
    assert status == 429 and "open-per-player" in body["error"]  # two unfinished episodes is this server's limit
    server.kill()
    restarted = PlayServer(config, "user", run)
    try:  # a replay after a restart: recognised from the journal, nothing played again
        status, view = restarted.call("POST", path + "/turn", send, headers={"Idempotency-Key": "turn-1"})
        assert status == 200 and len(view["messages"]) == 4
        assert sum(line["kind"] == "turn" for line in lines(journal)) == 2
        codes = [restarted.call("GET", f"/api/p/{token}")[0] for _ in range(70)]
        assert codes.count(429) > 0 and codes[0] == 200  # the default 60 a minute per player
        status, body = restarted.call("GET", f"/api/p/{token}")
        assert status == 429 and "player-per-minute" in body["error"]
    finally:
        restarted.stop()


def test_7_other_sites_and_host_names_are_refused(user_server: PlayServer, config: Path, tmp_path: Path) -> None:
    server = user_server
    foreign = {"Origin": "http://evil.example", "Content-Type": "text/plain"}
    status, _ = server.call("POST", "/api/join", {"handle": "hal", "consent": True}, headers=foreign)
    assert status == 403
    status, _ = server.call("POST", "/api/join", {"handle": "hal", "consent": True}, headers={"Origin": "http://evil.example"})
    assert status == 403
    status, _ = server.call("POST", "/api/join", {"handle": "hal", "consent": True}, headers={"Content-Type": "text/plain"})
    assert status == 415
    status, headers, _ = server.exchange("GET", "/", headers={"Host": "rebound.example:8765"})
    assert status == 421 and "Content-Security-Policy" in headers
    same = server.url.replace("localhost", "127.0.0.1")
    assert server.call("POST", "/api/join", {"handle": "hal", "consent": True}, headers={"Origin": same})[0] == 200
    assert server.call("POST", "/api/join", {"handle": "ike", "consent": True})[0] == 200  # no Origin: not a page
    status, headers, _ = server.exchange("GET", "/")
    assert status == 200 and headers["Server"] == "emobench-play"
    status, headers, _ = server.exchange("GET", "/nowhere")
    assert status == 404 and "Content-Security-Policy" in headers and headers["Server"] == "emobench-play"
    proxied = PlayServer(config, "user", tmp_path / "proxied", "--allow-origin", "https://play.example.org")
    try:
        allowed = {"Origin": "https://play.example.org", "Host": "play.example.org"}
        assert proxied.call("POST", "/api/join", {"handle": "jo", "consent": True}, headers=allowed)[0] == 200
    finally:
        proxied.stop()


def test_8_a_delete_reaches_every_file_and_the_handle(config: Path, fake: FakeOpenAIServer, tmp_path: Path) -> None:
    """Judges that quote the person, a report.html, two players: one deletes, nothing of theirs stays."""
    run = tmp_path / "run"
    fake.state.responder = quoting
    server = PlayServer(config, "user", run)
    try:
        words = ["kim's quite particular sentence", "kim leaves now"]
        keep = server.join("lee")
        _, other = server.call("POST", f"/api/p/{keep}/episodes", {"case": CASE})
        server.call("POST", f"/api/p/{keep}/episodes/{other['id']}/leave", {"message": "lee stays", "meter": 30})
        token = server.join("kim")
        _, view = server.call("POST", f"/api/p/{token}/episodes", {"case": CASE})
        path = f"/api/p/{token}/episodes/{view['id']}"
        server.call("POST", path + "/turn", {"message": words[0], "meter": 44})
        assert server.call("POST", path + "/leave", {"message": words[1], "meter": 20})[0] == 200
        reported = emobench("report", str(run))
        assert reported.returncode == 0, reported.stderr
        assert {"episodes.jsonl", "judgements.jsonl", "report.html"} <= set(files_holding(run, [*words, "human:kim"]))
        assert '"kim"' in (run / "play" / "players.jsonl").read_text()
        status, body = server.call("DELETE", path)
        assert status == 200 and body["player_forgotten"]
        assert files_holding(run, [*words, "human:kim"]) == [] and '"kim"' not in (run / "play" / "players.jsonl").read_text()
        assert server.call("GET", f"/api/p/{token}")[0] == 404  # the link is gone with the handle
        assert "lee stays" in (run / "episodes.jsonl").read_text()  # the other player's episode is untouched
    finally:
        server.stop()
        fake.state.responder = default_responder


def test_8_ended_but_unwritten_is_completed_at_start_up(config: Path, fake: FakeOpenAIServer, tmp_path: Path) -> None:
    """The person left; the server died during the closing probe: the next start writes and judges it."""
    run = tmp_path / "run"
    server = PlayServer(config, "user", run)
    token = server.join("mo")
    _, view = server.call("POST", f"/api/p/{token}/episodes", {"case": CASE})
    fake.state.responder = slow("persona_probe", 30)
    in_thread(lambda: quietly(lambda: server.call("POST", f"/api/p/{token}/episodes/{view['id']}/leave",
                                                  {"message": "bye", "meter": 30})))
    journal = run / "play" / "journal" / f"{view['id']}.jsonl"
    deadline = time.monotonic() + 30
    while not any(line["kind"] == "stop" for line in lines(journal)) and time.monotonic() < deadline:
        time.sleep(0.1)
    server.kill()
    fake.state.responder = default_responder
    assert not (run / "episodes.jsonl").exists()
    again = PlayServer(config, "user", run)
    try:
        deadline = time.monotonic() + 90
        while not lines(run / "judgements.jsonl") and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        again.stop()
    assert [e["stop_reason"] for e in lines(run / "episodes.jsonl")] == ["user_left"]
    assert len(lines(run / "judgements.jsonl")) == 1


def test_1_the_server_starts_on_what_crashes_and_undone_deletes_left(config: Path, tmp_path: Path) -> None:
    """A journal with no head (what an undone delete left), a torn and a corrupt tail, a person's record
    without a journal, an interrupted rewrite, a delete cut short: each repaired and named at start-up."""
    run = tmp_path / "run"
    server = PlayServer(config, "user", run)
    try:
        ann, bob = server.join("ann"), server.join("bob")
        _, done = server.call("POST", f"/api/p/{ann}/episodes", {"case": CASE})
        server.call("POST", f"/api/p/{ann}/episodes/{done['id']}/leave", {"message": "ann's goodbye", "meter": 50})
        _, torn = server.call("POST", f"/api/p/{ann}/episodes", {"case": CASE})
        server.call("POST", f"/api/p/{ann}/episodes/{torn['id']}/turn", {"message": "ann keeps this", "meter": 50})
        _, gone = server.call("POST", f"/api/p/{bob}/episodes", {"case": CASE})
        server.call("POST", f"/api/p/{bob}/episodes/{gone['id']}/turn", {"message": "bob deleted this", "meter": 50})
        _, kept = server.call("POST", f"/api/p/{bob}/episodes", {"case": CASE})
    finally:
        server.kill()
    journals = run / "play" / "journal"
    # The cut-short delete's journal is read first, before bob's other episode: bob must keep his handle.
    first = "0000000000000001"
    text = (journals / f"{gone['id']}.jsonl").read_text().replace(gone["id"], first)
    (journals / f"{gone['id']}.jsonl").unlink()
    (journals / f"{first}.jsonl").write_text(text)
    gone["id"] = first
    with open(journals / f"{torn['id']}.jsonl", "ab") as fh:
        fh.write(b'{"kind": "turn", "index": 3, "hum')  # torn by the kill
    turn = next(line for line in (journals / f"{torn['id']}.jsonl").read_text().splitlines() if '"turn"' in line)
    (journals / "00000000000000aa.jsonl").write_text(turn.replace("ann keeps this", "ghost words") + "\n")
    record = json.loads((run / "episodes.jsonl").read_text().splitlines()[0])
    record["key"] = record["key"].replace("human:ann", "human:ghost")
    record["turns"][-1]["user"]["message"] = "ghost words"
    with open(run / "episodes.jsonl", "a") as fh:
        fh.write(json.dumps(record) + "\n")
    (run / ".judgements.jsonl.tmp-999999").write_text("ghost words\n")
    with open(run / "play" / "deleted.jsonl", "a") as fh:  # the delete was cut short after its tombstone
        fh.write(json.dumps({"episode_id": gone["id"], "at": "x"}) + "\n")
    again = PlayServer(config, "user", run)
    try:
        notes = "".join(again.startup)
        assert notes.count("repaired") == 5, notes
        for name in (f"{torn['id']}.jsonl", "00000000000000aa.jsonl", "human:ghost", ".judgements.jsonl.tmp-999999",
                     f"{gone['id']}.jsonl"):
            assert name in notes
        status, view = again.call("GET", f"/api/p/{ann}/episodes/{torn['id']}")
        assert status == 200 and "ann keeps this" in json.dumps(view) and view["your_turn"]
        assert again.call("GET", f"/api/p/{bob}/episodes/{gone['id']}")[0] == 410
        assert [e["id"] for e in again.call("GET", f"/api/p/{bob}")[1]["episodes"]] == [kept["id"]]
    finally:
        again.stop()
    assert files_holding(run, ["ghost words", "bob deleted this", "human:ghost"]) == []
    assert "ann's goodbye" in (run / "episodes.jsonl").read_text()


def test_8_a_delete_reaches_the_pairwise_files_of_a_panel(config: Path, fake: FakeOpenAIServer, tmp_path: Path) -> None:
    """Two supporters on one case and seed, compared pairwise by `emobench judge --panel`; one deletes."""
    run = tmp_path / "people"
    fake.state.responder = quoting
    server = PlayServer(config, "supporter", run)
    try:
        ids = {}
        for handle in ("pam", "quinn"):
            token = server.join(handle)
            _, view = server.call("POST", f"/api/p/{token}/episodes", {"case": CASE})
            path = f"/api/p/{token}/episodes/{view['id']}"
            assert server.call("POST", path + "/turn", {"message": f"{handle} answers in {handle}'s own words"})[0] == 200
            assert server.call("POST", path + "/leave", {"message": ""})[0] == 200
            ids[handle] = (token, view["id"])
        panel = tmp_path / "pair.yaml"
        panel.write_text(json.dumps({"name": "pair", "judges": [
            {"binding": f"openai:fake-model@{fake.base_url}", "label": "judge-x"}]}))
        judged = emobench("judge", str(run), "--panel", str(panel), "--no-cache")
        assert judged.returncode == 0, judged.stderr
        pair = run / "panels" / "pair"
        words = ["quinn answers in quinn's own words", "human:quinn"]
        assert {"panels/pair/pairwise.jsonl", "panels/pair/pairwise_calls.jsonl", "panels/pair/judgements.jsonl"} <= set(
            files_holding(run, words))
        token, episode = ids["quinn"]
        assert server.call("DELETE", f"/api/p/{token}/episodes/{episode}")[0] == 200
        assert files_holding(run, words) == []
        assert lines(pair / "pairwise.jsonl") == [] and lines(pair / "pairwise_calls.jsonl") == []
        assert [j["key"] for j in lines(pair / "judgements.jsonl")] == ["human:pam|demo4-01|0|human:pam"]
        again = emobench("judge", str(run), "--panel", str(panel), "--no-cache")  # the panel's scores, anew
        assert again.returncode == 0, again.stderr
        assert len(pd.read_parquet(pair / "scores.parquet")) == 1
    finally:
        server.stop()
        fake.state.responder = default_responder
