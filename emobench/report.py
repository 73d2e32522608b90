"""After a run: scores.parquet, report.json (accounting, invalid judgements, faults)."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from emobench.records import Episode
from emobench.registry import Registry
from emobench.rundir import RunDir
from emobench.scoring.episode_scores import score_episode, scores_table


def accounting(episodes: list[Episode]) -> dict[str, Any]:
    """Tokens per role and model, and latency percentiles, over every call of the run."""
    tokens: dict[str, Counter[str]] = defaultdict(Counter)
    latencies: dict[str, list[float]] = defaultdict(list)
    for episode in episodes:
        for call in episode.calls:
            key = f"{call.role}:{call.model}"
            tokens[key]["calls"] += 1
            tokens[key]["prompt_tokens"] += call.prompt_tokens
            tokens[key]["completion_tokens"] += call.completion_tokens
            tokens[key]["cached_calls"] += int(call.cached)
            if not call.cached:
                latencies[key].append(call.latency_s)
    out: dict[str, Any] = {}
    for key, counts in sorted(tokens.items()):
        lat = np.asarray(latencies[key]) if latencies[key] else None
        out[key] = {
            **counts,
            "latency_s": None if lat is None else {f"p{q}": float(np.percentile(lat, q)) for q in (50, 90, 99)},
        }
    return out


def invalid_judgements(episodes: list[Episode]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for episode in episodes:
        for turn in episode.turns:
            for verdict in turn.judgement.verdicts:
                counts[verdict.judge] += int(not verdict.valid)
    return dict(counts)


def finalize_run(rd: RunDir, registry: Registry, faults: dict[str, int] | None = None) -> list[Episode]:
    """Score every episode in the run directory and write scores.parquet and report.json."""
    episodes = rd.read_episodes()
    run_id = rd.path.name
    rows = [score_episode(ep, registry.case(ep.case_id), run_id) for ep in episodes]
    pq.write_table(scores_table(rows), rd.scores)
    stops = Counter(ep.stop_reason for ep in episodes)
    # Faults accumulate over every process that worked on this run (a resume adds its own).
    all_faults = Counter(rd.read_report().get("faults", {}))
    all_faults.update(faults or {})
    report = {
        "run_id": run_id,
        "episodes": len(episodes),
        "stop_reasons": dict(stops),
        "invalid_judgements": invalid_judgements(episodes),
        "unscored_episodes": sum(r["epmq"] is None for r in rows),
        "faults": dict(all_faults),
        "accounting": accounting(episodes),
    }
    rd.write_json(rd.report, report)
    return episodes
