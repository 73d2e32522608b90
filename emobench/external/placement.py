"""Placing a model on EMPA's published leaderboard through a reference model played beside it.

EMPA generated each published episode once, unseeded, with its own prompts; a new run on its
cases cannot reproduce a published score. So the comparison is relative: the run plays one
published reference model k times beside the user's model on the same cases (configs/
empa-protocol.yaml), and

- the reference's offset is (mean of its k run scores) - (its published score);
- the user's model is placed at (its mean of k run scores) - offset.

A run score is the mean over the cases of one seed's episodes. The published score is one
run, so its own run-to-run spread counts as well as that of our k runs: with s the standard
deviation of the reference's k run scores, the offset's standard error is s·sqrt(1 + 1/k),
and the placed score's adds the user's model's s_u²/k_u. The 95% intervals use Student's t with
min(k, k_u) - 1 degrees of freedom: at k = 3, t = 4.30, so the intervals are wide. The method
assumes the protocol moves both models by the same amount; nothing here tests that.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from scipy import stats

from emobench.errors import InputError
from emobench.rundir import RunDir

CI = 0.95
METRIC = "epmq_empa"  # EPM-Q under EMPA's own definitions: what its leaderboard reports
NAME_COLUMN, SCORE_COLUMN = "Model", "EPM-Q Score"


@dataclass(frozen=True)
class Runs:
    subject: str
    scores: list[float]  # one per seed: the mean over the cases

    @property
    def k(self) -> int:
        return len(self.scores)

    @property
    def mean(self) -> float:
        return sum(self.scores) / self.k

    @property
    def sd(self) -> float:
        return float(pd.Series(self.scores).std(ddof=1))


def read_published(path: Path) -> dict[str, float]:
    """EMPA's leaderboard: model name -> its EPM-Q, from its analysis_figures/01_tables/epmq_summary.csv
    or from a bundle of `emobench external empa` (EMPA's own per-case values averaged, by folder name)."""
    if path.is_dir() or path.suffix == ".parquet":
        return _bundle_published(path / "leaderboard.parquet" if path.is_dir() else path)
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise InputError(path, "", f"not readable: {exc.strerror}") from None
    if not rows or NAME_COLUMN not in rows[0] or SCORE_COLUMN not in rows[0]:
        raise InputError(path, f"{NAME_COLUMN}/{SCORE_COLUMN}", "missing column")
    published = {}
    for number, row in enumerate(rows, start=2):
        try:
            published[row[NAME_COLUMN].strip()] = float(row[SCORE_COLUMN])
        except (TypeError, ValueError):
            raise InputError(path, f"line {number}: {SCORE_COLUMN}", f"not a number: {row[SCORE_COLUMN]!r}") from None
    return published


def _bundle_published(path: Path) -> dict[str, float]:
    try:
        table = pd.read_parquet(path, columns=["slice_family", "subject", "epmq_empa_published"])
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(path, "epmq_empa_published", f"not a bundle leaderboard: {exc}") from None
    overall = table[table["slice_family"] == "overall"]
    if overall.empty:
        raise InputError(path, "slice_family", "no overall rows")
    return {str(s): float(v) for s, v in zip(overall["subject"], overall["epmq_empa_published"], strict=True)}


def run_scores(run_dirs: list[Path]) -> tuple[dict[str, Runs], int, str]:
    """Per subject, its run scores (one per seed), from finished runs on one split version."""
    frames, versions = [], set()
    for path in run_dirs:
        rd = RunDir(path)
        manifest = rd.read_manifest()
        versions.add((manifest.get("split"), manifest.get("registry_version")))
        if not rd.scores.exists():
            raise InputError(rd.scores, "", "missing: the run is not finished (emobench run --resume finishes it)")
        frames.append(pd.read_parquet(rd.scores, columns=["subject", "case_id", "seed", METRIC]))
    if len(versions) != 1:
        raise InputError(run_dirs[-1] / "manifest.json", "registry_version", "the runs are of different splits or cards")
    ((split, _),) = versions
    scores = pd.concat(frames).drop_duplicates(["subject", "case_id", "seed"])
    if scores[METRIC].isna().any():
        bad = scores[scores[METRIC].isna()].iloc[0]
        raise InputError(run_dirs[0] / "scores.parquet", METRIC, f"no score for {bad.subject} on {bad.case_id} seed {bad.seed}")
    cases = set(scores["case_id"])
    runs = {}
    for subject, rows in scores.groupby("subject"):
        for seed, seed_rows in rows.groupby("seed"):
            missing = sorted(cases - set(seed_rows["case_id"]))
            if missing:
                raise InputError(run_dirs[0], "episodes", f"{subject} seed {seed} has no episode on {', '.join(missing[:3])}")
        per_seed = rows.groupby("seed")[METRIC].mean()
        runs[str(subject)] = Runs(str(subject), [float(x) for x in per_seed])
    return runs, len(cases), str(split)


def _interval(centre: float, se: float, dof: int) -> list[float]:
    half = float(stats.t.ppf(0.5 + CI / 2, dof)) * se
    return [centre - half, centre + half]


def place(run_dirs: list[Path], reference: str, published_file: Path, published_name: str | None = None) -> dict[str, Any]:
    """The reference's offset and every other subject placed on the published leaderboard."""
    published = read_published(published_file)
    name = published_name or reference
    if name not in published:
        raise InputError(published_file, NAME_COLUMN, f"no model {name!r} (known: {', '.join(published)})")
    runs, n_cases, split = run_scores(run_dirs)
    if reference not in runs:
        raise InputError(run_dirs[0], "subject", f"no reference subject {reference!r} (found: {', '.join(runs)})")
    ref = runs[reference]
    if ref.k < 2:
        raise InputError(run_dirs[0], "seeds", f"{reference} has {ref.k} run; the offset needs at least 2 (3 by default)")
    offset = ref.mean - published[name]
    offset_se = ref.sd * math.sqrt(1 + 1 / ref.k)
    placed = []
    for subject, own in sorted(runs.items()):
        if subject == reference:
            continue
        if own.k < 2:
            raise InputError(run_dirs[0], "seeds", f"{subject} has {own.k} run; placing it needs at least 2")
        dof = min(own.k, ref.k) - 1
        score = own.mean - offset
        lo, hi = _interval(score, math.sqrt(own.sd**2 / own.k + offset_se**2), dof)
        placed.append({
            "subject": subject, "runs": own.scores, "k": own.k, "mean": own.mean, "sd": own.sd,
            "placed": score, "placed_ci": [lo, hi], "dof": dof,
            "rank": 1 + sum(v > score for v in published.values()),
            "rank_range": [1 + sum(v > hi for v in published.values()), 1 + sum(v > lo for v in published.values())],
            "within_interval": sorted((m for m, v in published.items() if lo <= v <= hi), key=lambda m: -published[m]),
        })
    return {
        "metric": METRIC,
        "split": split,
        "n_cases": n_cases,
        "ci": CI,
        "reference": {
            "subject": reference, "published_name": name, "published": published[name], "runs": ref.scores,
            "k": ref.k, "mean": ref.mean, "sd": ref.sd, "offset": offset,
            "offset_ci": _interval(offset, offset_se, ref.k - 1), "t": float(stats.t.ppf(0.5 + CI / 2, ref.k - 1)),
        },
        "placed": placed,
        "published": dict(sorted(published.items(), key=lambda kv: -kv[1])),
        "notes": [
            f"{ref.k} runs of the reference: the 95% intervals use t = {stats.t.ppf(0.5 + CI / 2, ref.k - 1):.2f} "
            f"({ref.k - 1} degrees of freedom), so they are wide; more runs (--seeds) narrow them.",
            "The published score is one unseeded run under EMPA's own prompts; its run-to-run spread is taken to be "
            "the reference's, and the offset is assumed to be the same for every model (not tested).",
        ],
    }
