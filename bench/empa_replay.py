"""Replay EMPA's recorded runs through emobench's import and `empa` profile, and compare.

For every model folder and case, the importer turns the result file into an episode and the
normal scorer scores it; the stop (turn and reason) and the nine indices are compared with
EMPA's own per-case statistics, and each model's overall EPM-Q with the mean of EMPA's per-case
numbers and with its published summary (2 decimals).

    python bench/empa_replay.py PATH/TO/EMPA/results/benchmark_runs/epm-bench
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter
from pathlib import Path

from emobench.external.empa_cases import PUBLISHED_COLUMNS, published_epmq
from emobench.importers.cards import build_case
from emobench.importers.empa import to_episode
from emobench.importers.empa_format import read_case, read_metadata, result_folders
from emobench.registry.hashing import registry_version
from emobench.scoring.episode_scores import score_episode

COLUMNS = PUBLISHED_COLUMNS


def _published_summary(results: Path) -> dict[str, float]:
    path = results / "analysis_figures" / "01_tables" / "epmq_summary.csv"
    if not path.exists():
        return {}
    with path.open(encoding="utf-8-sig", newline="") as fh:
        return {row["Model"]: float(row["EPM-Q Score"]) for row in csv.DictReader(fh)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="EMPA's results folder (MODEL/script_*_result.json)")
    args = parser.parse_args()
    summary = sorted(_published_summary(args.results).values(), reverse=True)
    print(
        f"{'model':28} {'n':>3} {'stops':>6} {'EPM-Q empa':>11} {'EMPA':>11} {'|diff|':>8} "
        f"{'max idx diff':>12} {'success':>8} {'EPM-Q emobench':>14}"
    )
    totals: Counter[str] = Counter()
    worst = 0.0
    models = []
    for folder in result_folders(args.results):
        rows = read_metadata(folder)
        ours, theirs, ours_emobench, successes, stops, idx_diff = [], [], [], 0, 0, 0.0
        for path in sorted(folder.glob("script_*_result.json")):
            empa = read_case(path, folder.name)
            card = build_case(empa, rows[empa.script_id])
            quirks: Counter[str] = Counter()
            version = registry_version([(card.id, card.content_hash)])
            episode = to_episode(empa, card, version, "replay", quirks)
            row = rows[empa.script_id]
            scored = score_episode(episode, card, "replay", profile="empa")
            stops += quirks["stops_agreeing"] and len(episode.turns) == int(float(row["Turns"]))
            successes += bool(scored["success"])
            idx_diff = max(idx_diff, *(abs(scored[n] - float(row[c])) for n, c in COLUMNS.items()))
            ours.append(scored["epmq"])
            theirs.append(published_epmq(row, folder / "descriptive_statistics.csv"))
            ours_emobench.append(score_episode(episode, card, "replay", profile="emobench")["epmq"])
            totals.update(quirks)
        n = len(ours)
        mean_ours, mean_theirs = sum(ours) / n, sum(theirs) / n
        worst = max(worst, idx_diff, abs(mean_ours - mean_theirs))
        totals["cases"] += n
        totals["stops_exact"] += stops
        models.append((mean_ours, folder.name, n, stops, mean_theirs, idx_diff, successes / n, sum(ours_emobench) / n))
    for mean_ours, name, n, stops, mean_theirs, idx_diff, success, emobench_q in sorted(models, reverse=True):
        print(
            f"{name:28} {n:3d} {stops:3d}/{n:<2d} {mean_ours:11.6f} {mean_theirs:11.6f} "
            f"{abs(mean_ours - mean_theirs):8.1e} {idx_diff:12.1e} {success:8.1%} {emobench_q:14.2f}"
        )
    if summary:
        off = max(abs(round(m[0], 2) - s) for m, s in zip(sorted(models, reverse=True), summary, strict=True))
        print(f"published summary (2 decimals): largest difference after rounding ours {off:.2f}")
    print(
        f"stops (turn and reason) {totals['stops_exact']}/{totals['cases']}; largest difference, any per-case "
        f"index or model EPM-Q: {worst:.1e}"
    )
    print("EMPA quirks:", {k: v for k, v in sorted(totals.items()) if k not in ("cases", "stops_exact")})


if __name__ == "__main__":
    main()
