"""Human ratings of a run's own episodes, joined to the panel's holistic scores, as anchored estimates.

A ratings file is JSONL, one line per rated episode (docs/anchor.md):

    {"episode": "<episode key>", "ratings": {"<rater>": {"empathy": 7, "overall": 6, ...}}}

on the holistic rubric's dimensions, 1–10, and `overall` where raters give one. An episode's human
score on a dimension is the mean over its raters. `overall` is set against the panel's mean of the
four dimensions (the panel gives no overall); a rater who gives no `overall` but all four dimensions
counts with their mean. Each subject's estimates are clustered by case (emobench.scoring.ppi).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from emobench.errors import InputError
from emobench.records import HOLISTIC_DIMENSIONS, EpisodeJudgement, mean_scores
from emobench.rundir import RunDir, read_records
from emobench.scoring.ppi import Estimate, anchored_mean, difference, effective_ratings, panel_mean, people_mean

DIMENSIONS = (*HOLISTIC_DIMENSIONS, "overall")
SCALE = (1, 10)
MIN_CASES = 2  # rated episodes from fewer cases give no interval (their clustered variance is 0)


class RatedEpisode(BaseModel):
    """One line of a ratings file."""

    model_config = ConfigDict(extra="forbid")

    episode: str = Field(min_length=1)
    ratings: dict[str, dict[str, int]] = Field(min_length=1)  # rater -> dimension -> 1..10
    rated_at: str | None = None  # when (emobench play writes it)


def read_ratings(path: Path, known: set[str] | None = None) -> dict[str, dict[str, float]]:
    """Episode key -> dimension -> the mean of its raters; the first problem is one InputError naming the line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, "", f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    scores: dict[str, dict[str, dict[str, float]]] = {}  # episode -> dimension -> rater -> score
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = RatedEpisode.model_validate_json(line)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InputError(path, f"line {n}: {'.'.join(str(p) for p in err['loc']) or 'json'}", err["msg"]) from None
        if known is not None and item.episode not in known:
            raise InputError(path, f"line {n}: episode", f"{item.episode!r} is no episode of the runs given "
                             "(keys are subject|case_id|seed, and |human:<handle> where a person played)")
        episode = scores.setdefault(item.episode, {})
        for rater, given in item.ratings.items():
            for dim, score in given.items():
                where = f"line {n}: ratings.{rater}.{dim}"
                if dim not in DIMENSIONS:
                    raise InputError(path, where, f"unknown dimension; one of {', '.join(DIMENSIONS)}")
                if not SCALE[0] <= score <= SCALE[1]:
                    raise InputError(path, where, f"{score} is outside {SCALE[0]}–{SCALE[1]}")
                if rater in episode.get(dim, {}):
                    raise InputError(path, where, "this rater rated this episode's dimension on an earlier line too")
                episode.setdefault(dim, {})[rater] = float(score)
            if "overall" not in given and all(d in given for d in HOLISTIC_DIMENSIONS):
                episode.setdefault("overall", {})[rater] = statistics.fmean(given[d] for d in HOLISTIC_DIMENSIONS)
    if not scores:
        raise InputError(path, "", "no ratings")
    return {key: {dim: statistics.fmean(r.values()) for dim, r in dims.items()} for key, dims in scores.items()}


@dataclass(frozen=True)
class Anchored:
    """One subject's figures on one dimension."""

    subject: str
    dimension: str
    n_rated: int
    n_episodes: int
    people: Estimate
    panel: Estimate
    anchored: Estimate

    @property
    def effective_n(self) -> float:
        return effective_ratings(self.people, self.anchored, self.n_rated)

    def row(self) -> dict[str, Any]:
        def est(e: Estimate) -> dict[str, float]:
            return {"mean": e.mean, "low": e.low, "high": e.high, "se": e.se}

        return {"subject": self.subject, "dimension": self.dimension, "n_rated": self.n_rated,
                "n_episodes": self.n_episodes, "people": est(self.people), "panel": est(self.panel),
                "anchored": {**est(self.anchored), "weight": self.anchored.weight},
                "effective_human_ratings": self.effective_n}


