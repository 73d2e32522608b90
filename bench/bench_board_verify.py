"""Benchmark: `emobench verify` of a 1,000-episode submission (target: under 30 s).

The run is real: the runner plays 2 subjects x the test split's 30 cases x 17 seeds (1,020
episodes, 12 turns, two judges) against the loopback fake server, once, into --work; then
`emobench submit` packages it and verify is timed (the registry's load included, as the CLI does).

    python bench/bench_board_verify.py [--work /tmp/board-bench] [--turns 12]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TARGET_S = 30.0


def make_run(work: Path, turns: int) -> Path:
    import yaml

    from tests.fake_openai import FakeOpenAIServer, FakeState
    from tests.gate_support import emobench

    run = work / "runs" / "bench"
    if (run / "scores.parquet").exists():
        return run
    with FakeOpenAIServer(FakeState()) as server:
        def role(model: str, label: str) -> dict[str, str]:
            return {"binding": f"openai:{model}@{server.base_url}", "label": label}
        config = {"subjects": [role("subject-model", "subject-0"), role("subject-model-1", "subject-1")],
                  "user": role("user-model", "user"), "judges": [role(f"judge-model-{i}", f"judge-{i}") for i in (0, 1)],
                  "split": "test", "seeds": list(range(17)), "max_turns": turns, "min_turns": turns, "concurrency": 64}
        (work / "bench.yaml").write_text(yaml.safe_dump(config))
        code, _, err = emobench("run", "--config", str(work / "bench.yaml"), "--out", str(work / "runs"),
                                "--run-id", "bench", "--no-progress")
        if code:
            sys.exit(err)
    return run


def _cpu() -> str:
    names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
             if line.startswith("model name")] if Path("/proc/cpuinfo").exists() else []
    return f"{names[0]} x {len(names)}" if names else platform.processor()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, default=Path("/tmp/board-bench"))
    parser.add_argument("--turns", type=int, default=12)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    run = make_run(args.work, args.turns)
    print(f"run ready in {time.perf_counter() - start:.0f} s")
    protocol = args.work / "protocol.yaml"
    protocol.write_text(f"version: 1\nsplit: test\nseeds: {list(range(17))}\nmax_turns: {args.turns}\n"
                        f"min_turns: {args.turns}\nscoring_profile: emobench\nmin_judges: 2\n")
    sub = args.work / "submission"
    if not sub.exists():
        from emobench.board.package import submit

        submit(run, sub, 1, {"model_name": "bench", "provider": "loopback", "date": "2026-12-01"})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "emobench", "verify", str(sub), "--protocol", str(protocol)],
                         env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    episodes = sum(1 for _ in open(sub / "episodes.jsonl", "rb"))
    print(res.stdout.strip() or res.stderr.strip()[-2000:])
    print(f"verify: {episodes} episodes, {(sub / 'episodes.jsonl').stat().st_size / 1e6:.0f} MB, {wall:.1f} s wall "
          f"(the whole CLI process), target {TARGET_S:.0f} s: {wall / TARGET_S:.2f} of it; {_cpu()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(_pairwise_share(sub))
    sys.exit(0 if res.returncode == 0 and wall < TARGET_S else 1)


def _pairwise_share(sub: Path) -> str:
    """The pairwise check's time (verdicts from their calls, the run's leaderboard rebuilt) as a
    share of `verify --integrity-only` on the same submission, both in this process."""
    from emobench.board.pairwise_check import check_pairwise
    from emobench.board.protocol import load_protocol
    from emobench.board.verify import _read, verify
    from emobench.registry import load_registry
    from emobench.run.runner import ROOT as LIBRARY

    registry, protocol = load_registry(LIBRARY), load_protocol(LIBRARY / "configs" / "board.yaml")
    start = time.perf_counter()
    verify(sub, protocol, registry, integrity_only=True)
    whole = time.perf_counter() - start
    read = _read(sub, [])
    assert read is not None
    manifest, episodes, _, _, config = read
    start = time.perf_counter()
    check_pairwise(sub, config, episodes, {j["model"] for j in manifest["roles"]["judges"]}, protocol.tolerance)
    part = time.perf_counter() - start
    verdicts = sum(1 for _ in open(sub / "pairwise.jsonl", "rb"))
    return (f"pairwise check: {verdicts} verdicts and the run's leaderboard, {part:.2f} s of verify --integrity-only's "
            f"{whole:.2f} s in one process ({part / whole:.1%})")


if __name__ == "__main__":
    main()
