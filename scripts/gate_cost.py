"""What a gate run costs: a pilot run's accounting scaled to the gate's cases and seeds.

Reads the accounting emobench writes into report.json (calls and tokens per role and model)
and the episodes in scores.parquet, and prints per-episode figures and the totals for a gate
run of --cases x --seeds episodes, plus the most calls the run's protocol allows. A gate
against a published bundle runs the candidate only: the baseline costs nothing.

    python scripts/gate_cost.py runs/<pilot> --cases 30 --seeds 3
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow.parquet as pq


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--cases", type=int, default=30, help="cases in the gated split")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    report = json.loads((args.run_dir / "report.json").read_text())
    config = json.loads((args.run_dir / "manifest.json").read_text()).get("config", {})
    turns = pq.read_table(args.run_dir / "scores.parquet", columns=["n_turns"]).column(0).to_pylist()
    n_eps = len(turns)
    target = args.cases * args.seeds
    print(f"pilot: {n_eps} episodes, {sum(turns) / n_eps:.1f} turns on average "
          f"(max_turns {config.get('max_turns')}); gate run: {target} episodes")
    print("| role:model | calls/episode | prompt tok/episode | completion tok/episode "
          "| gate calls | gate prompt tok | gate completion tok |")
    print("|---|---|---|---|---|---|---|")
    totals = [0.0, 0.0, 0.0]
    for key, acc in sorted(report["accounting"].items()):
        per = [acc["calls"] / n_eps, acc["prompt_tokens"] / n_eps, acc["completion_tokens"] / n_eps]
        for i, v in enumerate(per):
            totals[i] += v * target
        print(f"| {key} | {per[0]:.1f} | {per[1]:,.0f} | {per[2]:,.0f} | {per[0] * target:,.0f} "
              f"| {per[1] * target:,.0f} | {per[2] * target:,.0f} |")
    print(f"| total | | | | {totals[0]:,.0f} | {totals[1]:,.0f} | {totals[2]:,.0f} |")
    judges = len((config.get("panel") or {}).get("judges") or []) or 1
    director = 1 if config.get("director") else 0
    per_turn = 2 + judges + director  # subject, simulator, each judge, an LLM director
    bound = int(config.get("max_turns", 30)) * per_turn + judges + int(config.get("probe", True))
    print(f"at most {bound} calls per episode ({per_turn} per turn, {judges} holistic judgement(s), "
          f"the probe): {bound * target:,} for the gate run, before retries")


if __name__ == "__main__":
    main()
