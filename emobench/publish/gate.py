"""The CI regression gate (docs/method.md §5.7): candidate run vs baseline run, paired by case.

Fail only when the candidate is significantly worse (the 95% CI of candidate - baseline lies
below zero) and the drop is larger than the tolerance. Every metric is higher-is-better.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from emobench.errors import InputError
from emobench.publish.runs import METRICS, Run, load_run
from emobench.scoring.stats import PairedDifference, cases_needed, paired_difference

GATE_METRICS = ("success", *METRICS)
ALPHA = 0.05
POWER = 0.8


@dataclass(frozen=True)
class Side:
    run_id: str
    subject: str
    n_episodes: int
    mean: float  # mean over the paired cases of the per-case mean over seeds


@dataclass(frozen=True)
class GateResult:
    metric: str
    baseline: Side
    candidate: Side
    diff: PairedDifference
    tolerance: float
    detect: float | None  # the difference the study is sized for
    needed_cases: int | None
    seeds_per_case: float
    n_boot: int
    seed: int

    @property
    def regression(self) -> bool:
        return bool(is_regression(self.diff.mean, self.diff.hi, self.tolerance))

    @property
    def exit_code(self) -> int:
        return 1 if self.regression else 0


def is_regression(mean: Any, hi: Any, tolerance: float) -> Any:
    """The gate's rule, elementwise on arrays: significantly worse and beyond the tolerance."""
    return (np.asarray(hi) < 0) & (np.asarray(mean) < -tolerance)


def run_gate(
    baseline: Path,
    candidate: Path,
    *,
    metric: str = "epmq",
    tolerance: float = 0.0,
    detect: float | None = None,
    baseline_subject: str | None = None,
    candidate_subject: str | None = None,
    n_boot: int = 10_000,
    seed: int = 0,
) -> GateResult:
    if metric not in GATE_METRICS:
        raise InputError("gate", "metric", f"unknown {metric!r}; expected one of {GATE_METRICS}")
    if tolerance < 0 or (detect is not None and detect <= 0):
        raise InputError("gate", "tolerance" if tolerance < 0 else "detect", "must be positive")
    base, cand = load_run(Path(baseline)), load_run(Path(candidate))
    if base.registry_version != cand.registry_version:
        raise InputError(cand.path / "manifest.json", "registry_version",
                         f"{cand.registry_version!r} differs from the baseline's "
                         f"{base.registry_version!r}; scores are not comparable")
    if base.prompt_versions != cand.prompt_versions:
        raise InputError(cand.path / "manifest.json", "prompt_versions",
                         "differ from the baseline's; judge scores are not comparable")
    b_subject = _subject(base, baseline_subject, "--baseline-subject")
    c_subject = _subject(cand, candidate_subject, "--candidate-subject")
    b_cases, b_means, b_eps = _per_case(base, b_subject, metric)
    c_cases, c_means, c_eps = _per_case(cand, c_subject, metric)
    common, bi, ci = np.intersect1d(b_cases, c_cases, return_indices=True)
    if common.size < 2:
        raise InputError(cand.path / "scores.parquet", "case_id",
                         f"{common.size} case(s) with {metric} overlap the baseline; need 2")
    diff = paired_difference(c_means[ci] - b_means[bi], n_boot=n_boot, seed=seed,
                             alpha=ALPHA, power=POWER)
    target = detect if detect is not None else (tolerance if tolerance > 0 else None)
    seeds = float((b_eps[bi].sum() + c_eps[ci].sum()) / (2 * common.size))
    return GateResult(
        metric=metric,
        baseline=Side(base.run_id, b_subject, int(b_eps[bi].sum()), float(b_means[bi].mean())),
        candidate=Side(cand.run_id, c_subject, int(c_eps[ci].sum()), float(c_means[ci].mean())),
        diff=diff,
        tolerance=tolerance,
        detect=target,
        needed_cases=(cases_needed(target, diff.sd, alpha=ALPHA, power=POWER)
                      if target is not None else None),
        seeds_per_case=seeds,
        n_boot=n_boot,
        seed=seed,
    )


def _subject(run: Run, requested: str | None, option: str) -> str:
    subjects = sorted(pc.unique(run.scores.column("subject")).to_pylist())
    if requested is not None:
        if requested not in subjects:
            raise InputError(run.path / "scores.parquet", "subject",
                             f"{requested!r} not found; have {subjects}")
        return requested
    if len(subjects) != 1:
        raise InputError(run.path / "scores.parquet", "subject",
                         f"{len(subjects)} subjects {subjects}; choose one with {option}")
    return str(subjects[0])


def _per_case(run: Run, subject: str, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted case ids, their mean over seeds, and episodes counted (cases with a value only)."""
    rows = run.scores.filter(pc.equal(run.scores.column("subject"), subject))
    rows = rows.select(["case_id", metric]).set_column(
        1, metric, pc.cast(rows.column(metric), pa.float64())
    )
    agg = rows.group_by("case_id").aggregate([(metric, "mean"), (metric, "count")])
    agg = agg.filter(pc.is_valid(agg.column(f"{metric}_mean"))).sort_by("case_id")
    return (
        np.array(agg.column("case_id").to_pylist(), dtype=object),
        agg.column(f"{metric}_mean").to_numpy(),
        agg.column(f"{metric}_count").to_numpy(),
    )


def summary_markdown(r: GateResult) -> str:
    """A short markdown report that fits a CI job summary."""
    d = r.diff
    verdict = "FAIL" if r.regression else "PASS"
    if r.regression:
        why = f"significant regression of {-d.mean:.3f}, larger than the tolerance {r.tolerance:g}"
    elif d.hi < 0:
        why = f"significant regression of {-d.mean:.3f}, within the tolerance {r.tolerance:g}"
    elif d.lo > 0:
        why = "significant improvement"
    else:
        why = "no significant difference"
    lines = [
        f"## emobench gate: **{verdict}** (`{r.metric}`)",
        "",
        "| | baseline | candidate |",
        "|---|---|---|",
        f"| run | `{r.baseline.run_id}` | `{r.candidate.run_id}` |",
        f"| subject | `{r.baseline.subject}` | `{r.candidate.subject}` |",
        f"| mean over {d.n} paired cases | {r.baseline.mean:.3f} | {r.candidate.mean:.3f} |",
        f"| episodes | {r.baseline.n_episodes} | {r.candidate.n_episodes} |",
        "",
        f"- Verdict: {why}.",
        f"- Difference (candidate - baseline): **{d.mean:+.3f}**, 95% CI "
        f"[{d.lo:+.3f}, {d.hi:+.3f}] (bootstrap by case, {r.n_boot} resamples, seed {r.seed}).",
        f"- Minimum detectable difference (alpha {ALPHA}, power {POWER}, {d.n} cases): "
        f"{d.mdd:.3f}.",
        f"- Tolerance: {r.tolerance:g}.",
    ]
    if r.detect is not None and r.needed_cases is not None:
        more = max(0, r.needed_cases - d.n)
        lines.append(
            f"- To detect a difference of {r.detect:g}: {r.needed_cases} paired cases "
            f"({more} more, about {round(more * r.seeds_per_case)} more episodes per run at "
            f"{r.seeds_per_case:.3g} seeds per case)."
        )
    else:
        lines.append("- Pass `--detect X` (or a tolerance) to size a study for a difference X.")
    if r.tolerance > 0 and d.mdd > r.tolerance:
        lines.append(
            f"- Underpowered: the minimum detectable difference exceeds the tolerance, so a "
            f"regression of {r.tolerance:g} may go unnoticed."
        )
    return "\n".join(lines) + "\n"
