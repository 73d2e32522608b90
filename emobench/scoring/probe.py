"""Persona-probe scores (docs/method.md §5.6): the subject's inferences against the hidden card, and how
success and EPM-Q vary across each counterfactual set (one scenario, several personas)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from emobench.records import ProbeAnswer
from emobench.registry import Persona
from emobench.registry.models import THRESHOLDS


def probe_scores(answer: ProbeAnswer | None, persona: Persona) -> dict[str, Any]:
    """need_correct, threshold_correct, threshold_distance (steps apart on low < medium < high),
    big_five_correct (share of the two named traits whose pole matches the card) and accuracy,
    the mean of the three. Every value is None when the probe gave no valid answer."""
    if answer is None:
        return dict.fromkeys(("need_correct", "threshold_correct", "threshold_distance", "big_five_correct", "accuracy"))
    need_correct = answer.dominant_need == persona.needs.dominant
    distance = abs(THRESHOLDS.index(answer.threshold) - THRESHOLDS.index(persona.threshold))
    matches = [persona.big_five[trait] == pole for trait, pole in answer.big_five.items()]  # type: ignore[index]
    big_five = sum(matches) / len(matches)
    return {
        "need_correct": need_correct,
        "threshold_correct": distance == 0,
        "threshold_distance": distance,
        "big_five_correct": big_five,
        "accuracy": (float(need_correct) + float(distance == 0) + big_five) / 3,
    }


def counterfactual_spread(df: pd.DataFrame) -> pd.DataFrame:
    """Per subject and counterfactual set: how many personas played it, and the spread of the
    per-persona success rate and mean EPM-Q (min, max and range = max − min).

    Per persona, episodes are first averaged over seeds within a case and then over cases, as
    every split score is (docs/method.md §5.7). Rows outside any counterfactual set are ignored; a null
    EPM-Q is left out of the mean.
    """
    columns = ["subject", "counterfactual_set", "n_personas",
               "success_min", "success_max", "success_range", "epmq_min", "epmq_max", "epmq_range"]
    rows = df[df["counterfactual_set"].notna()]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    rows = rows.assign(success=rows["success"].astype(float), epmq=rows["epmq"].astype(float))
    keys = ["subject", "counterfactual_set", "persona_id"]
    per_case = rows.groupby([*keys, "case_id"])[["success", "epmq"]].mean()
    per_persona = per_case.groupby(level=keys)[["success", "epmq"]].mean()
    spread = per_persona.groupby(level=["subject", "counterfactual_set"]).agg(
        n_personas=("success", "size"),
        success_min=("success", "min"),
        success_max=("success", "max"),
        epmq_min=("epmq", "min"),
        epmq_max=("epmq", "max"),
    )
    spread["success_range"] = spread["success_max"] - spread["success_min"]
    spread["epmq_range"] = spread["epmq_max"] - spread["epmq_min"]
    return spread.reset_index()[columns]
