"""`emobench play`, second hardening round (issue 40): one greedy client, many handles from one
address, replays of deleted words and of errors, slow and idle sockets, the HTTP layer's own 400s,
locks for unknown ids, a kill during rescoring, temporary files of a reused PID.

The servers run in this process (tests/play_support.LocalPlay), the clients come from several
loopback addresses (127.0.0.2, .3, …: one per simulated machine). Each guard is tried by a small
generator of attack variants; `catch` records, per class, what was sent and what was refused,
and the test prints it (pytest -s) for the soak's report.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import random
import re
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder
from tests.play_support import LocalPlay, closed, greedy, hostile

CASE = "demo4-01"
OPEN = {"player_per_minute": 100_000, "server_per_minute": 100_000, "anonymous_per_minute": 100_000}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeState()) as server:
        yield server


@pytest.fixture
def idle(fake: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    """The module's fake server, as every test expects to find it and leaves it."""
    fake.state.dead, fake.state.latency_s, fake.state.responder = False, 0.0, default_responder
    yield fake
    fake.state.dead, fake.state.latency_s, fake.state.responder = False, 0.0, default_responder


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory, fake: FakeOpenAIServer) -> Path:
    subject = {"binding": f"openai:fake-model@{fake.base_url}", "label": "subject-a", "retries": 0}  # a dead one fails at once
    return write_config(tmp_path_factory.mktemp("cfg") / "play.yaml", fake.base_url, max_turns=8, min_turns=7,
                        subjects=[subject])


@pytest.fixture(scope="module")
def shared(config: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlay]:
    """One server with no request or per-address limits, for the tests that do not count them."""
    server = LocalPlay(config, "user", tmp_path_factory.mktemp("shared") / "run", handles_per_address=1000,
                       open_per_address=1000, **OPEN)
    yield server
    server.stop()


def report(name: str, rows: dict[str, tuple[int, int]]) -> None:
    """Per attack class: (sent, refused or caught). Printed for the closing note."""
    print(f"\n{name}: " + ", ".join(f"{k} {caught}/{sent}" for k, (sent, caught) in rows.items()))


# --- 1. one client must not lock everyone out ------------------------------------------------

def test_one_greedy_client_locks_out_no_other_player_and_no_newcomer(config: Path, tmp_path: Path, idle: Any) -> None:
    server = LocalPlay(config, "user", tmp_path / "run", player_per_minute=10, anonymous_per_minute=10,
                       server_per_minute=80)
    try:
        greedy_token = server.join("greedy", source="127.0.0.2")
        honest = server.join("honest", source="127.0.0.3")
        rows: dict[str, list[int]] = {}
        honest_codes = []
        for kind, method, path, body in greedy(random.Random(1), greedy_token, 30):
            status, _ = server.call(method, path, body, source="127.0.0.2")
            rows.setdefault(kind, []).append(status)
        for _ in range(5):  # the other player, from another machine, still plays
            honest_codes.append(server.call("GET", f"/api/p/{honest}", source="127.0.0.3")[0])
        newcomer = server.call("POST", "/api/join", {"handle": "newcomer", "consent": True}, source="127.0.0.4")[0]
    finally:
        server.stop()
    report("greedy client, refused/sent", {k: (len(v), v.count(429)) for k, v in rows.items()})
    assert honest_codes == [200] * 5 and newcomer == 200
    own = rows["own link"] + rows["own unknown episode"]
    assert own.count(429) >= len(own) - 10  # the player's own 10 a minute, then refused
    anonymous = rows["unknown link"] + rows["unknown link turn"] + rows["join"]
    assert sum(code != 429 for code in anonymous) <= 10  # 10 a minute from this address without a link


# --- 2. many handles from one address --------------------------------------------------------

