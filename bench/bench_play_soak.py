"""Soak: `emobench play` with simulated players, random SIGKILLs, deletes, double sends and
malformed bodies against the fake OpenAI server, for minutes; then the run directory is checked.

The players and checks are tests/test_play_soak.py's (its short version runs in the test suite):
every record and judgement validates, every finished episode is judged exactly once, no
acknowledged message or finish is lost, no word of a deleted episode is in any file of the run
directory, and a graceful restart finds nothing to repair. Prints the figures of one run.

    HF_HUB_OFFLINE=1 python bench/bench_play_soak.py [--players 20] [--minutes 5] [--kill-every 10 25]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from _servers import cpu_line, load_line

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState
from tests.test_play_soak import PLAY, Soak


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--players", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--kill-every", type=float, nargs=2, default=(10.0, 25.0), metavar=("MIN_S", "MAX_S"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(cpu_line())
    print(load_line())
    with tempfile.TemporaryDirectory() as tmp, \
            FakeOpenAIServer(FakeState(latency_s=0.02, fault_rate=0.02, fault_kinds=("429", "500"), fault_seed=1)) as fake:
        config = write_config(Path(tmp) / "play.yaml", fake.base_url, max_turns=5, min_turns=4, play=PLAY)
        soak = Soak(config, Path(tmp) / "run")
        started = time.monotonic()
        figures = soak.play(args.players, args.minutes * 60, tuple(args.kill_every), args.seed)
        played = time.monotonic() - started
        notes = soak.settle()
        settled = time.monotonic() - started - played
        found = soak.check()
    print(f"{args.players} players for {played:.0f} s, then {settled:.0f} s to judge what was left and restart")
    print(f"requests {figures.requests} ({figures.retried} resent after a kill), kills {figures.kills}, "
          f"episodes started {figures.started}, finished {figures.finished}, deleted {figures.deleted}")
    print(f"double sends {figures.double_sends}, malformed bodies {figures.malformed}; "
          f"statuses {dict(sorted(figures.statuses.items()))}")
    print(f"run directory: {found['episodes']} episodes recorded and judged once each, {found['journals']} journals; "
          f"lost {found['lost']}, resurrected {found['resurrected']}; repairs on the last restart: {len(notes)}")
    print(figures.summary())  # latencies per kind, and what became of each attacker's requests and sockets
    for problem in [*figures.problems, *soak.lost, *soak.back, *notes]:
        print("PROBLEM:", problem)
    print(load_line())
    sys.exit(1 if figures.problems or soak.lost or soak.back or notes else 0)


if __name__ == "__main__":
    main()