def panel_scores(run_dirs: Sequence[Path]) -> pd.DataFrame:
    """One row per judged episode of the runs: its key, subject, case and the panel's holistic means
    (the last judgement of each episode, as the run's scores take it); `overall` is the four's mean."""
    rows = []
    for run_dir in run_dirs:
        rd = RunDir(run_dir)
        if not rd.episodes.exists():
            raise InputError(rd.episodes, "", "file not found: not a run directory")
        judged = {j.key: j for j in read_records(rd.judgements, EpisodeJudgement)} if rd.judgements.exists() else {}
        for episode in rd.iter_episodes():
            judgement = judged.get(episode.key)
            holistic = mean_scores(judgement.holistic) if judgement else dict.fromkeys(HOLISTIC_DIMENSIONS)
            rows.append({"key": episode.key, "subject": episode.subject, "case_id": episode.case_id, **holistic})
    table = pd.DataFrame(rows, columns=["key", "subject", "case_id", *HOLISTIC_DIMENSIONS]).astype(
        dict.fromkeys(HOLISTIC_DIMENSIONS, float))
    table["overall"] = table[list(HOLISTIC_DIMENSIONS)].mean(axis=1, skipna=False)
    return table


def anchor(table: pd.DataFrame, ratings: dict[str, dict[str, float]], alpha: float = 0.05,
           source: str | Path = "ratings") -> list[Anchored]:
    """Per subject and dimension: people-only, panel-only and anchored estimates over the episodes of
    `table` (panel_scores)."""
    if table.key.duplicated().any():
        raise InputError(source, "", f"episode {table.key[table.key.duplicated()].iloc[0]!r} is in two of the runs given")
    rated = set(ratings) & set(table.key)
    if not rated:
        raise InputError(source, "", "no rated episode is an episode of the runs given")
    out = []
    for subject, group in table.groupby("subject", sort=True):
        for dim in DIMENSIONS:
            scored = group[group[dim].notna()]
            labelled = scored[scored.key.map(lambda k, d=dim: d in ratings.get(k, {}))]
            unlabelled = scored[~scored.key.isin(labelled.key)]
            # a clustered variance needs two cases at least; with one it would read 0
            if labelled.case_id.nunique() < MIN_CASES or unlabelled.empty:
                continue
            y = [ratings[k][dim] for k in labelled.key]
            out.append(Anchored(
                str(subject), dim, len(labelled), len(scored),
                people=people_mean(y, list(labelled.case_id), alpha),
                panel=panel_mean(list(scored[dim]), list(scored.case_id), alpha),
                anchored=anchored_mean(y, list(labelled[dim]), list(unlabelled[dim]), list(labelled.case_id),
                                       list(unlabelled.case_id), alpha),
            ))
    return out


def differences(results: Sequence[Anchored], alpha: float = 0.05) -> list[dict[str, Any]]:
    """Every pair of subjects on every dimension both have: people-only and anchored differences."""
    by = {(r.subject, r.dimension): r for r in results}
    subjects = sorted({r.subject for r in results})
    out = []
    for i, a in enumerate(subjects):
        for b in subjects[i + 1:]:
            for dim in DIMENSIONS:
                if (a, dim) in by and (b, dim) in by:
                    ra, rb = by[a, dim], by[b, dim]
                    people, anchored = difference(ra.people, rb.people, alpha), difference(ra.anchored, rb.anchored, alpha)
                    out.append({"subject_a": a, "subject_b": b, "dimension": dim,
                                "people": {"mean": people.mean, "low": people.low, "high": people.high},
                                "anchored": {"mean": anchored.mean, "low": anchored.low, "high": anchored.high},
                                "excludes_zero": not anchored.low <= 0 <= anchored.high,
                                "effective_human_ratings": _effective(people, anchored, ra.n_rated + rb.n_rated)})
    return out


def _effective(people: Estimate, anchored: Estimate, n: int) -> float:
    value = effective_ratings(people, anchored, n)
    return value if math.isfinite(value) else float(n)