def test_twenty_handles_from_one_address_do_not_fill_the_server(config: Path, tmp_path: Path, idle: Any) -> None:
    server = LocalPlay(config, "user", tmp_path / "run", open_total=4, handles_per_address=2, open_per_address=3, **OPEN)
    try:
        joined, started = 0, 0
        for n in range(20):
            status, data = server.call("POST", "/api/join", {"handle": f"h{n}", "consent": True}, source="127.0.0.2")
            if status != 200:
                continue
            joined += 1
            for _ in range(3):
                started += server.call("POST", f"/api/p/{data['token']}/episodes", {"case": CASE},
                                       source="127.0.0.2")[0] == 200
        honest = server.join("honest", source="127.0.0.3")
        status, view = server.call("POST", f"/api/p/{honest}/episodes", {"case": CASE}, source="127.0.0.3")
    finally:
        server.stop()
    assert status == 200, view
    assert joined == 2 and started == 3, (joined, started)


# --- 3. replays: deleted words and errors ----------------------------------------------------

def _episode(server: LocalPlay, token: str, key: str | None = None) -> tuple[str, str]:
    headers = {"Idempotency-Key": key} if key else {}
    status, view = server.call("POST", f"/api/p/{token}/episodes", {"case": CASE}, headers=headers)
    assert status == 200, view
    return view["id"], f"/api/p/{token}/episodes/{view['id']}"


def test_a_delete_forgets_every_replay_of_its_episode(shared: LocalPlay, idle: Any) -> None:
    """Variants: a turn's key, a leave's key, with the player kept or forgotten; and the start's key."""
    server, caught = shared, {}
    for variant in ("turn, player kept", "turn, player forgotten", "leave, player kept", "start, player kept"):
        handle = f"r{secrets.token_hex(3)}"
        token = server.join(handle)
        words = f"{handle} says something only the deleted episode holds"
        episode, path = _episode(server, token, key=f"start-{handle}")
        if "kept" in variant:
            _episode(server, token)  # another episode: the player stays
        action = "leave" if variant.startswith("leave") else "turn"
        key = {"Idempotency-Key": f"{action}-{handle}"}
        assert server.call("POST", f"{path}/{action}", {"message": words, "meter": 40}, headers=key)[0] == 200
        assert server.call("DELETE", path)[0] == 200
        if variant.startswith("start"):
            status, view = server.call("POST", f"/api/p/{token}/episodes", {"case": CASE},
                                       headers={"Idempotency-Key": f"start-{handle}"})
            held = status == 200 and view["id"] != episode  # the key is forgotten: a new episode (docs/play.md)
        else:
            status, headers, body = server.exchange("POST", f"{path}/{action}", {"message": words, "meter": 40},
                                                    headers=key)
            held = status in (404, 410) and words.encode() not in body and "Idempotent-Replayed" not in headers
        caught[variant] = (1, int(held))
    report("replays after a delete, forgotten/tried", caught)
    assert all(c == 1 for _, c in caught.values()), caught


def test_an_error_is_not_replayed_so_a_corrected_retry_plays(shared: LocalPlay, idle: FakeOpenAIServer) -> None:
    server, caught = shared, {}
    token = server.join(f"e{secrets.token_hex(3)}")
    # a start that names no case here (400), then the right one under the same key
    status, _ = server.call("POST", f"/api/p/{token}/episodes", {"case": "nowhere"}, headers={"Idempotency-Key": "s-1"})
    retry, view = server.call("POST", f"/api/p/{token}/episodes", {"case": CASE}, headers={"Idempotency-Key": "s-1"})
    caught["400 start"] = (1, int(status == 400 and retry == 200 and "id" in view))
    path = f"/api/p/{token}/episodes/{view['id']}"
    # a turn without its meter (400), then with it
    status, _ = server.call("POST", path + "/turn", {"message": "first try"}, headers={"Idempotency-Key": "t-1"})
    retry, view = server.call("POST", path + "/turn", {"message": "first try", "meter": 40}, headers={"Idempotency-Key": "t-1"})
    caught["400 turn"] = (1, int(status == 400 and retry == 200 and len(view["messages"]) == 4))
    # the model is down (502: the subject is not retried here), then back
    idle.state.dead = True
    status, _ = server.call("POST", path + "/turn", {"message": "second try", "meter": 40}, headers={"Idempotency-Key": "t-2"})
    idle.state.dead = False
    retry, view = server.call("POST", path + "/turn", {"message": "second try", "meter": 40}, headers={"Idempotency-Key": "t-2"})
    caught["502 turn"] = (1, int(status == 502 and retry == 200 and len(view["messages"]) == 6))
    again, headers, _ = server.exchange("POST", path + "/turn", {"message": "second try", "meter": 40},
                                        headers={"Idempotency-Key": "t-2"})
    report("errors, retried and played/tried", caught)
    assert all(c == 1 for _, c in caught.values()), caught
    assert again == 200 and headers.get("Idempotent-Replayed") == "true"  # a success is still replayed


