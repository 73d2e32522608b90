"""One scores.parquet row per episode: EPM-Q and its indices, success, meter, affect tracker
(per-turn valence and emotions), holistic rubric, persona probe and audit count."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from emobench.profiles import DEFAULT_PROFILE, load_profile
from emobench.records import HOLISTIC_DIMENSIONS, Episode, EpisodeJudgement, mean_scores
from emobench.registry import Case
from emobench.scoring.epmq import epmq
from emobench.scoring.probe import probe_scores
from emobench.scoring.schema import SCORES_SCHEMA
from emobench.trackers.affect import AffectReading, AffectTracker
from emobench.trackers.epm import FAILURES
from emobench.trackers.languages import tracker_absence
from emobench.trackers.trajectory import slope, valence_trajectory

_EPMQ_FIELDS = (
    "epmq",
    "outcome",
    "efficiency",
    "stability",
    "rdi",
    "etot",
    "snet",
    "rho",
    "sproj",
    "tau",
    "rpos",
    "align",
    "pen",
)


def score_episode(
    episode: Episode,
    case: Case,
    run_id: str,
    judgement: EpisodeJudgement | None = None,
    tracker: AffectTracker | None = None,
    profile: str = DEFAULT_PROFILE,
    readings: list[AffectReading] | None = None,
) -> dict[str, Any]:
    """The row for one episode; pass the replayed episode when a rescore changed its turns.

    EPM-Q is scored under the run's profile, and once more under `empa` for `epmq_empa`. Without
    a tracker the affect columns are null (the runner always passes one); on a case in a language
    the trackers do not read they are null too, and trackers_absent says so by name. `readings`:
    the tracker's readings of the user's messages when read already (finalize reads a run's
    episodes in worker processes, emobench/trackers/pool.py)."""
    judged = [t for t in episode.turns if t.judgement.valid and t.judgement.vector is not None and t.epm is not None]
    holistic = mean_scores(judgement.holistic) if judgement else dict.fromkeys(HOLISTIC_DIMENSIONS)
    probe = probe_scores(episode.probe, case.persona)
    messages = [t.user.message for t in episode.turns]
    absent = tracker_absence(case.language)
    if tracker is None or absent is not None:
        readings = None
    elif readings is None:
        readings = tracker.read(messages)
    row: dict[str, Any] = {
        "run_id": run_id,
        "subject": episode.subject,
        "case_id": episode.case_id,
        "scenario_id": episode.scenario_id,
        "persona_id": episode.persona_id,
        "seed": episode.seed,
        "split": episode.split,
        "language": case.language,
        "category": case.scenario.category,
        "dominant_axis": case.dominant_axis,
        "difficulty": case.difficulty,
        "threshold": case.persona.threshold,
        "valence": case.valence,
        "p0_norm": case.p0_norm,
        "n_turns": len(episode.turns),
        "n_judged_turns": len(judged),
        "n_invalid_judgements": sum(not v.valid for t in episode.turns for v in t.judgement.verdicts),
        "stop_reason": episode.stop_reason,
        # No valid judgement at all: success is unknown (null), like EPM-Q, never a failure.
        "success": episode.status == "success" if judged else None,
        "turns_to_success": episode.success_turn,
        "failure_type": episode.status if episode.status in FAILURES else None,
        "energy": judged[-1].epm.energy if judged and judged[-1].epm else None,
        "epm_path": [list(episode.p0)] + [list(t.epm.p) for t in judged if t.epm],
        "final_meter": episode.final_meter,
        **holistic,
        "probe_accuracy": probe["accuracy"],
        "probe_need_correct": probe["need_correct"],
        **_affect_columns(readings, tracker.version if tracker else None),
        "trackers_absent": absent,
        "audit_flags": len(judgement.audit) if judgement else None,
        "panel": judgement.panel if judgement else None,
        "registry_version": episode.registry_version,
        "config_hash": episode.config_hash,
        "emobench_version": episode.emobench_version,
        "scoring_profile": profile,
    }
    if judged:
        vectors = [t.judgement.vector for t in judged if t.judgement.vector is not None]
        regression = sum(sum(t.judgement.regression.values()) for t in judged)
        progress = sum(sum(t.judgement.progress.values()) for t in judged)

        def scored(name: str) -> dict[str, float]:
            # Rho divides E by every turn; an unjudged turn is not scored, only counted there.
            return epmq(
                episode.p0,
                vectors,
                net_levels=progress - regression,
                regression_levels=regression,
                n_turns=len(episode.turns),
                profile=load_profile(name),
            ).as_dict()

        q = scored(profile)
        row.update({name: q[name] for name in _EPMQ_FIELDS})
        row["epmq_empa"] = q["epmq"] if profile == "empa" else scored("empa")["epmq"]
    else:
        # No valid judgement at all: the episode is unscored, never scored as 0.
        row.update(dict.fromkeys((*_EPMQ_FIELDS, "epmq_empa")))
    meters = [float(case.persona.meter_start)] + [t.meter for t in episode.turns]
    row["meter_slope"] = slope(meters)
    return row


def _affect_columns(readings: list[AffectReading] | None, version: str | None) -> dict[str, Any]:
    if readings is None:
        names = ("valence_first", "valence_last", "valence_slope", "valence_path", "closing_turns")
        return {**dict.fromkeys(names), "emotion_first": None, "emotion_last": None, "emotion_path": None,
                "tracker_version": None}
    values = [r.valence for r in readings]
    trajectory = valence_trajectory(values, [r.closing for r in readings])
    path = [r.label for r in readings]
    return {
        "valence_first": trajectory.first,
        "valence_last": trajectory.last,
        "valence_slope": trajectory.slope,
        "valence_path": values,
        "closing_turns": trajectory.closing_turns,
        "emotion_first": path[0] if path else None,
        "emotion_last": path[-1] if path else None,
        "emotion_path": path,
        "tracker_version": version,
    }


def scores_table(rows: Iterable[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=SCORES_SCHEMA)
