"""The CI regression gate (docs/method.md §5.7): candidate vs baseline, paired by case.

The baseline is a run directory or a published bundle (cases.parquet). Each (slice, metric)
pair gets a verdict: fail only when the candidate is significantly worse (the 95% CI of
candidate - baseline lies below zero) and the drop is larger than that metric's tolerance. The
gate fails when any verdict fails. Every metric is higher-is-better.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from emobench.errors import InputError
from emobench.gate.baseline import GateSide, check_comparable, load_side
from emobench.publish.case_scores import CASE_METRICS
from emobench.publish.columns import CHALLENGING, DEFENSIVE
from emobench.publish.runs import SLICE_LEVELS
from emobench.scoring.stats import PairedDifference, cases_needed, paired_difference

GATE_METRICS = CASE_METRICS
ALPHA = 0.05
POWER = 0.8
# family -> (case attribute, its levels on the harder side, the two mode names)
_TWO_WAY = {
    "mechanism_stress": ("difficulty", CHALLENGING, ("routine", "challenging")),
    "persona_resilience": ("threshold", DEFENSIVE, ("receptive", "defensive")),
}


@dataclass(frozen=True)
class Side:
    source: str
    subject: str
    n_episodes: int  # episodes of the paired cases
    mean: float  # mean over the paired cases of the per-case mean over seeds


@dataclass(frozen=True)
class GateResult:
    metric: str
    slice: str
    baseline: Side
    candidate: Side
    diff: PairedDifference
    tolerance: float
    detect: float | None  # the difference the study is sized for
    needed_cases: int | None
    seeds_per_case: float

    @property
    def regression(self) -> bool:
        return bool(is_regression(self.diff.mean, self.diff.hi, self.tolerance))


@dataclass(frozen=True)
class GateReport:
    results: list[GateResult]
    notes: list[str]  # provenance differences that do not block the comparison
    n_boot: int
    seed: int

    @property
    def exit_code(self) -> int:
        return 1 if any(r.regression for r in self.results) else 0


def is_regression(mean: Any, hi: Any, tolerance: float) -> Any:
    """The gate's rule, elementwise on arrays: significantly worse and beyond the tolerance."""
    return (np.asarray(hi) < 0) & (np.asarray(mean) < -tolerance)


def per_metric(values: Sequence[str], metrics: Sequence[str], option: str) -> dict[str, float]:
    """Parse `X` (every metric) and `metric=X` (one metric) into one value per metric."""
    out: dict[str, float] = {}
    for text in values:
        name, sep, number = text.rpartition("=")
        targets = [name] if sep else list(metrics)
        if sep and name not in metrics:
            raise InputError("gate", option, f"{text!r} names {name!r}, not a gated metric "
                             f"{tuple(metrics)}")
        try:
            value = float(number)
        except ValueError:
            raise InputError("gate", option, f"{text!r} is not X or METRIC=X") from None
        if value < 0 or (option == "detect" and value == 0):
            raise InputError("gate", option, f"{text!r}: must be positive")
        out.update(dict.fromkeys(targets, value))
    return out


def slice_mask(spec: str, cases: pa.Table) -> np.ndarray:
    """Which rows of a per-case table a slice keeps, from its spec `family=label`.

    overall; category=NAME; dominant_axis|difficulty|threshold|valence|language=LEVEL; and the leaderboard's
    two-way families with or without the axis: persona_resilience=defensive,
    mechanism_stress=A/challenging.
    """
    family, _, label = spec.partition("=")
    n = cases.num_rows
    if spec in ("overall", "overall=all"):
        return np.ones(n, dtype=bool)

    def column(name: str) -> np.ndarray:
        return np.array(cases.column(name).to_pylist(), dtype=object)

    if family == "category" and label:
        return np.asarray(column("category") == label)
    if family in SLICE_LEVELS and label in SLICE_LEVELS[family]:
        return np.asarray(column(family) == label)
    if family in _TWO_WAY:
        attr, harder, modes = _TWO_WAY[family]
        axis, _, mode = label.rpartition("/")
        if mode in modes and axis in ("", *SLICE_LEVELS["dominant_axis"]):
            keep = np.isin(column(attr), harder) == (mode == modes[1])
            return np.asarray(keep & ((column("dominant_axis") == axis) if axis else True))
    raise InputError("gate", "slice", f"{spec!r}: expected overall, category=NAME, "
                     "dominant_axis|difficulty|threshold|valence|language=LEVEL, persona_resilience=[AXIS/]"
                     "receptive|defensive or mechanism_stress=[AXIS/]routine|challenging")