# --- 4. slow and idle sockets ------------------------------------------------------------------

def test_slow_and_idle_sockets_are_closed_and_the_cap_is_one_line(config: Path, tmp_path: Path, idle: Any,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """Four kinds from four machines fill the overall cap (24); a fifth floods past its address's cap (8);
    a player still gets in, and every hostile socket is closed within a few header deadlines."""
    server = LocalPlay(config, "user", tmp_path / "run", header_timeout_s=0.3, body_timeout_s=0.3,
                       connections_per_address=8, max_connections=24, **OPEN)
    port = int(server.url.rsplit(":", 1)[1])
    kinds = ("idle", "request line", "headers", "body", "flood")
    sockets: dict[str, list[socket.socket]] = {}
    try:
        with caplog.at_level(logging.WARNING, logger="emobench.play"):
            for n, kind in enumerate(kinds):  # each kind from a machine of its own
                sockets[kind] = [hostile(kind, f"127.0.0.{10 + n}", port) for _ in range(20 if kind == "flood" else 6)]
            honest = server.join("honest", source="127.0.0.3")  # during the attack
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and not all(closed(s) for group in sockets.values() for s in group):
                for sock in sockets["headers"] + sockets["body"]:  # a byte every 50 ms
                    try:
                        sock.send(b"a")
                    except OSError:
                        pass
                time.sleep(0.05)
            status = server.call("GET", f"/api/p/{honest}", source="127.0.0.3")[0]
    finally:
        for group in sockets.values():
            for sock in group:
                sock.close()
        server.stop()
    caught = {kind: (len(group), sum(closed(s) for s in group)) for kind, group in sockets.items()}
    report("hostile sockets, closed/opened", caught)
    assert status == 200 and honest
    assert all(c == n for n, c in caught.values()), caught
    notes = [r for r in caplog.records if "connection" in r.getMessage()]  # evictions and refusals: one line a minute
    assert len(notes) == 1 and notes[0].exc_info is None and "\n" not in notes[0].getMessage()
    assert "Traceback" not in caplog.text


def test_running_out_of_descriptors_pauses_accepting_in_one_line_and_loses_no_connection(
        caplog: pytest.LogCaptureFixture) -> None:
    """With no descriptor left, accept() fails: the listener says so once and waits; the clients who
    connected meanwhile are served once descriptors are free again."""
    import asyncio
    import resource

    from aiohttp import web

    from emobench.config import PlayConfig
    from emobench.play.doors import PlayRunner, descriptors_in_use
    from emobench.play.listener import GuardedSite

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="served")

    async def fetch(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> bytes:
        await loop.sock_sendall(sock, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := await loop.sock_recv(sock, 4096):
            answer += chunk
        return answer

    async def main() -> list[bytes]:
        app = web.Application()
        app.router.add_get("/", hello)
        runner = PlayRunner(app, PlayConfig())
        await runner.setup()
        site = GuardedSite(runner, "127.0.0.1", 0)
        await site.start()
        loop = asyncio.get_running_loop()
        clients = [socket.socket() for _ in range(20)]  # made before the limit leaves no descriptor
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors_in_use(), hard))
        try:
            for sock in clients:
                sock.setblocking(False)
                sock.connect_ex(("127.0.0.1", site.sockets[0].getsockname()[1]))
            await asyncio.sleep(0.3)
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        try:
            return await asyncio.wait_for(asyncio.gather(*(fetch(loop, sock) for sock in clients)), 10)
        finally:
            for sock in clients:
                sock.close()
            await runner.cleanup()

    with caplog.at_level(logging.WARNING):
        answers = asyncio.run(main())
    assert all(a.startswith(b"HTTP/1.1 200") and a.endswith(b"served") for a in answers), answers[:2]
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1 and "Too many open files" in notes[0], notes
    assert "Traceback" not in caplog.text


