"""One scores.parquet row per episode: EPM-Q and its indices, success, meter and valence."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from emobench.records import Episode
from emobench.registry import Case
from emobench.scoring.epmq import epmq
from emobench.scoring.schema import SCORES_SCHEMA
from emobench.trackers.lexicon import slope, thirds, valence

FAILURES = ("collapse", "stagnation_regression")
_EPMQ_FIELDS = ("epmq", "outcome", "efficiency", "stability", "rdi", "etot", "snet", "rho", "sproj", "tau", "rpos", "align", "pen")


def score_episode(episode: Episode, case: Case, run_id: str) -> dict[str, Any]:
    judged = [t for t in episode.turns if t.judgement.valid and t.judgement.vector is not None and t.epm is not None]
    row: dict[str, Any] = {
        "run_id": run_id,
        "subject": episode.subject,
        "case_id": episode.case_id,
        "scenario_id": episode.scenario_id,
        "persona_id": episode.persona_id,
        "seed": episode.seed,
        "split": episode.split,
        "category": case.scenario.category,
        "dominant_axis": case.dominant_axis,
        "difficulty": case.difficulty,
        "threshold": case.persona.threshold,
        "p0_norm": case.p0_norm,
        "n_turns": len(episode.turns),
        "n_judged_turns": len(judged),
        "n_invalid_judgements": sum(not v.valid for t in episode.turns for v in t.judgement.verdicts),
        "stop_reason": episode.stop_reason,
        "success": episode.status == "success",
        "turns_to_success": episode.success_turn,
        "failure_type": episode.status if episode.status in FAILURES else None,
        "energy": judged[-1].epm.energy if judged and judged[-1].epm else None,
        "epm_path": [list(episode.p0)] + [list(t.epm.p) for t in judged if t.epm],
        "final_meter": episode.final_meter,
        "empathy": None,
        "humanlikeness": None,
        "persona_adaptation": None,
        "coherence": None,
        "probe_accuracy": None,
        "registry_version": episode.registry_version,
        "config_hash": episode.config_hash,
        "emobench_version": episode.emobench_version,
    }
    if judged:
        vectors = [t.judgement.vector for t in judged if t.judgement.vector is not None]
        q = epmq(episode.p0, vectors, sum(t.judgement.regression_points for t in judged)).as_dict()
        row.update({name: q[name] for name in _EPMQ_FIELDS})
    else:
        # No valid judgement at all: the episode is unscored, never scored as 0.
        row.update({name: None for name in _EPMQ_FIELDS})
    meters = [float(case.persona.meter_start)] + [t.meter for t in episode.turns]
    row["meter_slope"] = slope(meters)
    row["valence_first"], row["valence_last"] = thirds(valence([t.user.message for t in episode.turns]))
    return row


def scores_table(rows: Iterable[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=SCORES_SCHEMA)
