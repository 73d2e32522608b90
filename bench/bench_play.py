"""Benchmark: `emobench play` — page load, per-turn overhead beyond the model calls, what a kill loses.

One run, one server process per part, the fake OpenAI server from tests/ behind it:
- page load: headless Chromium (Debian's) loads a player's page to its load event and its list;
- per-turn latency in the user seat, T turns at zero model delay (all harness: HTTP, stepper,
  journal fsync, judging's parsing) and T turns with every model call delayed D seconds; a user
  turn makes two sequential calls (subject, then one judge), so its model time is 2·D;
- a SIGKILL while a turn is in flight: the turns kept, the turn lost.

    HF_HUB_OFFLINE=1 python bench/bench_play.py [--turns 20] [--delay 0.25]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from _servers import cpu_line, load_line

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.cdp import Browser
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState
from tests.play_support import PlayServer


def turn_times(server: PlayServer, token: str, turns: int) -> list[float]:
    _, view = server.call("POST", f"/api/p/{token}/episodes", {"case": "demo4-01"})
    path = f"/api/p/{token}/episodes/{view['id']}/turn"
    times = []
    for i in range(turns):
        started = time.perf_counter()
        status, view = server.call("POST", path, {"message": f"turn {i}", "meter": 50})
        times.append(time.perf_counter() - started)
        assert status == 200 and not view["done"], view
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--delay", type=float, default=0.25)
    args = parser.parse_args()
    print(cpu_line())
    print(load_line())
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(FakeState()) as fake:
        root = Path(tmp)
        config = write_config(root / "play.yaml", fake.base_url, max_turns=args.turns + 5, min_turns=args.turns + 5)
        server = PlayServer(config, "user", root / "run", "--player-per-minute", "100000")  # timing, not the limits
        try:
            token = server.join("bench")
            with Browser(Path("/usr/bin/chromium"), root / "profile") as browser:
                page = browser.new_page()
                page.goto(server.url + "/")  # warm the browser
                loads = []
                for _ in range(5):
                    started = time.perf_counter()
                    page.goto(f"{server.url}/p/{token}")
                    page.wait_for("document.querySelector('#case').options.length > 0")
                    loads.append(time.perf_counter() - started)
            print(f"page load to a filled case list: median {statistics.median(loads) * 1000:.0f} ms (5 loads)")

            fast = turn_times(server, token, args.turns)
            fake.state.latency_s = args.delay
            slow = turn_times(server, token, args.turns)
            fake.state.latency_s = 0.0
        finally:
            server.stop()
        model = 2 * args.delay
        over0, over1 = statistics.median(fast), statistics.median(slow) - model
        print(f"per turn, zero model delay: median {over0 * 1000:.0f} ms (harness only), "
              f"p90 {statistics.quantiles(fast, n=10)[-1] * 1000:.0f} ms")
        print(f"per turn, {args.delay:.2f} s per model call (2 calls, {model:.2f} s): median "
              f"{statistics.median(slow) * 1000:.0f} ms; beyond the model calls {over1 * 1000:.0f} ms "
              f"= {over1 / model:.2f} x the model time")

        run = root / "kill"
        server = PlayServer(config, "user", run)
        token = server.join("killed")
        _, view = server.call("POST", f"/api/p/{token}/episodes", {"case": "demo4-01"})
        path = f"/api/p/{token}/episodes/{view['id']}"
        for i in range(3):
            server.call("POST", path + "/turn", {"message": f"kept {i}", "meter": 50})
        fake.state.latency_s = 2.0
        threading.Thread(target=lambda: _quiet(server, path), daemon=True).start()
        time.sleep(1.0)
        server.kill()
        fake.state.latency_s = 0.0
        journal = next((run / "play" / "journal").glob("*.jsonl"))
        again = PlayServer(config, "user", run)
        try:
            started = time.perf_counter()
            _, view = again.call("GET", path)
            rebuilt = time.perf_counter() - started
        finally:
            again.stop()
        said = [m["text"] for m in view["messages"] if m["who"] == "user"][1:]
        print(f"kill -9 during turn 5 (4 turns done): {len(said) + 1} turns kept, lost: the message in flight "
              f"({'in flight' not in said}); journal {journal.stat().st_size} bytes; rebuilt in {rebuilt * 1000:.0f} ms")


def _quiet(server: PlayServer, path: str) -> None:
    try:
        server.call("POST", path + "/turn", {"message": "in flight", "meter": 50})
    except OSError:
        pass


if __name__ == "__main__":
    main()