# --- 7. no lock for an unknown id; 8. the HTTP layer's own 400s --------------------------------

def test_unknown_episode_ids_make_no_locks(shared: LocalPlay, idle: Any) -> None:
    server = shared
    token = server.join(f"l{secrets.token_hex(3)}")
    episode, path = _episode(server, token)
    _episode(server, token)  # another one: the player stays, and their link reaches the episodes
    assert server.call("DELETE", path)[0] == 200
    before = len(server.hub.locks)
    codes = set()
    for n in range(150):
        unknown = secrets.token_hex(8) if n % 3 else f"zz{n}"
        codes.add(server.call("GET", f"/api/p/{token}/episodes/{unknown}")[0])
        if n % 10 == 0:
            codes.add(server.call("POST", f"/api/p/{token}/episodes/{unknown}/turn", {"message": "x", "meter": 5})[0])
    codes.add(server.call("GET", path)[0])
    assert codes <= {404, 410} and len(server.hub.locks) == before and episode not in server.hub.locks


GARBAGE = [
    b"GARBAGE\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nno colon here\r\n\r\n",
    b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(32) + b"\r\n\r\n",  # TLS to a plain port
    b"GET / HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n",
]


def test_the_http_layers_own_400_carries_the_headers_and_no_version(shared: LocalPlay) -> None:
    port = int(shared.url.rsplit(":", 1)[1])
    caught = {}
    for n, raw in enumerate(GARBAGE):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(raw)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        head = answer.split(b"\r\n\r\n")[0].decode("latin-1")
        ok = (re.match(r"HTTP/1\.[01] 4\d\d ", head) is not None and "Content-Security-Policy: default-src 'none'" in head
              and "X-Content-Type-Options: nosniff" in head and "Server: emobench-play" in head
              and "Python/" not in head and "aiohttp" not in head)
        caught[f"variant {n}"] = (1, int(ok))
    report("malformed HTTP, answered as ours/sent", caught)
    assert all(c == 1 for _, c in caught.values()), caught


# --- 5. a kill during rescoring; 6. a temporary file of a reused PID -------------------------

@pytest.mark.soak  # three episodes judged and scored, and a restart: seconds, not a quick test
def test_a_kill_during_rescoring_and_a_reused_pid_are_repaired_at_start_up(config: Path, tmp_path: Path,
                                                                            idle: Any) -> None:
    from emobench.play.recovery import catch_up

    run = tmp_path / "run"
    server = LocalPlay(config, "user", run, **OPEN)
    try:
        token = server.join("ri")
        reports = []
        for _ in range(3):
            _, path = _episode(server, token)
            assert server.call("POST", path + "/leave", {"message": "ri goes", "meter": 30})[0] == 200
            server.run(server.hub.store.settle)
            reports.append((run / "report.json").read_bytes())
    finally:
        server.stop()
    assert [json.loads(r)["episodes"] for r in reports] == [1, 2, 3]
    (run / "report.json").write_bytes(reports[1])  # killed while rescoring: 3 records, 3 judgements, report of 2
    mine = run / f".judgements.jsonl.tmp-{os.getpid()}"  # the PID is alive again (a container's PID 1)
    mine.write_text("ghost words of a deleted episode\n")
    held = run / ".episodes.jsonl.tmp-1"
    with open(held, "wb") as writing:  # a rewrite in progress elsewhere: its writer holds the lock
        fcntl.flock(writing.fileno(), fcntl.LOCK_EX)
        again = LocalPlay(config, "user", run, **OPEN)
        try:
            again.run(lambda: catch_up(again.hub, again.said.append))
            again.run(again.hub.store.settle)
        finally:
            again.stop()
        assert held.exists()
    assert not mine.exists() and any(mine.name in line and "removed" in line for line in again.said), again.said
    assert json.loads((run / "report.json").read_text())["episodes"] == 3