def run_gate(
    baseline: Path,
    candidate: Path,
    *,
    metrics: Sequence[str] = ("epmq",),
    slices: Sequence[str] = ("overall",),
    tolerance: dict[str, float] | None = None,
    detect: dict[str, float] | None = None,
    baseline_subject: str | None = None,
    candidate_subject: str | None = None,
    n_boot: int = 10_000,
    seed: int = 0,
) -> GateReport:
    metrics = list(dict.fromkeys(metrics)) or ["epmq"]
    for metric in metrics:
        if metric not in GATE_METRICS:
            raise InputError("gate", "metric", f"unknown {metric!r}; expected one of {GATE_METRICS}")
    tolerance, detect = tolerance or {}, detect or {}
    if any(v < 0 for v in tolerance.values()) or any(v <= 0 for v in detect.values()):
        raise InputError("gate", "tolerance" if any(v < 0 for v in tolerance.values())
                         else "detect", "must be positive")
    base = load_side(Path(baseline), baseline_subject, "--baseline-subject")
    cand = load_side(Path(candidate), candidate_subject, "--candidate-subject")
    notes = check_comparable(base, cand)
    results = [
        _compare(base, cand, metric, spec, tolerance.get(metric, 0.0), detect.get(metric),
                 n_boot=n_boot, seed=seed)
        for spec in dict.fromkeys(slices or ["overall"])
        for metric in metrics
    ]
    return GateReport(results, notes, n_boot, seed)


def _compare(
    base: GateSide, cand: GateSide, metric: str, spec: str, tolerance: float,
    detect: float | None, *, n_boot: int, seed: int,
) -> GateResult:
    b_cases, b_means, b_eps = _per_case(base, metric, spec)
    c_cases, c_means, c_eps = _per_case(cand, metric, spec)
    common, bi, ci = np.intersect1d(b_cases, c_cases, return_indices=True)
    if common.size < 2:
        raise InputError(cand.where, "case_id", f"{common.size} case(s) with {metric} in slice "
                         f"{spec!r} overlap the baseline; need 2")
    diff = paired_difference(c_means[ci] - b_means[bi], n_boot=n_boot, seed=seed,
                             alpha=ALPHA, power=POWER)
    target = detect if detect is not None else (tolerance if tolerance > 0 else None)
    return GateResult(
        metric=metric,
        slice=spec,
        baseline=Side(base.source, base.subject, int(b_eps[bi].sum()), float(b_means[bi].mean())),
        candidate=Side(cand.source, cand.subject, int(c_eps[ci].sum()), float(c_means[ci].mean())),
        diff=diff,
        tolerance=tolerance,
        detect=target,
        needed_cases=(cases_needed(target, diff.sd, alpha=ALPHA, power=POWER)
                      if target is not None else None),
        seeds_per_case=float((b_eps[bi].sum() + c_eps[ci].sum()) / (2 * common.size)),
    )


def _per_case(side: GateSide, metric: str, spec: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted case ids of the slice with a value, their mean over seeds, and their episodes."""
    rows = side.cases.filter(pa.array(slice_mask(spec, side.cases)))
    rows = rows.filter(pc.is_valid(rows.column(metric))).sort_by("case_id")
    return (
        np.array(rows.column("case_id").to_pylist(), dtype=object),
        rows.column(metric).to_numpy(zero_copy_only=False).astype(np.float64),
        rows.column("n_episodes").to_numpy(zero_copy_only=False),
    )
