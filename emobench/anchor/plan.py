"""Which episodes to rate: a seeded random draw, so that the rated episodes are a random sample of the
run's and the anchored interval's guarantee holds. A hand-picked set (the interesting ones, the first
ones) breaks it: the people's mean over those is not their mean over all."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd

from emobench.errors import InputError


def draw_plan(table: pd.DataFrame, n: int, seed: int, per_subject: bool = True) -> list[dict[str, object]]:
    """n episodes of `table` (emobench.scoring.anchoring.panel_scores) drawn without replacement: per
    subject as evenly as n allows (each subject's estimate then rests on its own random sample), or
    uniformly over all episodes."""
    subject_of = dict(zip(table.key, table.subject, strict=True))
    keys = sorted(subject_of)
    if not 1 <= n <= len(keys):
        raise InputError("--plan", "", f"{n} episodes asked for; the runs hold {len(keys)}")
    rng = np.random.default_rng(seed)
    if per_subject:
        subjects = sorted(set(subject_of.values()))
        chosen: list[str] = []
        for i, subject in enumerate(subjects):
            theirs = [k for k in keys if subject_of[k] == subject]
            take = min(len(theirs), n // len(subjects) + (i < n % len(subjects)))
            chosen += [theirs[j] for j in sorted(rng.choice(len(theirs), take, replace=False))]
    else:
        chosen = [keys[j] for j in sorted(rng.choice(len(keys), n, replace=False))]
    how = "per subject" if per_subject else "uniform"
    return [{"episode": key, "plan": {"seed": seed, "draw": how, "of": len(keys)}} for key in chosen]


def plan_lines(plan: Sequence[dict[str, object]]) -> str:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in plan)