# --- 9. the judges' response cache --------------------------------------------------------------

def quoting(body: dict[str, Any]) -> str:
    """Judges that quote the conversation in their evidence, as real ones do: the end of
    the (last) conversation, which the task follows."""
    answer = default_responder(body)
    if "holistic_verdict" in json.dumps(body.get("response_format") or {}):
        data = json.loads(answer)
        for dim in data.values():
            dim["evidence"] = body["messages"][-1]["content"].rsplit("CONVERSATION>>>", 1)[0][-300:]
        answer = json.dumps(data)
    return answer


@pytest.mark.soak  # an episode judged by the server, then by a panel: seconds
def test_judging_a_play_run_again_keeps_no_copy_outside_it(config: Path, fake: FakeOpenAIServer, tmp_path: Path,
                                                            idle: FakeOpenAIServer) -> None:
    import asyncio

    from emobench.endpoints.cache import ResponseCache
    from emobench.run.rescore import rescore

    run, words = tmp_path / "run", "words only this person wrote, quoted by the judges"
    idle.state.responder = quoting
    server = LocalPlay(config, "user", run, **OPEN)
    try:
        token = server.join("qu")
        _, path = _episode(server, token)
        assert server.call("POST", path + "/leave", {"message": words, "meter": 30})[0] == 200
    finally:
        server.stop()
    assert words in (run / "judgements.jsonl").read_text()  # the judges did quote them
    panel = tmp_path / "panel.yaml"
    panel.write_text(json.dumps({"name": "again", "judges": [{"binding": f"openai:fake-model@{fake.base_url}",
                                                              "label": "judge-z"}]}))
    outside = tmp_path / "user-cache" / "responses.sqlite"  # where `emobench judge` keeps its cache by default
    asyncio.run(rescore(run, panel, cache=ResponseCache(outside)))
    assert words in (run / "panels" / "again" / "judgements.jsonl").read_text()
    assert not outside.exists()  # not even an empty cache file (`emobench judge --cache-dir DIR`)


def test_a_key_the_endpoint_refuses_is_a_502_and_one_line(shared: LocalPlay, idle: FakeOpenAIServer,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    """The operator's key is revoked mid-study: the person sees one line and can send again; no 500, no traceback."""
    server = shared
    token = server.join(f"k{secrets.token_hex(3)}")
    _, path = _episode(server, token)
    idle.state.key = "a-key-the-server-does-not-send"
    try:
        with caplog.at_level(logging.WARNING):
            status, body = server.call("POST", path + "/turn", {"message": "are you there", "meter": 40})
            left, view = server.call("POST", path + "/leave", {"message": "bye then", "meter": 40})
    finally:
        idle.state.key = None
    assert status == 502 and "send again" in body["error"] and "127.0.0.1" not in body["error"]
    assert left == 200 and view["done"] and "judges did not answer" in (view["error"] or "")  # the episode is kept
    assert not any(r.exc_info for r in caplog.records) and "Traceback" not in caplog.text
    assert any("401" in r.getMessage() for r in caplog.records)  # the operator is told why, once per call
