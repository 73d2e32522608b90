"""verl's training data for emobench episodes: one parquet row per case and seed (docs/train.md).

verl's trainer reads its prompts from parquet (RLHFDataset). For emobench a row names an episode:
`extra_info` carries the case id and the seed, `agent_name` routes the row to the emobench agent
loop, and `prompt` is the episode's opening as the policy sees it (the subject system prompt and
the case's first user message), which verl uses for its prompt-length filter and its logs. The
agent loop re-opens the episode from the case id, so the prompt column is never trusted as input.

    python -m emobench.env.verl_data --config configs/verl/emobench_env.yaml --out data/train.parquet

This module needs no verl: it runs in either environment.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from emobench.env.host import load_training_config
from emobench.episode.stepper import opening_move, subject_messages
from emobench.errors import EmobenchError
from emobench.registry import load_registry
from emobench.run.runner import ROOT, load_prompts, select_cases

AGENT_NAME = "emobench"  # the name the agent loop is registered under in verl
DATA_SOURCE = "emobench"


def episode_rows(config_path: Path, root: Path = ROOT) -> list[dict[str, Any]]:
    """A row per selected case x seed of the training config, in the config's order."""
    config, _ = load_training_config(config_path)
    registry = load_registry(root)
    prompts = load_prompts(root, config)
    rows: list[dict[str, Any]] = []
    for case in select_cases(registry, config):
        opening = subject_messages(prompts, [], opening_move(case).message)
        for seed in config.seeds:
            rows.append({
                "data_source": DATA_SOURCE,
                "agent_name": AGENT_NAME,
                "prompt": opening,
                "extra_info": {"index": len(rows), "case_id": case.id, "seed": int(seed), "split": config.split},
            })
    return rows


def write_dataset(config_path: Path, out: Path, root: Path = ROOT) -> int:
    rows = episode_rows(config_path, root)
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(out, index=False)
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emobench.env.verl_data", description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True, help="the emobench training config (split or cases, seeds)")
    parser.add_argument("--out", type=Path, required=True, help="the parquet file to write")
    args = parser.parse_args(argv)
    try:
        count = write_dataset(args.config, args.out)
    except EmobenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"{count} episodes -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
