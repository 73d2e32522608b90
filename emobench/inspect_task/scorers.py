"""Scores and metrics of the inspect task, computed by emobench's own scoring code.

Each sample's score is the row `emobench run` writes to scores.parquet for its episode
(scoring/episode_scores.py), reduced to EPM-Q under the config's profile and EMPA's, success,
final meter and the holistic axes. The metrics are the mean over cases with the bootstrap-by-case
interval the leaderboard prints (scoring/stats.py), and Krippendorff's alpha between judges
(scoring/agreement.py) when the panel has two or more.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import TaskState

from emobench.inspect_task.solver import EpisodeSetup, stored_records
from emobench.records import HOLISTIC_DIMENSIONS, Episode, EpisodeJudgement
from emobench.scoring.agreement import holistic_alphas, mdep_alphas
from emobench.scoring.episode_scores import score_episode
from emobench.scoring.stats import bootstrap_case_means

SCORE_KEYS = ("epmq", "epmq_empa", "success", "final_meter", *HOLISTIC_DIMENSIONS)
# The leaderboard's defaults (emobench leaderboard build): 2,000 resamples, seed 0, 95 %.
N_BOOT, BOOT_SEED, CI = 2000, 0, 0.95


def _number(value: Any) -> float:
    """A score value inspect can average; an unscored one (None) is NaN, which inspect leaves out."""
    if value is None:
        return math.nan
    return float(value)


@metric
def case_bootstrap() -> Metric:
    """Mean over cases (each case's seeds averaged first) with the bootstrap-by-case 95 % interval."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        if not scores:  # inspect asks once with none, for the metric's shape
            return dict.fromkeys(("mean", "ci_lo", "ci_hi"), math.nan)
        by_case: dict[str, list[float]] = defaultdict(list)
        for sample in scores:
            by_case[str((sample.sample_metadata or {})["case_id"])].append(float(sample.score.as_float()))
        values = np.array([[float(np.mean(v))] for v in by_case.values()])
        estimate = bootstrap_case_means(values, [np.zeros(len(values), dtype=np.intp)], n_boot=N_BOOT, seed=BOOT_SEED, ci=CI)[0]
        return {"mean": float(estimate.point[0, 0]), "ci_lo": float(estimate.lo[0, 0]), "ci_hi": float(estimate.hi[0, 0])}

    return compute


@metric
def judge_agreement() -> Metric:
    """Krippendorff's alpha between the panel's judges, per MDEP item and holistic dimension
    (the run report's reliability.alpha); no value with fewer than two judges."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        episodes, judgements, judges = [], [], []
        for sample in scores:
            meta = sample.score.metadata or {}
            episodes.append(Episode.model_validate({**meta["episode"], "calls": []}))
            judgements.append(EpisodeJudgement.model_validate({**meta["judgement"], "calls": []}))
            judges = list(meta["judges"])
        if len(judges) < 2:
            return {}
        alphas = {**mdep_alphas(episodes, judges), **holistic_alphas(judgements, judges)}
        return {name: math.nan if value is None else value for name, value in alphas.items()}

    return compute


@scorer(metrics={"*": [case_bootstrap()], "epmq": [case_bootstrap(), judge_agreement()]})
def emobench_scores(setup: EpisodeSetup) -> Scorer:
    async def score(state: TaskState, target: Target) -> Score:
        records = stored_records(dict(state.store.items()))
        if records is None:
            raise RuntimeError("the sample has no finished episode in its store")
        episode, judgement = records
        row = score_episode(episode, setup.cases[episode.case_id], "inspect", judgement,
                            profile=setup.config.scoring_profile)
        return Score(
            value={key: _number(row[key]) for key in SCORE_KEYS},
            answer=episode.turns[-1].reply if episode.turns else "",
            explanation=f"stopped: {episode.stop_reason}; {len(episode.turns)} turn(s)",
            # The verdicts the agreement metric reads; the calls stay in the store alone.
            metadata={"episode": episode.model_dump(mode="json", exclude={"calls"}),
                      "judgement": judgement.model_dump(mode="json", exclude={"calls"}),
                      "judges": [j.label for j in judges] if isinstance(judges := episode.roles["judges"], list) else []},
        )

    return score
