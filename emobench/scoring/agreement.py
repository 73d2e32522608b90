"""Judge reliability for a run (docs/method.md §5.7): Krippendorff's alpha per MDEP item and rubric
dimension, the pairwise position-flip rate, and Spearman(judge Empathy, EPM energy)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from emobench.records import HOLISTIC_DIMENSIONS, Episode, EpisodeJudgement
from emobench.scoring.mdep import AXES
from emobench.scoring.reliability import krippendorff_alpha, position_flip_rate, spearman


def _alpha(matrix: np.ndarray) -> float | None:
    value = krippendorff_alpha(matrix, level="ordinal") if matrix.size else math.nan
    return None if math.isnan(value) else round(float(value), 4)


def mdep_alphas(episodes: Sequence[Episode], judges: Sequence[str]) -> dict[str, float | None]:
    """Units are (episode, turn); an invalid verdict is a missing rating, not a zero."""
    index = {name: i for i, name in enumerate(judges)}
    turns = [turn for episode in episodes for turn in episode.turns]
    out: dict[str, float | None] = {}
    for axis in AXES:
        for kind in ("progress", "regression"):
            matrix = np.full((len(judges), len(turns)), np.nan)
            for unit, turn in enumerate(turns):
                for verdict in turn.judgement.verdicts:
                    if verdict.valid and verdict.axes and verdict.judge in index:
                        matrix[index[verdict.judge], unit] = getattr(verdict.axes[axis], kind)
            out[f"mdep.{axis}.{kind}"] = _alpha(matrix)
    return out


def holistic_alphas(judgements: Sequence[EpisodeJudgement], judges: Sequence[str]) -> dict[str, float | None]:
    index = {name: i for i, name in enumerate(judges)}
    out: dict[str, float | None] = {}
    for dim in HOLISTIC_DIMENSIONS:
        matrix = np.full((len(judges), len(judgements)), np.nan)
        for unit, judgement in enumerate(judgements):
            for verdict in judgement.holistic:
                if verdict.valid and verdict.scores and verdict.judge in index:
                    matrix[index[verdict.judge], unit] = verdict.scores[dim].score
        out[f"holistic.{dim}"] = _alpha(matrix)
    return out


def reliability(
    episodes: Sequence[Episode],
    judgements: Sequence[EpisodeJudgement],
    judges: Sequence[str],
    scores: pd.DataFrame,
    pairwise: pd.DataFrame | None,
) -> dict[str, Any]:
    flip = position_flip_rate(pairwise) if pairwise is not None and len(pairwise) else math.nan
    rho, p = spearman(scores["empathy"].to_numpy(dtype=float), scores["energy"].to_numpy(dtype=float))
    return {
        "alpha": {**mdep_alphas(episodes, judges), **holistic_alphas(judgements, judges)},
        "flip_rate": None if math.isnan(flip) else round(flip, 4),
        "spearman_empathy_energy": {
            "rho": None if math.isnan(rho) else round(rho, 4),
            "p": None if math.isnan(p) else round(p, 6),
        },
        "n_judges": len(judges),
    }


def original_judge_agreement(original: Sequence[Episode], rescored: Sequence[Episode]) -> dict[str, Any]:
    """How a new panel agrees with an imported run's original judge, per MDEP item.

    Units are the turns both judged: the original judge's valid verdict (a lost judgement is
    left out) against the new panel's median level. Krippendorff's alpha (ordinal) and the
    share of turns with the same level.
    """
    pairs: dict[str, list[tuple[int, int]]] = {f"mdep.{a}.{k}": [] for a in AXES for k in ("progress", "regression")}
    for before, after in zip(original, rescored, strict=True):
        for old, new in zip(before.turns, after.turns, strict=True):
            verdict = old.judgement.verdicts[0] if old.judgement.verdicts else None
            if verdict is None or not verdict.valid or not verdict.axes or not new.judgement.valid:
                continue
            for axis in AXES:
                pairs[f"mdep.{axis}.progress"].append((verdict.axes[axis].progress, new.judgement.progress[axis]))
                pairs[f"mdep.{axis}.regression"].append((verdict.axes[axis].regression, new.judgement.regression[axis]))
    out: dict[str, Any] = {}
    for item, values in pairs.items():
        matrix = np.array(values, dtype=float).T if values else np.empty((2, 0))
        out[item] = {
            "alpha": _alpha(matrix),
            "exact_agreement": round(float(np.mean(matrix[0] == matrix[1])), 4) if values else None,
            "n_turns": len(values),
        }
    return out
