"""EMPA's recorded runs as numbers: one row per (model, case), no transcript or card text.

Each result file goes through the importer (read_case, build_case, to_episode) and the normal
scorer, once under the `empa` profile (EMPA's EPM-Q and its nine indices) and once under the
`emobench` profile (`epmq`). EMPA's own per-case numbers (descriptive_statistics.csv) are kept
beside ours as `epmq_empa_published`; a case whose replay differs from them by more than
`TOLERANCE` stops the build, so a published `epmq_empa` is always EMPA's own value.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emobench.errors import InputError
from emobench.importers.cards import build_case
from emobench.importers.empa import to_episode
from emobench.importers.empa_format import read_case, read_metadata, result_folders
from emobench.profiles import load_profile
from emobench.registry.hashing import registry_version
from emobench.scoring.episode_scores import score_episode
from emobench.scoring.epmq import INDEX_NAMES

TOLERANCE = 1e-6
# EMPA's per-case statistics: index name -> its column.
PUBLISHED_COLUMNS = {name: f"Idx_{name.capitalize()}" for name in INDEX_NAMES} | {"rdi": "Idx_RDI"}
SLICE_ATTRIBUTES = ("dominant_axis", "difficulty", "category", "threshold")


@dataclass(frozen=True)
class EmpaRows:
    rows: list[dict[str, Any]]  # one per (model, case); numbers and slice labels only
    quirks: dict[str, int]  # the importer's counts of EMPA's recording quirks
    largest_difference: float  # max |ours - EMPA's| over every per-case EPM-Q


def published_epmq(row: dict[str, str], where: Path) -> float:
    """EMPA's per-case EPM-Q from its nine published indices and the `empa` profile's weights."""
    w = load_profile("empa").indices.weights
    try:
        idx = {name: float(row[column]) for name, column in PUBLISHED_COLUMNS.items()}
    except (KeyError, TypeError, ValueError):
        missing = next(c for c in PUBLISHED_COLUMNS.values() if not _is_number(row.get(c)))
        raise InputError(where, missing, f"missing or not a number for {row.get('Case_ID')}") from None
    outcome = (idx["rdi"] + idx["etot"] + idx["snet"]) / 3
    efficiency = (idx["rho"] + idx["sproj"] + idx["tau"]) / 3
    stability = (idx["rpos"] + idx["align"] + idx["pen"]) / 3
    return w.outcome * outcome + w.efficiency * efficiency + w.stability * stability


def _label(value: str | None) -> str | None:
    return (value or "").strip().lower().replace(" ", "_") or None


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def read_empa_rows(results: Path) -> EmpaRows:
    """Score every recorded episode under both profiles; check EMPA's EPM-Q is reproduced."""
    rows: list[dict[str, Any]] = []
    quirks: Counter[str] = Counter()
    largest = 0.0
    for folder in result_folders(results):
        statistics = read_metadata(folder)
        stats_file = folder / "descriptive_statistics.csv"
        for path in sorted(folder.glob("script_*_result.json")):
            empa = read_case(path, folder.name)
            if empa.script_id not in statistics:
                raise InputError(stats_file, "Case_ID", f"no row for {empa.script_id}")
            card = build_case(empa, statistics[empa.script_id])
            version = registry_version([(card.id, card.content_hash)])
            lost_before = quirks["lost_judgements"]
            episode = to_episode(empa, card, version, "external", quirks)
            ours = score_episode(episode, card, "external", profile="emobench")
            theirs_scored = score_episode(episode, card, "external", profile="empa")
            published = published_epmq(statistics[empa.script_id], stats_file)
            if ours["epmq_empa"] is None or abs(ours["epmq_empa"] - published) > TOLERANCE:
                raise InputError(path, "epj", f"EPM-Q replayed as {ours['epmq_empa']}, EMPA published "
                                 f"{published:.6f}: this release does not reproduce")
            largest = max(largest, abs(ours["epmq_empa"] - published))
            rows.append({
                "subject": folder.name,
                "case_id": card.id,
                "seed": 0,
                **{name: ours[name] for name in SLICE_ATTRIBUTES},
                # EMPA's own label; `difficulty` is emobench's band of the P0 norm (docs/method.md).
                "difficulty_empa": _label(statistics[empa.script_id].get("Difficulty", "")),
                "p0_c": card.p0[0],
                "p0_a": card.p0[1],
                "p0_p": card.p0[2],
                "n_turns": len(episode.turns),
                "lost_judgements": quirks["lost_judgements"] - lost_before,
                "stop_reason": episode.stop_reason,
                "success": bool(ours["success"]),
                "epmq_empa": ours["epmq_empa"],
                "epmq_empa_published": published,
                "epmq": ours["epmq"],
                **{f"idx_{name}": theirs_scored[name] for name in INDEX_NAMES},
            })
    return EmpaRows(rows, {k: int(v) for k, v in sorted(quirks.items())}, largest)
